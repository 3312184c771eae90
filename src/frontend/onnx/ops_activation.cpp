// Activation ONNX ops (Relu, LeakyRelu, PRelu, Elu, Selu, Celu, HardSigmoid, HardSwish,
// Softplus, Softsign, ThresholdedRelu, Shrink) written with core elementwise ops, and Softmax /
// LogSoftmax / Hardmax, including the 2-D coercion those had before opset 13.
#include "frontend/onnx/op_context.h"

namespace kiln::onnx {

namespace {

// Scalar constant `v` broadcast to x's shape.
Value* k(OpContext& c, Value* x, double v) { return splat(c.b, x, v); }

StatusOr<Value*> input0(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  return c.req(0);
}

Status relu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  c.setOutput(0, c.b.max(x, k(c, x, 0)));
  return Status::ok();
}

Status leakyRelu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  double alpha = c.attrFloat("alpha", 0.01);
  Value* neg = c.b.compare("lt", x, k(c, x, 0));
  c.setOutput(0, c.b.select(neg, c.b.mul(x, k(c, x, alpha)), x));
  return Status::ok();
}

Status prelu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  KILN_ASSIGN_OR_RETURN(Value * slope, c.req(1));
  KILN_RETURN_IF_ERROR(sameDType(c, {x, slope}));
  KILN_ASSIGN_OR_RETURN(slope, broadcastUni(c, slope, x->type().dims()));
  Value* neg = c.b.compare("lt", x, k(c, x, 0));
  c.setOutput(0, c.b.select(neg, c.b.mul(x, slope), x));
  return Status::ok();
}

// alpha * (exp(x) - 1) for x < 0 (x itself otherwise), scaled by gamma.
Status eluLike(OpContext& c, double alpha, double gamma) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  Value* zero = k(c, x, 0);
  Value* negPart = c.b.mul(c.b.unary(OpCode::Expm1, c.b.min(x, zero)), k(c, x, alpha));
  Value* y = c.b.select(c.b.compare("gt", x, zero), x, negPart);
  if (gamma != 1.0) y = c.b.mul(y, k(c, x, gamma));
  c.setOutput(0, y);
  return Status::ok();
}
Status elu(OpContext& c) { return eluLike(c, c.attrFloat("alpha", 1.0), 1.0); }
Status selu(OpContext& c) {
  return eluLike(c, c.attrFloat("alpha", 1.67326319217681884765625),
                 c.attrFloat("gamma", 1.05070102214813232421875));
}

// max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
Status celu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  double alpha = c.attrFloat("alpha", 1.0);
  Value* zero = k(c, x, 0);
  Value* e = c.b.mul(c.b.unary(OpCode::Expm1, c.b.div(x, k(c, x, alpha))), k(c, x, alpha));
  c.setOutput(0, c.b.add(c.b.max(x, zero), c.b.min(e, zero)));
  return Status::ok();
}

// max(0, min(1, alpha * x + beta)), times x for HardSwish.
Value* hardSigmoidOf(OpContext& c, Value* x, double alpha, double beta) {
  Value* y = c.b.add(c.b.mul(x, k(c, x, alpha)), k(c, x, beta));
  return c.b.max(k(c, x, 0), c.b.min(k(c, x, 1), y));
}
Status hardSigmoid(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  c.setOutput(0, hardSigmoidOf(c, x, c.attrFloat("alpha", 0.2), c.attrFloat("beta", 0.5)));
  return Status::ok();
}
Status hardSwish(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  c.setOutput(0, c.b.mul(x, hardSigmoidOf(c, x, 1.0 / 6.0, 0.5)));
  return Status::ok();
}

// log(1 + exp(x))
Status softplus(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  c.setOutput(0, c.b.unary(OpCode::Log1p, c.b.unary(OpCode::Exp, x)));
  return Status::ok();
}

// x / (1 + |x|)
Status softsign(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  c.setOutput(0, c.b.div(x, c.b.add(k(c, x, 1), c.b.unary(OpCode::Abs, x))));
  return Status::ok();
}

Status thresholdedRelu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  double alpha = c.attrFloat("alpha", 1.0);
  c.setOutput(0, c.b.select(c.b.compare("gt", x, k(c, x, alpha)), x, k(c, x, 0)));
  return Status::ok();
}

