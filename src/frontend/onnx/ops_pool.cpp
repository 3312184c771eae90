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
      p.extraHi[i] =
          std::max<int64_t>(0, (out - 1) * p.w.strides[i] + dk - (in[i] + p.w.lo[i] + p.w.hi[i]));
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

// Most window positions MaxPool's Indices output unrolls.
constexpr int64_t kMaxWindowElements = 4096;

// Every window position as one strided slice of the padded input, stacked on a new leading axis:
// [K, N, C, out...] with K = prod(kernel), the positions in row-major kernel order.
StatusOr<Value*> windowStack(OpContext& c, Value* x, const Pool& p) {
  auto n = static_cast<int64_t>(p.w.kernel.size());
  std::vector<int64_t> lo{0, 0}, hi{0, 0};
  for (int64_t i = 0; i < n; ++i) {
    lo.push_back(p.w.lo[i]);
    hi.push_back(p.w.hi[i] + p.extraHi[i]);
  }
  Value* xp =
      c.b.pad(x, scalarConst(c.b, x->type().dtype(), dtypeLowest(x->type().dtype())), lo, hi);
  ONNX_BUILT(c, xp);
  KILN_ASSIGN_OR_RETURN(auto padded, staticDims(c, xp, 0, "the pooled input"));
  Value* out = reduceWindow(c, x, "max", p);
  ONNX_BUILT(c, out);
  Shape one = out->type().dims();
  one.insert(one.begin(), Dim(1));
  int64_t k = 1;
  for (int64_t e : p.w.kernel) k *= e;
  std::vector<Value*> parts;
  for (int64_t pos = 0; pos < k; ++pos) {
    std::vector<int64_t> start(padded.size(), 0), limit = padded, stride(padded.size(), 1);
    for (int64_t i = n - 1, rest = pos; i >= 0; rest /= p.w.kernel[i], --i) {
      int64_t off = (rest % p.w.kernel[i]) * p.w.dilations[i];
      int64_t extent = out->type().dim(2 + i).value();
      start[2 + i] = off;
      limit[2 + i] = extent == 0 ? off : off + (extent - 1) * p.w.strides[i] + 1;
      stride[2 + i] = p.w.strides[i];
    }
    parts.push_back(c.b.reshape(c.b.slice(xp, start, limit, stride), one));
  }
  Value* r = parts.size() == 1 ? parts[0] : c.b.concatenate(parts, 0);
  ONNX_BUILT(c, r);
  return r;
}

// MaxPool's Indices: the flat (N, C, spatial...) index of each window's first maximum, row-major
// or, with storage_order 1, with the spatial dims column-major; padding is never chosen.
StatusOr<Value*> maxPoolIndices(OpContext& c, Value* x, const Pool& p, Value* stack) {
  KILN_ASSIGN_OR_RETURN(auto dims, staticDims(c, x, 0, "the pooled input"));
  bool colMajor = c.attrInt("storage_order", 0) != 0;
  auto n = static_cast<int64_t>(p.w.kernel.size());
  Value* arg = c.b.op(OpCode::ArgMax, {stack}, {{"axis", intAttr(0)}});
  ONNX_BUILT(c, arg);
  TensorType t = arg->type();
  auto k = [&](int64_t v) { return splatType(c.b, t, static_cast<double>(v)); };
  // flat = (n * C + c) * prod(spatial) + spatial offset in the chosen order
  Value* flat = c.b.add(c.b.mul(c.b.iota(t, 0), k(dims[1])), c.b.iota(t, 1));
  std::vector<Value*> pos(static_cast<size_t>(n));
  Value* rest = arg;
  for (int64_t i = n - 1; i >= 0; --i) {
    Value* off = c.b.binary(OpCode::Rem, rest, k(p.w.kernel[i]));
    rest = c.b.div(rest, k(p.w.kernel[i]));
    // input position = output position * stride + kernel offset * dilation - low padding
    pos[i] = c.b.sub(
        c.b.add(c.b.mul(c.b.iota(t, 2 + i), k(p.w.strides[i])), c.b.mul(off, k(p.w.dilations[i]))),
        k(p.w.lo[i]));
  }
  for (int64_t j = 0; j < n; ++j) {
    int64_t i = colMajor ? n - 1 - j : j;
    flat = c.b.add(c.b.mul(flat, k(dims[2 + i])), pos[i]);
  }
  ONNX_BUILT(c, flat);
  return flat;
}

