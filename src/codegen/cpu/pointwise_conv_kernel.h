// Kiln's 1x1 convolution for the CPU (AVX-512), for the calls whose post-ops carry a swish:
// f32, stride 1, no padding, one group, channels innermost and pixels dense (nhwc, hwio), output
// channels a multiple of 16.
//
// oneDNN's swish post-op takes about 25 vector operations, as many as the convolution's own
// multiply-adds where the input has few channels: efficientnet_b0's 16 -> 96 expansion over
// 112x112 took 0.32 ms without it and 0.80 with it. Here a tile of up to 24 accumulators (pixels
// by vectors of 16 output channels) sums over the input channels and gets its post-ops in
// registers, the swish in 17 operations (avx512_conv.h): 0.44 ms for that layer. The tile
// reads its weights (K rows of up to 96 channels) once per pixel block, so they must stay in L1:
// the kernel declines weights of more than kPointwiseMaxPanelBytes a column block, where
// oneDNN's blocking over K wins (112 -> 672 over 14x14 ran 0.23 ms here, 0.21 in oneDNN).
//
// Chosen over oneDNN's kernel where it takes the call (the CPU schedule's note names it and says
// why); elsewhere oneDNN's runs.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// The most bytes of weights one column block of the tiles reads (K rows of 96 channels).
inline constexpr int64_t kPointwiseMaxPanelBytes = 32 << 10;

// The kernel for convolution `n` followed by `postOps`, or why not (then oneDNN's runs). With
// `probe`, only its description. run()'s buffers: input, weights, result, then the add/mul
// post-ops' operands, all dense row-major as in the IR.
StatusOr<std::unique_ptr<LibraryKernel>>
createPointwiseConvKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                          bool probe);

}  // namespace kiln::codegen::cpu