// x + bias below -lambd, x - bias above lambd, 0 between.
Status shrink(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, input0(c));
  double bias = c.attrFloat("bias", 0.0), lambd = c.attrFloat("lambd", 0.5);
  Value* y =
      c.b.select(c.b.compare("gt", x, k(c, x, lambd)), c.b.sub(x, k(c, x, bias)), k(c, x, 0));
  c.setOutput(0, c.b.select(c.b.compare("lt", x, k(c, x, -lambd)), c.b.add(x, k(c, x, bias)), y));
  return Status::ok();
}

// ---- Softmax family ----

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

// One-hot of the first maximum along `axis`, in x's dtype.
Value* hardmaxAlong(OpContext& c, Value* x, int64_t axis) {
  Value* idx = c.b.op(OpCode::ArgMax, {x}, {{"axis", intAttr(axis)}});
  if (!idx) return nullptr;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < x->type().rank(); ++i)
    if (i != axis) keep.push_back(i);
  Value* idxB = c.b.broadcastInDim(idx, x->type().dims(), keep);
  Value* iota = c.b.iota(x->type().withDType(DType::I64), axis);
  return c.b.convert(c.b.compare("eq", iota, idxB), x->type().dtype());
}

Value* softAlong(OpContext& c, SoftKind kind, Value* x, int64_t axis) {
  switch (kind) {
    case SoftKind::Softmax: return c.b.op(OpCode::Softmax, {x}, {{"axis", intAttr(axis)}});
    case SoftKind::LogSoftmax: return c.b.op(OpCode::LogSoftmax, {x}, {{"axis", intAttr(axis)}});
    case SoftKind::Hardmax: return hardmaxAlong(c, x, axis);
  }
  return nullptr;
}

// Before opset 13 the input is seen as 2-D [prod(d < axis), prod(d >= axis)].
template <SoftKind Kind>
Status softCoerced(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  if (rank == 0) return c.err("the input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 1), rank));
  if (axis == rank - 1) {
    c.setOutput(0, softAlong(c, Kind, x, axis));
    return Status::ok();
  }
  const Shape& d = x->type().dims();
  auto outer = dimProduct(Shape(d.begin(), d.begin() + axis));
  auto inner = dimProduct(Shape(d.begin() + axis, d.end()));
  if (!outer || !inner)
    return c.unsupported("coercing " + x->type().str() + " to 2-D needs static dimensions");
  Value* flat = c.b.reshape(x, {*outer, *inner});
  ONNX_BUILT(c, flat);
  Value* y = softAlong(c, Kind, flat, 1);
  ONNX_BUILT(c, y);
  c.setOutput(0, c.b.reshape(y, d));
  return Status::ok();
}

template <SoftKind Kind>
Status softAxis(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  if (rank == 0) return c.err("the input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", -1), rank));
  c.setOutput(0, softAlong(c, Kind, x, axis));
  return Status::ok();
}

}  // namespace

void addActivationOps(OpTable& t) {
  t.add("Relu", 1, relu);
  t.add("LeakyRelu", 1, leakyRelu);
  t.add("PRelu", 1, prelu);
  t.add("Elu", 1, elu);
  t.add("Selu", 1, selu);
  t.add("Celu", 12, celu);
  t.add("HardSigmoid", 1, hardSigmoid);
  t.add("HardSwish", 14, hardSwish);
  t.add("Softplus", 1, softplus);
  t.add("Softsign", 1, softsign);
  t.add("ThresholdedRelu", 10, thresholdedRelu);
  t.add("Shrink", 9, shrink);
  t.add("Softmax", 1, softCoerced<SoftKind::Softmax>);
  t.add("Softmax", 13, softAxis<SoftKind::Softmax>);
  t.add("LogSoftmax", 1, softCoerced<SoftKind::LogSoftmax>);
  t.add("LogSoftmax", 13, softAxis<SoftKind::LogSoftmax>);
  t.add("Hardmax", 1, softCoerced<SoftKind::Hardmax>);
  t.add("Hardmax", 13, softAxis<SoftKind::Hardmax>);
}

}  // namespace kiln::onnx
