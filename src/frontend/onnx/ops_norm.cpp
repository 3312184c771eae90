// Normalisations: BatchNormalization (inference through batch_norm_inference; training mode
// with batch statistics and running averages), InstanceNormalization, LayerNormalization
// (layer_norm, plus its optional Mean / InvStdDev outputs) and LRN.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// (x - mean) * rsqrt(var + eps) over `axes` (keepdims statistics), also returning them.
struct Moments {
  Value* centered = nullptr;
  Value* mean = nullptr;
  Value* var = nullptr;
};

StatusOr<Moments> moments(OpContext& c, Value* x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < x->type().rank(); ++i) all.push_back(i);
  Moments m;
  KILN_ASSIGN_OR_RETURN(m.mean, meanKeep(c, x, axes));
  m.centered = c.b.sub(x, c.b.broadcastInDim(m.mean, x->type().dims(), all));
  ONNX_BUILT(c, m.centered);
  KILN_ASSIGN_OR_RETURN(m.var, meanKeep(c, c.b.mul(m.centered, m.centered), axes));
  return m;
}

Value* channelParam(OpContext& c, Value* p, Value* like) {
  return c.b.broadcastInDim(p, like->type().dims(), {1});
}

Status batchNormTraining(OpContext& c, Value* x, double eps) {
  double momentum = c.attrFloat("momentum", 0.9);
  std::vector<int64_t> axes{0};
  for (int64_t i = 2; i < x->type().rank(); ++i) axes.push_back(i);
  KILN_ASSIGN_OR_RETURN(Moments m, moments(c, x, axes));
  Value* mean = c.b.reshape(m.mean, {x->type().dim(1)});
  Value* var = c.b.reshape(m.var, {x->type().dim(1)});
  Value* inv = c.b.unary(OpCode::Rsqrt, c.b.add(var, splat(c.b, var, eps)));
  ONNX_BUILT(c, inv);
  Value* y = c.b.mul(m.centered, channelParam(c, c.b.mul(inv, c.in(1)), x));
  c.setOutput(0, c.b.add(y, channelParam(c, c.in(2), x)));
  // running = input_running * momentum + batch statistic * (1 - momentum)
  auto blend = [&](Value* running, Value* batch) {
    return c.b.add(c.b.mul(running, splat(c.b, running, momentum)),
                   c.b.mul(batch, splat(c.b, batch, 1.0 - momentum)));
  };
  if (c.wantsOutput(1)) c.setOutput(1, blend(c.in(3), mean));
  if (c.wantsOutput(2)) c.setOutput(2, blend(c.in(4), var));
  return Status::ok();
}

Status batchNorm(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  std::vector<Value*> in;
  for (int i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, c.req(i));
    in.push_back(v);
  }
  if (in[0]->type().rank() < 2) return c.err("the input must have rank >= 2");
  double eps = c.attrFloat("epsilon", 1e-5);
  if (c.attrInt("spatial", 1) == 0)
    return c.unsupported("spatial = 0 (per-activation statistics) is not supported");
  bool training = c.opset() >= 14 ? c.attrInt("training_mode", 0) != 0
                  : c.opset() < 7 ? c.attrInt("is_test", 0) == 0
                                  : c.numOutputs() > 1;
  c.ignoreAttr("momentum");
  if (training) {
    if (c.opset() < 14) return c.unsupported("training-mode BatchNormalization before opset 14");
    return batchNormTraining(c, in[0], eps);
  }
  KILN_RETURN_IF_ERROR(sameDType(c, in));
  c.setOutput(0, c.b.op(OpCode::BatchNormInference, in,
                        {{"epsilon", floatAttr(eps)}, {"feature_index", intAttr(1)}}));
  return Status::ok();
}

