// Elementwise ONNX ops: unary math, binary arithmetic with numpy broadcasting (and the
// attribute-driven broadcasting of opsets before 7), comparisons, logic, variadic Sum/Mean/Max/
// Min, Where, Cast/CastLike and Clip.
#include <cmath>

#include "frontend/onnx/op_context.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {

template <OpCode Op>
Status unary(OpContext& c) {
  c.ignoreAttr("consumed_inputs");  // opset 1 memory-planning hint
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  c.setOutput(0, c.b.unary(Op, x));
  return Status::ok();
}

// Opsets before 7: B is broadcast onto A only when `broadcast` = 1, aligned at `axis`
// (default: the trailing dims).
StatusOr<std::vector<Value*>> legacyBroadcast(OpContext& c, Value* a, Value* b) {
  c.ignoreAttr("consumed_inputs");
  int64_t broadcast = c.attrInt("broadcast", 0);
  int64_t ra = a->type().rank(), rb = b->type().rank();
  if (!broadcast) {
    c.ignoreAttr("axis");
    if (a->type().dims() != b->type().dims())
      return c.err("inputs have shapes " + a->type().str() + " and " + b->type().str() +
                   " and broadcast = 0");
    return std::vector<Value*>{a, b};
  }
  if (rb > ra)
    return c.err("with broadcast = 1 the second input's rank must not exceed the first's");
  int64_t axis = c.attrInt("axis", ra - rb);
  KILN_ASSIGN_OR_RETURN(axis, normAxis(axis, ra));
  if (axis + rb > ra) return c.err("axis " + std::to_string(axis) + " leaves too few dimensions");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rb; ++i) dims.push_back(axis + i);
  Value* bb = c.b.broadcastInDim(b, a->type().dims(), dims);
  ONNX_BUILT(c, bb);
  return std::vector<Value*>{a, bb};
}

template <OpCode Op>
Status binaryLegacy(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
  KILN_ASSIGN_OR_RETURN(auto vs, legacyBroadcast(c, a, b));
  c.setOutput(0, c.b.binary(Op, vs[0], vs[1]));
  return Status::ok();
}

template <OpCode Op>
Status binary(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * r, bcastBinary(c, Op, a, b));
  c.setOutput(0, r);
  return Status::ok();
}

// Comparison ops; `Legacy` selects the pre-7 broadcasting.
template <const char* Dir, bool Legacy>
Status compare(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  if (Legacy) {
    KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
    KILN_ASSIGN_OR_RETURN(auto vs, legacyBroadcast(c, a, b));
    c.setOutput(0, c.b.compare(Dir, vs[0], vs[1]));
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(Value * r, bcastCompare(c, Dir, a, b));
  c.setOutput(0, r);
  return Status::ok();
}
constexpr char kEq[] = "eq", kLt[] = "lt", kGt[] = "gt", kLe[] = "le", kGe[] = "ge";

// Sum / Max / Min / Mean over any number of inputs, with numpy broadcasting.
Status variadic(OpContext& c, OpCode op, bool mean) {
  c.ignoreAttr("consumed_inputs");
  std::vector<Value*> xs = c.allInputs();
  if (xs.empty()) return c.err("needs at least one input");
  for (Value* x : xs)
    if (!x) return c.err("an input is not defined");
  KILN_RETURN_IF_ERROR(sameDType(c, xs));
  KILN_ASSIGN_OR_RETURN(xs, broadcastAll(c, xs));
  Value* acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) acc = c.b.binary(op, acc, xs[i]);
  if (mean && xs.size() > 1) acc = c.b.div(acc, splat(c.b, acc, static_cast<double>(xs.size())));
  c.setOutput(0, acc);
  return Status::ok();
}
Status sum(OpContext& c) { return variadic(c, OpCode::Add, false); }
Status mean(OpContext& c) { return variadic(c, OpCode::Add, true); }
Status maxOp(OpContext& c) { return variadic(c, OpCode::Max, false); }
Status minOp(OpContext& c) { return variadic(c, OpCode::Min, false); }

Status reciprocal(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  c.setOutput(0, c.b.div(splat(c.b, x, 1.0), x));
  return Status::ok();
}

Status isInf(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  bool neg = c.attrInt("detect_negative", 1) != 0, pos = c.attrInt("detect_positive", 1) != 0;
  Value* inf = c.b.unary(OpCode::IsInf, x);
  if (neg && pos) {
    c.setOutput(0, inf);
    return Status::ok();
  }
  if (!neg && !pos) {
    c.setOutput(0, c.b.binary(OpCode::Xor, inf, inf));  // detects nothing: all false
    return Status::ok();
  }
  Value* side = c.b.compare(pos ? "gt" : "lt", x, splat(c.b, x, 0.0));
  c.setOutput(0, c.b.binary(OpCode::And, inf, side));
  return Status::ok();
}

