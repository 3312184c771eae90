// Pooling: MaxPool (pads, auto_pad, dilations, ceil_mode), AveragePool (count_include_pad),
// LpPool and the global forms, lowered to reduce_window.
#include <cmath>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

struct Pool {
  Window w;
  std::vector<int64_t> extraHi;  // high padding that only ceil_mode adds
};

// The pooling window, with ceil_mode turned into extra high padding so that the floor in
// reduce_window's extent gives the ceiling.
StatusOr<Pool> readPool(OpContext& c, Value* x, bool hasDilations) {
  std::vector<int64_t> kernel = c.attrInts("kernel_shape");
  if (kernel.empty()) return c.err("attribute 'kernel_shape' is required");
  for (int64_t k : kernel)
    if (k < 1) return c.err("kernel_shape entries must be >= 1");
  Pool p;
  KILN_ASSIGN_OR_RETURN(p.w, readWindow(c, x, kernel, hasDilations));
  bool ceil = c.attrInt("ceil_mode", 0) != 0;
  auto n = static_cast<int64_t>(kernel.size());
  p.extraHi.assign(n, 0);
  KILN_ASSIGN_OR_RETURN(auto in, staticDims(c, x, 2, "the pooled input"));
  for (int64_t i = 0; i < n; ++i) {
    int64_t dk = (kernel[i] - 1) * p.w.dilations[i] + 1;
    int64_t span = in[i] + p.w.lo[i] + p.w.hi[i] - dk;
    if (span < 0) return c.err("the pooling window is larger than the padded input");
    if (ceil && span % p.w.strides[i] != 0) {
      int64_t out = span / p.w.strides[i] + 2;
      // A last window that would start in the high padding is dropped (as PyTorch does).
      if ((out - 1) * p.w.strides[i] >= in[i] + p.w.lo[i]) --out;
      p.extraHi[i] = std::max<int64_t>(0, (out - 1) * p.w.strides[i] + dk - (in[i] + p.w.lo[i] + p.w.hi[i]));
    }
  }
  return p;
}

Value* reduceWindow(OpContext& c, Value* x, const std::string& kind, const Pool& p,
                    bool withExplicitPads = true) {
  std::vector<int64_t> dims{1, 1}, strides{1, 1}, dil{1, 1}, lo{0, 0}, hi{0, 0};
  for (size_t i = 0; i < p.w.kernel.size(); ++i) {
    dims.push_back(p.w.kernel[i]);
    strides.push_back(p.w.strides[i]);
    dil.push_back(p.w.dilations[i]);
    lo.push_back(withExplicitPads ? p.w.lo[i] : 0);
    hi.push_back((withExplicitPads ? p.w.hi[i] : 0) + p.extraHi[i]);
  }
  // The result type is given so that a symbolic batch (an unwindowed dim) passes through.
  Shape out = x->type().dims();
  for (size_t i = 2; i < out.size(); ++i) {
    if (!out[i].isStatic()) break;  // the type rule reports it
    int64_t padded = out[i].value() + lo[i] + hi[i];
    int64_t dw = (dims[i] - 1) * dil[i] + 1;
    out[i] = Dim(padded < dw ? 0 : (padded - dw) / strides[i] + 1);
  }
  return c.b.op(OpCode::ReduceWindow, {x},
                {{"kind", enumAttr(kind)},
                 {"window_dimensions", intsAttr(dims)},
                 {"window_strides", intsAttr(strides)},
                 {"window_dilations", intsAttr(dil)},
                 {"padding_low", intsAttr(lo)},
                 {"padding_high", intsAttr(hi)}},
                {x->type().withDims(out)});
}

Status maxPool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (c.wantsOutput(1)) return c.unsupported("the Indices output of MaxPool is not supported");
  c.ignoreAttr("storage_order");  // only affects the Indices output
  KILN_ASSIGN_OR_RETURN(Pool p, readPool(c, x, true));
  c.setOutput(0, reduceWindow(c, x, "max", p));
  return Status::ok();
}

