// Kiln's grouped convolution for the CPU (AVX-512): 2-D, f32, channels innermost (nhwc, hwio),
// groups of 2 or 4 input and output channels (ResNeXt's first stage: 32 groups of 4).
//
// oneDNN's jit kernel computes each group in 16 lanes (ResNeXt's 128 channels in groups of 4 at
// 56x56 take 0.75 ms, as long as groups of 16), so groups of 4 waste three quarters of its work.
// Here a vector holds 16 output channels of 16 / width groups, and a group's channels lie within
// one 128-bit lane: for input channel j of the groups, one in-lane shuffle broadcasts each group's
// j-th input in its lanes and one FMA multiplies it by the 16 output channels' weights. Output
// pixels are computed eight at a time along the row (eight FMA chains; the weights loaded once
// for the eight); for a window 3 wide at stride 1 the ten input pixels of eight outputs are
// shuffled once per input channel and used by all three taps. Padding is checked per tap only at
// the row's ends; rows are split over the pool's threads. Post-ops: adds and muls of a
// per-channel vector or of an operand of the result's shape, clamps and swish (avx512_conv.h),
// in registers before the store. Groups of 8 stay on oneDNN: there a shuffle crosses 128-bit lanes,
// and in ResNeXt the two ran equally fast (docs/codegen.md, "Grouped convolutions").
//
// Chosen over oneDNN's kernel where it takes the call (the CPU schedule's note names it and
// says why); elsewhere oneDNN's runs.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Whether this machine runs the kernel (AVX-512F).
bool groupedConvKernelRuns();

// The kernel for convolution `n` followed by `postOps`, or why not (then oneDNN's runs). With
// `probe`, only its description. run()'s buffers: input, weights, result, then the add/mul
// post-ops' operands, all dense row-major as in the IR.
StatusOr<std::unique_ptr<LibraryKernel>>
createGroupedConvKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                        bool probe);

}  // namespace kiln::codegen::cpu
