#include "passes/convolution_to_matmul.h"

#include <string>
#include <vector>

#include "fusion/op_pattern.h"
#include "ir/builder.h"
#include "ir/op.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// The share of (output position, tap) pairs along one spatial dim that read the input rather than
// padding: input extent x, output extent y, kernel extent k.
double inputShare(int64_t x, int64_t y, int64_t k, int64_t stride, int64_t lo, int64_t dil) {
  int64_t reads = 0;
  for (int64_t t = 0; t < k; ++t) reads += rewrite::tapReads(x, y, stride, lo, dil, t);
  return static_cast<double>(reads) / static_cast<double>(k * y);
}

// Whether `n`'s layout is NHWC / HWIO / NHWC exactly, 2-D, f32, static, one group.
bool plainNhwc(const Node& n) {
  if (n.numOperands() != 2 || n.numResults() != 1) return false;
  const TensorType& xt = n.operand(0)->type();
  const TensorType& wt = n.operand(1)->type();
  const TensorType& yt = n.result(0)->type();
  if (xt.dtype() != DType::F32 || wt.dtype() != DType::F32 || yt.dtype() != DType::F32)
    return false;
  if (!xt.isStatic() || !wt.isStatic() || !yt.isStatic() || xt.rank() != 4) return false;
  auto dn = convDimensionNumbers(n.attrs(), 4);
  if (!dn) return false;
  const ConvDimensionNumbers& d = *dn;
  return d.inputBatch == 0 && d.inputFeature == 3 && d.inputSpatial == std::vector<int64_t>{1, 2} &&
         d.kernelSpatial == std::vector<int64_t>{0, 1} && d.kernelInput == 2 &&
         d.kernelOutput == 3 && d.outputBatch == 0 && d.outputFeature == 3 &&
         d.outputSpatial == std::vector<int64_t>{1, 2} && n.attrInt("feature_group_count") == 1 &&
         n.attrInt("batch_group_count") == 1;
}

// Whether `n`'s result, through its chain of single-use elementwise ops of the same shape (the
// epilogue a library call takes), is an operand of a concatenation.
bool feedsConcatenation(const Node& n) {
  const Value* v = n.result(0);
  for (;;) {
    for (const Use& u : v->uses())
      if (u.user->op() == OpCode::Concatenate) return true;
    if (v->uses().size() != 1 || v->isFunctionOutput()) return false;
    const Node* u = v->uses()[0].user;
    if (fusion::patternOf(*u) != fusion::OpPattern::Elementwise || u->numResults() != 1 ||
        u->result(0)->type().dims() != v->type().dims())
      return false;
    v = u->result(0);
  }
}

// x [N, H, W, C] . w [KH, KW, C, K] as one product: over the im2col columns (pad, one strided
// slice per tap, their concatenation) or, without `im2col`, over x itself (a 1x1 window).
Value* columnsProduct(Builder& b, const Node& n, bool im2col) {
  const auto [strides, lo, hi, lhsDil, rhsDil] = convWindow(n.attrs(), 2);
  const std::vector<int64_t> w = n.operand(1)->type().staticDims(),
                             y = n.result(0)->type().staticDims();
  const int64_t kh = w[0], kw = w[1], c = w[2], k = w[3];
  Value* cols = n.operand(0);
  if (im2col) {
    Value* src = n.operand(0);
    if (lo[0] || lo[1] || hi[0] || hi[1])
      src = b.pad(src, b.scalar(DType::F32, 0.0), {0, lo[0], lo[1], 0}, {0, hi[0], hi[1], 0},
                  {0, 0, 0, 0});
    std::vector<Value*> taps;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        int64_t r = i * rhsDil[0], q = j * rhsDil[1];
        taps.push_back(
            b.slice(src, {0, r, q, 0},
                    {y[0], r + (y[1] - 1) * strides[0] + 1, q + (y[2] - 1) * strides[1] + 1, c},
                    {1, strides[0], strides[1], 1}));
      }
    cols = b.concatenate(taps, 3);
  }
  // Constant weights stay a constant (the same bytes): the matmul then holds them in its layout.
  const Tensor* constant = rewrite::constantOf(n.operand(1));
  Value* weights = constant ? b.constant(constant->reshaped({kh * kw * c, k}))
                            : b.reshape(n.operand(1), {kh * kw * c, k});
  DotDims dims;
  dims.lhsContracting = {3};
  dims.rhsContracting = {0};
  return b.dotGeneral(cols, weights, dims);
}