Status whereOp(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * cond, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(2));
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
  KILN_ASSIGN_OR_RETURN(auto vs, broadcastAll(c, {cond, a, b}));
  c.setOutput(0, c.b.select(vs[0], vs[1], vs[2]));
  return Status::ok();
}

StatusOr<DType> castTarget(OpContext& c) {
  const pb::AttributeProto* to = c.rawAttr("to");
  if (!to) return c.err("attribute 'to' is required");
  int code = 0;
  if (to->type() == pb::AttributeProto::STRING || (!to->has_i() && to->has_s())) {
    // Opset 1 names the type ("FLOAT").
    pb::TensorProto_DataType t;
    if (!pb::TensorProto_DataType_Parse(to->s(), &t))
      return c.err("attribute 'to' names an unknown type '" + to->s() + "'");
    code = t;
  } else {
    code = static_cast<int>(to->i());
  }
  auto d = dtypeFromOnnx(code);
  if (!d) return c.unsupported("cast to " + onnxDTypeName(code) + " is not supported");
  return *d;
}

Status cast(OpContext& c) {
  c.ignoreAttr("saturate");
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(DType t, castTarget(c));
  c.setOutput(0, x->type().dtype() == t ? x : c.b.convert(x, t));
  return Status::ok();
}

Status castLike(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * like, c.req(1));
  DType t = like->type().dtype();
  c.setOutput(0, x->type().dtype() == t ? x : c.b.convert(x, t));
  return Status::ok();
}

// x limited to [lo, hi]; either bound may be absent.
Status clipTo(OpContext& c, Value* x, Value* lo, Value* hi) {
  KILN_RETURN_IF_ERROR(sameDType(c, {x, lo, hi}));
  if (lo) {
    KILN_ASSIGN_OR_RETURN(lo, broadcastUni(c, lo, x->type().dims()));
    x = c.b.max(x, lo);
  }
  if (hi) {
    KILN_ASSIGN_OR_RETURN(hi, broadcastUni(c, hi, x->type().dims()));
    x = c.b.min(x, hi);
  }
  c.setOutput(0, x);
  return Status::ok();
}

// Opsets 1 and 6: bounds are float attributes.
Status clipAttr(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  DType t = x->type().dtype();
  Value* lo = c.hasAttr("min") ? scalarConst(c.b, t, c.attrFloat("min", 0)) : nullptr;
  Value* hi = c.hasAttr("max") ? scalarConst(c.b, t, c.attrFloat("max", 0)) : nullptr;
  return clipTo(c, x, lo, hi);
}

// Opset 11 on: bounds are optional scalar inputs.
Status clipInputs(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  return clipTo(c, x, c.in(1), c.in(2));
}

Status mod(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  bool fmod = c.attrInt("fmod", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Value * r, bcastBinary(c, OpCode::Rem, a, b));
  if (fmod || isUnsignedInteger(a->type().dtype())) {
    c.setOutput(0, r);
    return Status::ok();
  }
  // Python's remainder takes the divisor's sign: r + b where r and b differ in sign.
  KILN_ASSIGN_OR_RETURN(auto vs, broadcastAll(c, {a, b}));
  Value* zero = splat(c.b, r, 0.0);
  Value* rNeg = c.b.compare("lt", r, zero);
  Value* bNeg = c.b.compare("lt", vs[1], zero);
  Value* fix = c.b.binary(OpCode::And, c.b.compare("ne", r, zero), c.b.compare("ne", rNeg, bNeg));
  c.setOutput(0, c.b.select(fix, c.b.add(r, vs[1]), r));
  return Status::ok();
}

Status bitShift(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  std::string dir = c.attrString("direction", "");
  OpCode op;
  if (dir == "LEFT") op = OpCode::ShiftLeft;
  else if (dir == "RIGHT") op = OpCode::ShiftRightLogical;
  else return c.err("attribute direction must be LEFT or RIGHT, got '" + dir + "'");
  KILN_ASSIGN_OR_RETURN(Value * r, bcastBinary(c, op, a, b));
  c.setOutput(0, r);
  return Status::ok();
}