Status maxPool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Pool p, readPool(c, x, true));
  if (!c.wantsOutput(1)) {
    c.ignoreAttr("storage_order");  // only affects the Indices output
    c.setOutput(0, reduceWindow(c, x, "max", p));
    return Status::ok();
  }
  int64_t k = 1;
  for (int64_t e : p.w.kernel)
    if (!checkedMul(k, e, k) || k > kMaxWindowElements)
      return c.unsupported("the Indices output for windows of more than " +
                           std::to_string(kMaxWindowElements) + " elements");
  KILN_ASSIGN_OR_RETURN(Value * stack, windowStack(c, x, p));
  KILN_ASSIGN_OR_RETURN(Value * idx, maxPoolIndices(c, x, p, stack));
  c.setOutput(0, reduceWindow(c, x, "max", p));
  c.setOutput(1, idx);
  return Status::ok();
}

// Flat indices over [N, C, from...] to flat indices over [N, C, to...] at the same coordinates.
StatusOr<Value*> remapIndices(OpContext& c, Value* idx, const std::vector<int64_t>& from,
                              const Shape& to) {
  ONNX_BUILT(c, idx);
  TensorType t = idx->type();
  auto k = [&](int64_t v) { return splatType(c.b, t, static_cast<double>(v)); };
  int64_t fromSize = 1, toSize = 1;
  for (size_t i = 0; i < from.size(); ++i) {
    if (!to[2 + i].isStatic()) return c.err("the output shape must be static");
    fromSize *= from[i];
    toSize *= to[2 + i].value();
  }
  if (fromSize == 0) return idx;
  Value* rest = c.b.binary(OpCode::Rem, idx, k(fromSize));
  Value* flat = c.b.mul(c.b.div(idx, k(fromSize)), k(toSize));
  int64_t stride = toSize;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t inner = 1;
    for (size_t j = i + 1; j < from.size(); ++j) inner *= from[j];
    stride /= to[2 + i].value() == 0 ? 1 : to[2 + i].value();
    Value* coord = c.b.div(rest, k(inner));
    rest = c.b.binary(OpCode::Rem, rest, k(inner));
    flat = c.b.add(flat, c.b.mul(coord, k(stride)));
  }
  ONNX_BUILT(c, flat);
  return flat;
}

// MaxUnpool: zeros of the output shape with X scattered to the flat indices I.
Status maxUnpool(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  std::vector<int64_t> kernel = c.attrInts("kernel_shape");
  if (kernel.empty()) return c.err("attribute 'kernel_shape' is required");
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(c, x, kernel, false));
  KILN_ASSIGN_OR_RETURN(auto in, staticDims(c, x, 0, "the input"));
  Shape out{Dim(in[0]), Dim(in[1])};
  std::vector<int64_t> natural;  // the extents the indices refer to
  for (size_t i = 0; i < kernel.size(); ++i) {
    int64_t e = (in[2 + i] - 1) * w.strides[i] + kernel[i] - w.lo[i] - w.hi[i];
    if (e < 0) return c.err("the pads leave a negative output extent");
    out.push_back(Dim(e));
    natural.push_back(e);
  }
  Value* i64 = c.b.convert(idx, DType::I64);
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(out, c.knownShape(2, "the output shape"));
    if (out.size() != natural.size() + 2) return c.err("output_shape must have the input's rank");
    // The indices count positions in the natural output; place each at the same spatial
    // coordinates of the requested one.
    KILN_ASSIGN_OR_RETURN(i64, remapIndices(c, i64, natural, out));
  }
  auto total = TensorType(x->type().dtype(), out).numElements();
  if (!total || idx->type().dims() != x->type().dims())
    return c.err("the output shape must be static and I must have X's shape");
  auto numel = x->type().numElements();
  Value* zeros = splatType(c.b, TensorType(x->type().dtype(), {Dim(*total)}), 0);
  Value* flatIdx = c.b.reshape(i64, {Dim(*numel), Dim(1)});
  Value* upd = c.b.reshape(x, {Dim(*numel)});
  Value* y = c.b.op(OpCode::Scatter, {zeros, flatIdx, upd},
                    {{"update_window_dims", intsAttr({})},
                     {"inserted_window_dims", intsAttr({0})},
                     {"scatter_dims_to_operand_dims", intsAttr({0})},
                     {"index_vector_dim", intAttr(1)}});
  c.setOutput(0, c.b.reshape(y, out));
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
  t.add("MaxUnpool", 9, maxUnpool);
  t.add("AveragePool", 1, averagePool);
  t.add("LpPool", 1, lpPool);
  t.add("GlobalAveragePool", 1, globalAveragePool);
  t.add("GlobalMaxPool", 1, globalMaxPool);
  t.add("GlobalLpPool", 1, globalLpPool);
}

}  // namespace kiln::onnx