// The rewrite of `n`, or null when it does not apply (the builder's status says why if it
// failed). `why` gets the reason for a rewrite, and for a convolution of few pixels left alone.
Value* im2colProduct(Builder& b, const Node& n, const ConvolutionToMatmulOptions& options,
                     std::string& why) {
  if (!plainNhwc(n)) return nullptr;
  const TensorType& xt = n.operand(0)->type();
  const TensorType& wt = n.operand(1)->type();
  const TensorType& yt = n.result(0)->type();
  // The node is verified: one window entry per spatial dim, strides and dilations positive.
  const auto [strides, lo, hi, lhsDil, rhsDil] = convWindow(n.attrs(), 2);
  for (size_t s = 0; s < 2; ++s)
    if (lhsDil[s] != 1 || lo[s] < 0 || hi[s] < 0) return nullptr;
  std::vector<int64_t> x = xt.staticDims(), w = wt.staticDims(), y = yt.staticDims();
  int64_t c = x[3], kh = w[0], kw = w[1], k = w[3];
  // A 1x1 window without padding reads only its output pixel's input: the input is the matrix of
  // columns. Over one pixel (a fully connected layer written as a convolution: squeeze and
  // excitation, a classifier) it is a product whatever its channels. With stride 1, few input
  // channels and whole vectors of output channels, feeding a concatenation, too: oneDNN 2.6's 1x1
  // convolution stores a slice of the concatenation only with its reference kernel, so it would
  // write a dense temp and a copy move it, which costs as much as the convolution when it has
  // few input channels; its matmul stores the slice itself (slower than the convolution with
  // many input channels or a partial vector of output channels).
  const bool pointwise = kh * kw == 1 && lo[0] == 0 && lo[1] == 0 && hi[0] == 0 && hi[1] == 0;
  const bool onePixel = pointwise && x[1] * x[2] == 1 && y[1] * y[2] == 1;
  const bool denseColumns = pointwise && strides[0] == 1 && strides[1] == 1;
  const bool intoSlice = denseColumns && c <= kConvolutionToMatmulSliceMaxChannels && k % 16 == 0 &&
                         feedsConcatenation(n);
  const int64_t pixels = y[0] * y[1] * y[2];
  const bool fewRows = denseColumns && rewrite::constantOf(n.operand(1)) &&
                       options.fasterAsProduct && options.fasterAsProduct(pixels, c, k);
  const bool im2col = !onePixel && !intoSlice && !fewRows;
  if (w[2] != c || (im2col && (kh * kw == 1 || c < 64))) return nullptr;
  if (!intoSlice && !fewRows && pixels > kConvolutionToMatmulMaxPixels) return nullptr;
  const std::string few = std::to_string(pixels) + " output pixels (at most " +
                          std::to_string(kConvolutionToMatmulMaxPixels) + ")";
  if (inputShare(x[1], y[1], kh, strides[0], lo[0], rhsDil[0]) *
          inputShare(x[2], y[2], kw, strides[1], lo[1], rhsDil[1]) <
      kConvolutionToMatmulMinInputShare) {
    why = "left a convolution despite its " + few +
          ": most of its taps read padding, which oneDNN's kernels skip and a product multiplies";
    return nullptr;
  }
  if (options.keepWinograd && kh == 3 && kw == 3 && strides[0] == 1 && strides[1] == 1 &&
      rhsDil[0] == 1 && rhsDil[1] == 1 && c % 16 == 0 && k % 16 == 0) {
    if (winogradPays(y[0], y[1], y[2], k)) {
      why = "left a convolution despite its " + few +
            ": a Winograd kernel does 4/9 of its multiplies or fewer";
      return nullptr;
    }
    why = "not Winograd (its 2x2 tiles over " + std::to_string(y[1]) + "x" + std::to_string(y[2]) +
          " outputs of " + std::to_string(k) +
          " channels do not pay: winogradPays, convolution_to_matmul.h); ";
  }
  why += onePixel    ? "a 1x1 window over one pixel: the input is the product's matrix"
         : intoSlice ? "a 1x1 window over " + std::to_string(c) +
                           " channels into a concatenation: the product stores its slice"
         : fewRows ? "a 1x1 window over " + std::to_string(pixels) +
                         " pixels: the target's product of so few rows is faster"
                   : "an im2col and one product: " + few +
                         ", which oneDNN's convolution kernels split badly";

  return columnsProduct(b, n, im2col);
}