// Pow from opset 12 allows an exponent of another type; the result has the base's type.
Status pow(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  DType ta = a->type().dtype(), tb = b->type().dtype();
  if (ta != tb) {
    if (isInteger(ta) && isFloat(tb)) {
      // An integer base with a fractional exponent: compute in floating point, then truncate.
      KILN_ASSIGN_OR_RETURN(Value * r, bcastBinary(c, OpCode::Pow, c.b.convert(a, DType::F64),
                                                   c.b.convert(b, DType::F64)));
      c.setOutput(0, c.b.convert(r, ta));
      return Status::ok();
    }
    b = c.b.convert(b, ta);
    ONNX_BUILT(c, b);
  }
  KILN_ASSIGN_OR_RETURN(Value * r, bcastBinary(c, OpCode::Pow, a, b));
  c.setOutput(0, r);
  return Status::ok();
}

void addUnaryOps(OpTable& t) {
  t.add("Abs", 1, unary<OpCode::Abs>);
  t.add("Neg", 1, unary<OpCode::Neg>);
  t.add("Sign", 9, unary<OpCode::Sign>);
  t.add("Floor", 1, unary<OpCode::Floor>);
  t.add("Ceil", 1, unary<OpCode::Ceil>);
  t.add("Round", 11, unary<OpCode::RoundNearestEven>);
  t.add("Exp", 1, unary<OpCode::Exp>);
  t.add("Log", 1, unary<OpCode::Log>);
  t.add("Sqrt", 1, unary<OpCode::Sqrt>);
  t.add("Sin", 7, unary<OpCode::Sin>);
  t.add("Cos", 7, unary<OpCode::Cos>);
  t.add("Tan", 7, unary<OpCode::Tan>);
  t.add("Asin", 7, unary<OpCode::Asin>);
  t.add("Acos", 7, unary<OpCode::Acos>);
  t.add("Atan", 7, unary<OpCode::Atan>);
  t.add("Sinh", 9, unary<OpCode::Sinh>);
  t.add("Cosh", 9, unary<OpCode::Cosh>);
  t.add("Asinh", 9, unary<OpCode::Asinh>);
  t.add("Acosh", 9, unary<OpCode::Acosh>);
  t.add("Atanh", 9, unary<OpCode::Atanh>);
  t.add("Tanh", 1, unary<OpCode::Tanh>);
  t.add("Erf", 9, unary<OpCode::Erf>);
  t.add("Sigmoid", 1, unary<OpCode::Sigmoid>);
  t.add("Not", 1, unary<OpCode::Not>);
  t.add("IsNaN", 9, unary<OpCode::IsNan>);
  t.add("IsInf", 10, isInf);
  t.add("Reciprocal", 1, reciprocal);
}

}  // namespace

void addElementwiseOps(OpTable& t) {
  addUnaryOps(t);
  t.add("Add", 1, binaryLegacy<OpCode::Add>);
  t.add("Add", 7, binary<OpCode::Add>);
  t.add("Sub", 1, binaryLegacy<OpCode::Sub>);
  t.add("Sub", 7, binary<OpCode::Sub>);
  t.add("Mul", 1, binaryLegacy<OpCode::Mul>);
  t.add("Mul", 7, binary<OpCode::Mul>);
  t.add("Div", 1, binaryLegacy<OpCode::Div>);
  t.add("Div", 7, binary<OpCode::Div>);
  t.add("Pow", 1, binaryLegacy<OpCode::Pow>);
  t.add("Pow", 7, pow);
  t.add("And", 1, binaryLegacy<OpCode::And>);
  t.add("And", 7, binary<OpCode::And>);
  t.add("Or", 1, binaryLegacy<OpCode::Or>);
  t.add("Or", 7, binary<OpCode::Or>);
  t.add("Xor", 1, binaryLegacy<OpCode::Xor>);
  t.add("Xor", 7, binary<OpCode::Xor>);
  t.add("Mod", 10, mod);
  t.add("BitShift", 11, bitShift);

  t.add("Equal", 1, compare<kEq, true>);
  t.add("Equal", 7, compare<kEq, false>);
  t.add("Less", 1, compare<kLt, true>);
  t.add("Less", 7, compare<kLt, false>);
  t.add("Greater", 1, compare<kGt, true>);
  t.add("Greater", 7, compare<kGt, false>);
  t.add("LessOrEqual", 12, compare<kLe, false>);
  t.add("GreaterOrEqual", 12, compare<kGe, false>);

  t.add("Sum", 1, sum);
  t.add("Mean", 1, mean);
  t.add("Max", 1, maxOp);
  t.add("Min", 1, minOp);
  t.add("Where", 9, whereOp);
  t.add("Cast", 1, cast);
  t.add("CastLike", 15, castLike);
  t.add("Clip", 1, clipAttr);
  t.add("Clip", 11, clipInputs);
}

}  // namespace kiln::onnx