Status instanceNorm(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * scale, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * bias, c.req(2));
  if (x->type().rank() < 3) return c.err("the input must have rank >= 3");
  double eps = c.attrFloat("epsilon", 1e-5);
  std::vector<int64_t> axes, all;
  for (int64_t i = 2; i < x->type().rank(); ++i) axes.push_back(i);
  for (int64_t i = 0; i < x->type().rank(); ++i) all.push_back(i);
  KILN_ASSIGN_OR_RETURN(Moments m, moments(c, x, axes));
  Value* inv = c.b.unary(OpCode::Rsqrt, c.b.add(m.var, splat(c.b, m.var, eps)));
  Value* y = c.b.mul(m.centered, c.b.broadcastInDim(inv, x->type().dims(), all));
  y = c.b.add(c.b.mul(y, channelParam(c, scale, x)), channelParam(c, bias, x));
  c.setOutput(0, y);
  return Status::ok();
}

Status layerNorm(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * scale, c.req(1));
  int64_t rank = x->type().rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", -1), rank));
  double eps = c.attrFloat("epsilon", 1e-5);
  c.ignoreAttr("stash_type");  // layer_norm computes f16/bf16 in f32 already
  const Shape& d = x->type().dims();
  Shape tail(d.begin() + axis, d.end());
  KILN_ASSIGN_OR_RETURN(scale, broadcastUni(c, scale, tail));
  std::vector<Value*> ops{x, scale};
  if (Value* bias = c.in(2)) {
    KILN_ASSIGN_OR_RETURN(bias, broadcastUni(c, bias, tail));
    ops.push_back(bias);
  }
  KILN_RETURN_IF_ERROR(sameDType(c, ops));
  c.setOutput(
      0, c.b.op(OpCode::LayerNorm, ops, {{"axis", intAttr(axis)}, {"epsilon", floatAttr(eps)}}));
  if (c.wantsOutput(1) || c.wantsOutput(2)) {
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
    // The statistics are f32 (ONNX's stash_type) unless the input is wider.
    DType dt = x->type().dtype();
    Value* xf = dt == DType::F64 || dt == DType::F32 ? x : c.b.convert(x, DType::F32);
    ONNX_BUILT(c, xf);
    KILN_ASSIGN_OR_RETURN(Moments m, moments(c, xf, axes));
    c.setOutput(1, m.mean);
    c.setOutput(2, c.b.unary(OpCode::Rsqrt, c.b.add(m.var, splat(c.b, m.var, eps))));
  }
  return Status::ok();
}

// x / (bias + alpha / size * sum of squares over a window of `size` channels)^beta
Status lrn(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t size = c.attrInt("size", 0);
  if (size < 1) return c.err("attribute 'size' must be >= 1");
  double alpha = c.attrFloat("alpha", 1e-4), beta = c.attrFloat("beta", 0.75),
         bias = c.attrFloat("bias", 1.0);
  int64_t r = x->type().rank();
  if (r < 2) return c.err("the input must have rank >= 2");
  std::vector<int64_t> win(r, 1), lo(r, 0), hi(r, 0);
  win[1] = size;
  lo[1] = (size - 1) / 2;
  hi[1] = size - 1 - lo[1];
  // Same extents in and out (given, so that a symbolic batch passes through).
  Value* sq = c.b.op(OpCode::ReduceWindow, {c.b.mul(x, x)},
                     {{"kind", enumAttr("sum")},
                      {"window_dimensions", intsAttr(win)},
                      {"padding_low", intsAttr(lo)},
                      {"padding_high", intsAttr(hi)}},
                     {x->type()});
  Value* base = c.b.add(splat(c.b, sq, bias), c.b.mul(sq, splat(c.b, sq, alpha / double(size))));
  c.setOutput(0, c.b.div(x, c.b.binary(OpCode::Pow, base, splat(c.b, base, beta))));
  return Status::ok();
}

}  // namespace

void addNormOps(OpTable& t) {
  t.add("BatchNormalization", 1, batchNorm);
  t.add("InstanceNormalization", 1, instanceNorm);
  t.add("LayerNormalization", 17, layerNorm);
  t.add("LRN", 1, lrn);
}

}  // namespace kiln::onnx