// Window sums divided by the number of elements each window covers: padding counts only with
// count_include_pad (and never the extra padding of ceil_mode).
Status averagePool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (!isFloat(x->type().dtype())) return c.err("the input must be a float tensor");
  bool includePad = c.attrInt("count_include_pad", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Pool p, readPool(c, x, c.opset() >= 19));
  Value* sum = reduceWindow(c, x, "sum", p);
  ONNX_BUILT(c, sum);
  // The counts depend on the position only: computed once on a [1, 1, spatial...] tensor of
  // ones (a constant, folded later) and broadcast.
  Shape unit = x->type().dims();
  unit[0] = Dim(1);
  unit[1] = Dim(1);
  Value* ones = splatType(c.b, TensorType(x->type().dtype(), unit), 1.0);
  Value* count;
  if (includePad) {
    std::vector<int64_t> lo{0, 0}, hi{0, 0};
    lo.insert(lo.end(), p.w.lo.begin(), p.w.lo.end());
    hi.insert(hi.end(), p.w.hi.begin(), p.w.hi.end());
    Value* padded = c.b.pad(ones, scalarConst(c.b, x->type().dtype(), 1.0), lo, hi);
    count = reduceWindow(c, padded, "sum", p, false);
  } else {
    count = reduceWindow(c, ones, "sum", p);
  }
  ONNX_BUILT(c, count);
  c.setOutput(0, c.b.div(sum, c.b.broadcastTo(count, sum->type().dims())));
  return Status::ok();
}

// (sum |x|^p)^(1/p) over each window.
Status lpPool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  double pw = c.opset() < 2 ? c.attrFloat("p", 2.0) : static_cast<double>(c.attrInt("p", 2));
  KILN_ASSIGN_OR_RETURN(Pool p, readPool(c, x, c.opset() >= 18));
  Value* powered = c.b.binary(OpCode::Pow, c.b.unary(OpCode::Abs, x), splat(c.b, x, pw));
  Value* s = reduceWindow(c, powered, "sum", p);
  c.setOutput(0, c.b.binary(OpCode::Pow, s, splat(c.b, s, 1.0 / pw)));
  return Status::ok();
}

std::vector<int64_t> spatialAxes(Value* x) {
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x->type().rank(); ++i) axes.push_back(i);
  return axes;
}

Status globalAveragePool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (x->type().rank() < 2) return c.err("the input must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(Value * m, meanKeep(c, x, spatialAxes(x)));
  c.setOutput(0, m);
  return Status::ok();
}

Status globalMaxPool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (x->type().rank() < 2) return c.err("the input must have rank >= 2");
  c.setOutput(0, reduceKeep(c, x, spatialAxes(x), "max", true));
  return Status::ok();
}

Status globalLpPool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (x->type().rank() < 2) return c.err("the input must have rank >= 2");
  double pw = c.opset() < 2 ? c.attrFloat("p", 2.0) : static_cast<double>(c.attrInt("p", 2));
  Value* powered = c.b.binary(OpCode::Pow, c.b.unary(OpCode::Abs, x), splat(c.b, x, pw));
  Value* s = reduceKeep(c, powered, spatialAxes(x), "sum", true);
  c.setOutput(0, c.b.binary(OpCode::Pow, s, splat(c.b, s, 1.0 / pw)));
  return Status::ok();
}

}  // namespace

void addPoolOps(OpTable& t) {
  t.add("MaxPool", 1, maxPool);
  t.add("AveragePool", 1, averagePool);
  t.add("LpPool", 1, lpPool);
  t.add("GlobalAveragePool", 1, globalAveragePool);
  t.add("GlobalMaxPool", 1, globalMaxPool);
  t.add("GlobalLpPool", 1, globalLpPool);
}

}  // namespace kiln::onnx
