// pad-conv-channels: zero-pads the input channels of f16 and bf16 convolutions to a multiple of 8
// (the cuda target's graph pass).
//
// A convolution of one feature group whose input has C channels, C not a multiple of 8, reads
// instead
//
//   x' = pad(x, 0) to C' = ceil(C / 8) * 8 channels     (fused into x's producer)
//   w' = w with C' input channels, the new ones zero    (a constant of C' when w is one)
//
// and computes the same result exactly (each added product is 0 * 0). Why: cuDNN's tensor-core
// kernels take f16 and bf16 channels in multiples of 8; an RGB stem (C = 3) otherwise runs on
// a slow path (resnet50's 7x7 stem at batch 64 in f16: 0.85 ms of a 2.7 ms model).
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Returns whether anything changed.
StatusOr<bool> padConvChannels(Module& m);

}  // namespace kiln
