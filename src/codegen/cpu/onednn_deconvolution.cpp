// oneDNN library kernels: a convolution with lhs_dilation -> deconvolution_forward.
//
// ONNX's ConvTranspose imports as a convolution of the input dilated by the stride (lhs_dilation
// s) with the flipped kernel (onnx/ops_nn.cpp, convTranspose). oneDNN refuses lhs_dilation on
// convolutions, and Kiln ran such calls on the interpreter's kernel (a U-Net's up-sampling took
// 218 of a model's 228 ms). The same product is oneDNN's deconvolution (a jit kernel on the
// data gradient of a convolution): with window extent dk = (K-1)*r+1,
//
//   y[o] = sum_t x'[o + t*r - lo] k[t]   (x' the input dilated by s)
//        = sum_{i,u: s*i - PL + u*r = o} x[i] w[u]   with PL = dk-1-lo, w[u] = k[K-1-u],
//
// i.e. stride s, dilation r, padding PL = dk-1-lo and PR = dk-1-hi, and the kernel flipped back.
// The flipped kernel is made once, from the constant, and reordered into the layout the
// primitive picks (a kernel that is not a constant is refused: it would need flipping per run).
#include <algorithm>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "ir/tensor.h"

namespace kiln::codegen::cpu::onednn {
namespace {

// `t` (f32, row-major) with its dims `axes` reversed.
Tensor flipped(const Tensor& t, const std::vector<int64_t>& axes) {
  const std::vector<int64_t>& dims = t.dims();
  const std::vector<int64_t> strides = rowMajor(dims);
  Tensor out(DType::F32, dims);
  const auto* src = reinterpret_cast<const float*>(t.bytes());
  auto* dst = reinterpret_cast<float*>(out.mutableBytes());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    int64_t j = i;
    for (int64_t a : axes) {
      const auto d = static_cast<size_t>(a);
      const int64_t at = i / strides[d] % dims[d];
      j += (dims[d] - 1 - 2 * at) * strides[d];
    }
    dst[j] = src[i];
  }
  return out;
}

// The deconvolution's stride and padding per spatial dim, or why the convolution is not one.
struct DeconvWindow {
  Dims strides, lo, hi;
};
StatusOr<DeconvWindow> deconvWindow(const ConvAxes& c) {
  DeconvWindow w;
  for (size_t s = 0; s < c.ns; ++s) {
    if (c.strides[s] != 1)
      return Status::error(
          "a convolution with both lhs_dilation and a stride is not a deconvolution");
    const int64_t extent = (c.window[s] - 1) * c.rhsDil[s] + 1;
    w.strides.push_back(c.lhsDil[s]);
    w.lo.push_back(extent - 1 - c.lo[s]);
    w.hi.push_back(extent - 1 - c.hi[s]);
    if (w.lo.back() < 0 || w.hi.back() < 0)
      return Status::error(
          "a convolution with lhs_dilation and padding beyond its window is not a deconvolution");
  }
  return w;
}

}  // namespace

StatusOr<std::unique_ptr<LibraryKernel>>
createDeconvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                    const PackedWeights* prepacked, bool probe,
                    const std::vector<int64_t>& dstStrides) {
  KILN_ASSIGN_OR_RETURN(const ConvAxes conv, convAxes(n, /*transposed=*/true, dstStrides));
  KILN_ASSIGN_OR_RETURN(const DeconvWindow win, deconvWindow(conv));
  const memory::desc src = stridedDesc(conv.src), wei = stridedDesc(conv.wei),
                     dst = stridedDesc(conv.dst);
  KILN_ASSIGN_OR_RETURN(PostOpsPlan post, planPostOps(postOps, n.result(0)->type().staticDims(),
                                                      conv.dstDims, nullptr, /*biasAxis=*/1));
  // oneDNN 2.6's deconvolution applies post-ops (other than the bias) so slowly that a pass of
  // Kiln's loops after it is far cheaper: 64 -> 32 channels, 3x3, stride 2, 64x64 -> 128x128 at
  // one thread took 17.6 ms with a relu post-op and 2.1 ms without.
  if (post.ops.len() > 0)
    return Status::error("oneDNN's deconvolution applies post-ops other than the bias slowly");
  PrimitiveInputs in = primitiveInputs(n, wei, post, !postOps.empty());
  if (!in.constant && !in.held)
    return Status::error("a convolution with lhs_dilation needs a constant kernel (the "
                         "deconvolution flips it once)");
  std::optional<memory::desc> bias;
  if (post.bias) {
    bias = memory::desc({conv.kO}, memory::data_type::f32,
                        Dims{post.bias->desc.data.format_desc.blocking.strides[1]});
    post.bias->desc = *bias;
  }
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::deconvolution_direct;
  auto d = bias ? dnnl::deconvolution_forward::desc(prop, algo, src, in.weights, *bias, dst,
                                                    win.strides, conv.dDilation, win.lo, win.hi)
                : dnnl::deconvolution_forward::desc(prop, algo, src, in.weights, dst, win.strides,
                                                    conv.dDilation, win.lo, win.hi);
  dnnl::deconvolution_forward::primitive_desc pd(d, in.attr, cpuEngine());
  const std::string impl = pd.impl_info_str();
  std::string what = "de" + conv.what + ", the transposed convolution of lhs_dilation " +
                     joinDims(conv.lhsDil, "x");
  if (slowImplementation(impl)) return slowImplementationError(what, impl);
  // The kernel holds the flipped weights: they must not be in the constant's own layout, which
  // run() would read from the (unflipped) buffer.
  if (pd.weights_desc() == wei)
    return Status::error("oneDNN's " + impl + " deconvolution reads the kernel as it is");
  if (probe) return makeProbedKernel(kernelDescription(what, impl, in, HeldWeights{}, post) + ")");
  std::optional<Tensor> flip;
  if (in.constant) flip = flipped(*in.constant, conv.kernelSpatial);
  KILN_ASSIGN_OR_RETURN(HeldWeights held, packWeights(flip ? &*flip : nullptr, in.held, wei,
                                                      pd.weights_desc(), prepacked));
  std::string desc = kernelDescription(what, impl, in, held, post) + ", kernel flipped)";
  return makeOneDnnKernel(dnnl::deconvolution_forward(pd), src, wei, dst, pd.scratchpad_desc(),
                          std::move(held), std::move(post.bias), std::move(post.binaries), threads,
                          std::move(desc));
}

}  // namespace kiln::codegen::cpu::onednn
