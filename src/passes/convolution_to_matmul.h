// convolution-to-matmul: rewrites a convolution with few output pixels into an im2col gather and
// one matrix product, for the CPU backend.
//
// A 2-D f32 convolution in NHWC with HWIO weights (`b01f_01io->b01f`, what layout-assignment
// gives the CPU), one group, no lhs dilation, a window larger than 1x1, at least 64 input
// channels and at most kMaxPixels output pixels (batch x height x width) becomes
//
//   xp   = pad(x, 0)                                  (when it has padding)
//   s_ij = slice(xp, window offset (i, j) x dilation, stride)   [N, OH, OW, C], one per tap
//   cols = concatenate(s_00, s_01, ..., dimension = 3)          [N, OH, OW, KH*KW*C]
//   y    = dot_general(cols, reshape(w) [KH*KW*C, K])           [N, OH, OW, K]
//
// Fusion makes the pad, slices and concatenation one loop kernel (the im2col) and the product a
// library matmul that takes the convolution's epilogue (bias, residual, activation) as post-ops.
// Why: oneDNN 2.6's avx2 convolution splits so few pixels badly. Measured on resnet's layers
// (3x3, stride 1, bias and relu; `kiln bench`, median of 40 runs): 7x7x512 5.28 -> 3.36 ms at 1
// thread and 2.84 -> 1.96 ms at 2; 14x14x256 4.20 -> 3.59 and 2.53 -> 2.17 ms. 1x1 windows gain
// nothing (the matmul is the same product the convolution computes).
// Run by the CPU compile after the default pipeline (runCpuPasses) and by kiln-opt. Its im2col
// kernels compile in about 25 ms each because the CPU backend moves their copy rows as blocks
// (kernel/copy_loop.h); as vectorized loops they took LLVM 100-150 ms each (docs/passes.md).
//
// A 1x1 window over one pixel (squeeze-and-excitation's convolutions, a classifier written as a
// convolution) becomes the product whatever its channels, without the im2col (the input is the
// matrix): oneDNN ran it as its generic gemm, packing the weights on every call, where the
// matmul primitive packs them once (mobilenet_v3_small 2.27 -> 1.69 ms at 1 thread).
//
// It also leaves convolutions whose taps mostly read padding (less than half of the (output
// pixel, tap) pairs read the input: a dilated convolution over a small feature map): the im2col
// product multiplies every tap, oneDNN's direct kernels skip those of the padding (deeplabv3's
// 3x3 convolution of dilation 12 over 14x14x960: 8.6 ms as the product, 2.3 ms on oneDNN).
//
// A 1x1 window of stride 1 with constant weights becomes the product where the target's
// `fasterAsProduct` says so (the CPU: its panel product for 16-64 pixels against weights that
// stream from memory; resnext50_32x4d's 1x1 convolutions over 5x5 pixels ran at 56-63% of the
// matmul rate on oneDNN).
//
// A 1x1 window of stride 1 over at most 64 input channels, with output channels in whole vectors,
// whose result is a concatenation's operand (through its epilogue) becomes the product whatever
// its pixels: oneDNN 2.6's 1x1 convolution stores a slice of the concatenation only with its
// reference kernel (so a dense temp and a copy), its matmul stores it (squeezenet1_1's expand
// convolutions 0.385 -> 0.273 ms at 1 thread); with more channels the convolution is faster.
//
// A transposed convolution whose window is its stride (lhs dilation s = window, padding s - 1 on
// both sides, stride 1, constant weights, the same layout) becomes one dot_general with the
// weights flipped and rearranged to [C, s*s*K] and a depth-to-space (reshape, transpose,
// reshape): each input pixel feeds its own s x s block of outputs, where oneDNN's deconvolution
// multiplies the dilation's zeros too (unet's up-samplings took up to 0.43 ms each at 2 threads;
// after it, none is among its 15 slowest kernels).
//
// With `keepWinograd` (pass spec `convolution-to-matmul=keep-winograd`; the CPU compile sets it
// where oneDNN has Winograd kernels, codegen/cpu/onednn.h) it leaves 3x3 convolutions of stride 1
// and dilation 1 whose channel counts are multiples of 16 and whose output winogradPays: a
// Winograd convolution does 4/9 (F(2x2,3x3)) or 1/4 (F(4x4,3x3)) of the multiplies and beats the
// product (resnet18 at 1 thread: 26.6 -> 21.0 ms).
#pragma once

#include <functional>
#include <memory>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/status.h"

namespace kiln {

inline constexpr int64_t kConvolutionToMatmulMaxPixels = 196;
inline constexpr double kConvolutionToMatmulMinInputShare = 0.5;
inline constexpr int64_t kConvolutionToMatmulSliceMaxChannels = 64;

// Whether a 3x3 convolution of stride 1 with a batch x oh x ow x channels output gains from
// Winograd's F(2x2,3x3) (whole 2x2 tiles of 16 multiplies against 9 per pixel, from weights
// transformed into 16/9 as many floats): when its tiles do at most 0.7 of the direct multiplies
// (not over a 3x3 output), when there are at least 16 of them (with fewer, its weights serve too
// few multiply-adds per byte for one core's memory bandwidth), and with at least 32 output
// channels (with 16, oneDNN's Winograd kernel is slower than its direct one). Measurements:
// docs/codegen.md, "Winograd convolutions".
inline bool winogradPays(int64_t batch, int64_t oh, int64_t ow, int64_t channels) {
  const double tiles = double(batch) * double((oh + 1) / 2) * double((ow + 1) / 2);
  return channels >= 32 && tiles >= 16 && 16.0 * tiles <= 0.7 * 9.0 * double(batch * oh * ow);
}

struct ConvolutionToMatmulOptions {
  bool keepWinograd = false;
  // Whether the target runs a product of `rows` x `k` x `n` against constant weights faster than
  // the 1x1 convolution it would replace: the CPU's panel product for 16-64 rows fetches weights
  // that stream from memory ahead of their use, oneDNN's 1x1 convolution does not.
  std::function<bool(int64_t rows, int64_t k, int64_t n)> fasterAsProduct;
};

// Returns whether anything changed.
StatusOr<bool> convolutionToMatmul(Module& m, const ConvolutionToMatmulOptions& options = {});

std::unique_ptr<Pass> makeConvolutionToMatmulPass(ConvolutionToMatmulOptions options);

}  // namespace kiln