// A transposed convolution whose window equals its stride (lhs dilation s, window s, padding
// s - 1 on both sides, stride 1, constant weights) as a product and a depth-to-space, or null:
// each input pixel then feeds its own s x s block of outputs, out[i*s + a] = x[i] . w[s-1-a].
Value* depthToSpaceProduct(Builder& b, const Node& n) {
  if (!plainNhwc(n)) return nullptr;
  const auto [strides, lo, hi, lhsDil, rhsDil] = convWindow(n.attrs(), 2);
  const Tensor* w = rewrite::constantOf(n.operand(1));
  if (!w) return nullptr;
  const std::vector<int64_t> wd = w->dims(), x = n.operand(0)->type().staticDims();
  for (size_t s = 0; s < 2; ++s)
    if (lhsDil[s] < 2 || wd[s] != lhsDil[s] || strides[s] != 1 || rhsDil[s] != 1 ||
        lo[s] != wd[s] - 1 || hi[s] != wd[s] - 1)
      return nullptr;
  const int64_t sh = wd[0], sw = wd[1], c = wd[2], k = wd[3];
  // rhs[ci, (a*sw + bb)*k + o] = w[sh-1-a, sw-1-bb, ci, o]
  Tensor rhs(DType::F32, {c, sh * sw * k});
  const float* src = w->data<float>();
  float* dst = rhs.mutableData<float>();
  for (int64_t a = 0; a < sh; ++a)
    for (int64_t bb = 0; bb < sw; ++bb)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t o = 0; o < k; ++o)
          dst[ci * sh * sw * k + (a * sw + bb) * k + o] =
              src[(((sh - 1 - a) * sw + (sw - 1 - bb)) * c + ci) * k + o];
  DotDims dims;
  dims.lhsContracting = {3};
  dims.rhsContracting = {0};
  Value* y = b.dotGeneral(n.operand(0), b.constant(std::move(rhs)), dims);
  y = b.reshape(y, {x[0], x[1], x[2], sh, sw, k});
  y = b.transpose(y, {0, 1, 3, 2, 4, 5});
  return b.reshape(y, {x[0], x[1] * sh, x[2] * sw, k});
}

}  // namespace

StatusOr<bool> convolutionToMatmul(Module& m, const ConvolutionToMatmulOptions& options) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    std::vector<Node*> convs;
    for (const auto& n : f->nodes())
      if (n->op() == OpCode::Convolution) convs.push_back(n.get());
    for (Node* n : convs) {
      Builder b = rewrite::builderBefore(n);
      std::string why;
      Value* product = im2colProduct(b, *n, options, why);
      if (!product && b.ok()) {
        product = depthToSpaceProduct(b, *n);
        if (product)
          why = "a transposed convolution whose window is its stride: one product and a "
                "depth-to-space";
      }
      if (!b.ok()) return Status(b.status()).prefix("convolution-to-matmul on " + n->describe());
      if (!why.empty()) m.addRemark("convolution-to-matmul: " + n->describe() + ": " + why);
      if (!product) continue;
      rewrite::replaceValue(n->result(0), product);
      rewrite::eraseIfDead(n);
      changed = true;
    }
  }
  return changed;
}

std::unique_ptr<Pass> makeConvolutionToMatmulPass(ConvolutionToMatmulOptions options) {
  return makePass("convolution-to-matmul",
                  "convolutions with few output pixels to an im2col and one matmul, transposed "
                  "ones whose window is their stride to a matmul and a depth-to-space",
                  [options](Module& m) { return convolutionToMatmul(m, options); });
}

}  // namespace kiln
