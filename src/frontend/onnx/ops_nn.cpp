// Convolutions: Conv (auto_pad, groups, dilations, any number of spatial dims), ConvTranspose
// (a convolution with lhs_dilation and a flipped kernel), ConvInteger and QLinearConv.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

// Largest stride, dilation, kernel extent and padding accepted (keeps products in int64).
constexpr int64_t kMaxWindow = int64_t(1) << 31;

StatusOr<std::vector<int64_t>> staticDims(OpContext& c, Value* x, int64_t from,
                                          const std::string& what) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < x->type().rank(); ++i) {
    const Dim& d = x->type().dim(i);
    if (!d.isStatic()) return c.unsupported(what + " has symbolic dimension " + d.str());
    v.push_back(d.value());
  }
  return v;
}

StatusOr<Window> readWindow(OpContext& c, Value* x, std::vector<int64_t> kernel,
                            bool hasDilations) {
  auto n = static_cast<int64_t>(kernel.size());
  if (x->type().rank() != n + 2)
    return c.err("input " + x->type().str() + " does not have " + std::to_string(n) +
                 " spatial dimensions");
  Window w;
  w.kernel = std::move(kernel);
  w.strides = c.attrInts("strides", std::vector<int64_t>(n, 1));
  w.dilations = hasDilations ? c.attrInts("dilations", std::vector<int64_t>(n, 1))
                             : std::vector<int64_t>(n, 1);
  std::vector<int64_t> pads = c.attrInts("pads", std::vector<int64_t>(2 * n, 0));
  std::string autoPad = c.attrString("auto_pad", "NOTSET");
  if (static_cast<int64_t>(w.strides.size()) != n ||
      static_cast<int64_t>(w.dilations.size()) != n || static_cast<int64_t>(pads.size()) != 2 * n)
    return c.err("strides, dilations and pads must match the " + std::to_string(n) +
                 " spatial dimensions");
  // Bounded so that the window arithmetic below cannot overflow.
  for (int64_t i = 0; i < n; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || w.strides[i] > kMaxWindow ||
        w.dilations[i] > kMaxWindow || w.kernel[i] > kMaxWindow)
      return c.err("strides, dilations and kernel extents must be in [1, 2^31]");
  for (int64_t p : pads)
    if (p < -kMaxWindow || p > kMaxWindow) return c.err("pads must be within +-2^31");
  w.lo.assign(pads.begin(), pads.begin() + n);
  w.hi.assign(pads.begin() + n, pads.end());
  if (autoPad == "NOTSET") return w;
  if (autoPad == "VALID") {
    w.lo.assign(n, 0);
    w.hi.assign(n, 0);
    return w;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return c.err("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  KILN_ASSIGN_OR_RETURN(auto in, staticDims(c, x, 2, "SAME padding of the input"));
  for (int64_t i = 0; i < n; ++i) {
    // The output keeps ceil(in / stride) positions; the odd padding element goes high for
    // SAME_UPPER and low for SAME_LOWER.
    int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
    int64_t dk = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + dk - in[i]);
    int64_t small = total / 2, big = total - small;
    w.lo[i] = autoPad == "SAME_UPPER" ? small : big;
    w.hi[i] = autoPad == "SAME_UPPER" ? big : small;
  }
  return w;
}

namespace {

AttrMap convAttrs(const Window& w, int64_t groups, const std::string& dimNumbers,
                  std::vector<int64_t> lhsDilation = {}) {
  AttrMap a{{"window_strides", intsAttr(w.strides)},
            {"padding_low", intsAttr(w.lo)},
            {"padding_high", intsAttr(w.hi)},
            {"rhs_dilation", intsAttr(w.dilations)},
            {"feature_group_count", intAttr(groups)}};
  if (!lhsDilation.empty()) a["lhs_dilation"] = intsAttr(std::move(lhsDilation));
  if (!dimNumbers.empty()) a["dimension_numbers"] = stringAttr(dimNumbers);
  return a;
}

// The kernel extents from W (checked against kernel_shape when given).
StatusOr<std::vector<int64_t>> kernelOf(OpContext& c, Value* w) {
  KILN_ASSIGN_OR_RETURN(auto k, staticDims(c, w, 2, "the kernel"));
  if (c.hasAttr("kernel_shape") && c.attrInts("kernel_shape") != k)
    return c.err("kernel_shape does not match the weights " + w->type().str());
  c.ignoreAttr("kernel_shape");
  return k;
}

StatusOr<Value*> addChannelBias(OpContext& c, Value* y, Value* bias) {
  if (!bias) return y;
  ONNX_BUILT(c, y);
  Value* r = c.b.add(y, c.b.broadcastInDim(bias, y->type().dims(), {1}));
  ONNX_BUILT(c, r);
  return r;
}

StatusOr<Value*> conv(OpContext& c, Value* x, Value* w) {
  KILN_ASSIGN_OR_RETURN(auto kernel, kernelOf(c, w));
  KILN_ASSIGN_OR_RETURN(Window win, readWindow(c, x, kernel));
  int64_t groups = c.attrInt("group", 1);
  if (groups < 1) return c.err("group must be >= 1");
  Value* y = c.b.op(OpCode::Convolution, {x, w}, convAttrs(win, groups, ""));
  ONNX_BUILT(c, y);
  return y;
}

Status convOp(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * w, c.req(1));
  KILN_RETURN_IF_ERROR(sameDType(c, {x, w, c.in(2)}));
  KILN_ASSIGN_OR_RETURN(Value * y, conv(c, x, w));
  KILN_ASSIGN_OR_RETURN(y, addChannelBias(c, y, c.in(2)));
  c.setOutput(0, y);
  return Status::ok();
}

// The window of a transposed convolution as a convolution over the stride-dilated input:
// padding (k-1)*d - pads, plus output_padding at the high end; output_shape and SAME auto_pad
// choose the pads. `strides` receives the lhs dilation.
StatusOr<Window> transposedWindow(OpContext& c, Value* x, const std::vector<int64_t>& kernel,
                                  std::vector<int64_t>& strides) {
  auto n = static_cast<int64_t>(kernel.size());
  std::string autoPad = c.attrString("auto_pad", "NOTSET");
  strides = c.attrInts("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = c.attrInts("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> outPad = c.attrInts("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> pads = c.attrInts("pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> outShape = c.attrInts("output_shape");
  if (x->type().rank() != n + 2 || static_cast<int64_t>(strides.size()) != n ||
      static_cast<int64_t>(dil.size()) != n || static_cast<int64_t>(outPad.size()) != n ||
      static_cast<int64_t>(pads.size()) != 2 * n)
    return c.err("input, strides, dilations, output_padding and pads must match the kernel rank");
  KILN_ASSIGN_OR_RETURN(auto in, staticDims(c, x, 2, "the input"));
  for (int64_t i = 0; i < n; ++i)
    if (strides[i] < 1 || strides[i] > kMaxWindow || dil[i] < 1 || dil[i] > kMaxWindow ||
        kernel[i] > kMaxWindow || in[i] > kMaxWindow || outPad[i] < 0 || outPad[i] > kMaxWindow)
      return c.err("strides, dilations, output_padding and extents must be in range");
  for (int64_t p : pads)
    if (p < -kMaxWindow || p > kMaxWindow) return c.err("pads must be within +-2^31");
  for (int64_t o : outShape)
    if (o < 0 || o > kMaxElements) return c.err("output_shape entries must be extents");
  if (outShape.size() > static_cast<size_t>(n))
    outShape.erase(outShape.begin(), outShape.end() - n);
  if (outShape.empty() && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER"))
    for (int64_t i = 0; i < n; ++i) outShape.push_back(in[i] * strides[i]);
  Window win;
  win.strides.assign(n, 1);
  win.dilations = dil;
  for (int64_t i = 0; i < n; ++i) {
    int64_t dk = (kernel[i] - 1) * dil[i] + 1;
    int64_t lo = pads[i], hi = pads[n + i];
    if (!outShape.empty()) {
      int64_t total = strides[i] * (in[i] - 1) + outPad[i] + dk - outShape[i];
      // Halved rounding down (a negative total, an output larger than the natural one, grows
      // the high end).
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      lo = autoPad == "SAME_UPPER" ? half : total - half;
      hi = total - lo;
    } else if (autoPad == "VALID") {
      lo = hi = 0;
    }
    win.lo.push_back(dk - 1 - lo);
    win.hi.push_back(dk - 1 - hi + outPad[i]);
  }
  return win;
}

// W is [C, M/g, k...]; the convolution wants [C/g, M, k...] (input features of one group, all
// output features group-major) with its spatial dims reversed.
StatusOr<Value*> transposedKernel(OpContext& c, Value* w, int64_t groups, int64_t n) {
  const Shape& wd = w->type().dims();
  Value* k = w;
  if (groups > 1) {
    if (!wd[0].isStatic() || !wd[1].isStatic() || wd[0].value() % groups != 0)
      return c.err("weights " + w->type().str() + " do not split into " + std::to_string(groups) +
                   " groups");
    int64_t cg = wd[0].value() / groups, mg = wd[1].value();
    Shape s5{Dim(groups), Dim(cg), Dim(mg)}, s3{Dim(cg), Dim(groups * mg)};
    for (int64_t i = 0; i < n; ++i) {
      s5.push_back(wd[2 + i]);
      s3.push_back(wd[2 + i]);
    }
    std::vector<int64_t> perm{1, 0, 2};
    for (int64_t i = 0; i < n; ++i) perm.push_back(3 + i);
    k = c.b.reshape(c.b.transpose(c.b.reshape(w, s5), perm), s3);
  }
  std::vector<int64_t> spatial;
  for (int64_t i = 0; i < n; ++i) spatial.push_back(2 + i);
  k = c.b.op(OpCode::Reverse, {k}, {{"dims", intsAttr(spatial)}});
  ONNX_BUILT(c, k);
  return k;
}

// Transposed convolution: a convolution of the stride-dilated input with the flipped kernel read
// as [in, out] features.
Status convTranspose(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * w, c.req(1));
  KILN_RETURN_IF_ERROR(sameDType(c, {x, w, c.in(2)}));
  KILN_ASSIGN_OR_RETURN(auto kernel, kernelOf(c, w));
  auto n = static_cast<int64_t>(kernel.size());
  int64_t groups = c.attrInt("group", 1);
  if (groups < 1 || groups > kMaxWindow) return c.err("group must be >= 1");
  std::vector<int64_t> strides;
  KILN_ASSIGN_OR_RETURN(Window win, transposedWindow(c, x, kernel, strides));
  KILN_ASSIGN_OR_RETURN(Value * k, transposedKernel(c, w, groups, n));
  std::string sp = defaultConvDimensionNumbers(n).substr(2, static_cast<size_t>(n));
  std::string dn = "bf" + sp + "_io" + sp + "->bf" + sp;
  Value* y = c.b.op(OpCode::Convolution, {x, k}, convAttrs(win, groups, dn, strides));
  KILN_ASSIGN_OR_RETURN(y, addChannelBias(c, y, c.in(2)));
  c.setOutput(0, y);
  return Status::ok();
}

Status convInteger(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * w, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * xi, minusZeroPoint(c, x, c.in(2), 1));
  KILN_ASSIGN_OR_RETURN(Value * wi, minusZeroPoint(c, w, c.in(3), 0));
  KILN_ASSIGN_OR_RETURN(Value * y, conv(c, xi, wi));
  c.setOutput(0, y);
  return Status::ok();
}

Status qlinearConv(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * xs, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * w, c.req(3));
  KILN_ASSIGN_OR_RETURN(Value * ws, c.req(4));
  KILN_ASSIGN_OR_RETURN(Value * ys, c.req(6));
  Value* yzp = c.in(7);
  KILN_ASSIGN_OR_RETURN(Value * xi, minusZeroPoint(c, x, c.in(2), 1));
  KILN_ASSIGN_OR_RETURN(Value * wi, minusZeroPoint(c, w, c.in(5), 0));
  KILN_ASSIGN_OR_RETURN(Value * acc, conv(c, xi, wi));
  KILN_ASSIGN_OR_RETURN(acc, addChannelBias(c, acc, c.in(8)));
  // Rescale the i32 accumulator by x_scale * w_scale / y_scale (w_scale per output channel).
  Value* accF = c.b.convert(acc, DType::F32);
  ONNX_BUILT(c, accF);
  KILN_ASSIGN_OR_RETURN(Value * wsB, perAxis(c, ws, accF, 1));
  KILN_ASSIGN_OR_RETURN(Value * xsB, perAxis(c, xs, accF, 1));
  KILN_ASSIGN_OR_RETURN(Value * ysB, perAxis(c, ys, accF, 1));
  Value* scaled = c.b.div(c.b.mul(accF, c.b.mul(xsB, wsB)), ysB);
  ONNX_BUILT(c, scaled);
  DType out = yzp ? yzp->type().dtype() : x->type().dtype();
  KILN_ASSIGN_OR_RETURN(Value * r,
                        quantize(c, scaled, scalarConst(c.b, DType::F32, 1.0), yzp, out, 1));
  c.setOutput(0, r);
  return Status::ok();
}

}  // namespace

void addNnOps(OpTable& t) {
  t.add("Conv", 1, convOp);
  t.add("ConvTranspose", 1, convTranspose);
  t.add("ConvInteger", 10, convInteger);
  t.add("QLinearConv", 10, qlinearConv);
}

}  // namespace kiln::onnx
