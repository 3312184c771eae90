// Which convolution calls a GPU convolution library (cuDNN) takes, as one N-d cross-correlation
// over NCHW or NHWC tensors (OIHW or OHWI kernels; and 3-D ones). Decided from the call's
// attributes and buffer shapes alone (no toolkit), so the schedule records the choice and its
// reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace kiln::codegen::cuda {

struct ConvShape {
  int64_t batch = 1, inFeatures = 1, outFeatures = 1, groups = 1;
  // Per spatial dim, at least 2 of them (a 1-D convolution is a 2-D one with height 1).
  std::vector<int64_t> in, window, out, stride, pad, dilation;
  DType type = DType::F32;
  bool channelsLast = false;  // NHWC tensors and OHWI kernels (else NCHW, OIHW)
  bool tf32 = false;          // f32 convolutions on TF32 tensor cores (--precision tf32)
  std::string str() const;    // "f32 [1, 64, 56, 56] * [64, 64, 3, 3] stride 1 pad 1"
};

// The convolution `call` of kernel `k` (its post-ops aside) as a ConvShape, or nullopt with
// `why` saying what the library cannot take: types other than one of f32, f16, bf16; dimension
// numbers other than bf01_oi01->bf01 and b01f_o01i->b01f; lhs dilation (a
// transposed convolution); batch groups; padding that differs between the two sides of a dim.
std::optional<ConvShape> convShape(const kernel::Kernel& k, const kernel::Stmt& call,
                                   std::string* why);

// The epilogue cuDNN's fused convolution applies as it writes, y = relu(conv + z + bias): the
// leading post-ops of a convolution that are one bias add along the feature dim and at most one
// add of an operand of the result's shape (z), in either order, then a relu. cuDNN takes an
// identity activation with only one algorithm (implicit precomputed GEMM), so a chain without
// the relu, or without a bias, is not taken: the measured algorithm and a loop after it win.
// Taken in f32 and f16 (the configurations cuDNN documents for the fused call).
struct ConvEpilogue {
  int residual = -1;        // the post-op whose operand is z, or -1
  int bias = -1;            // the post-op whose operand is the bias
  size_t taken = 0;         // 0, or the post-ops through the relu
  std::string str() const;  // "bias + residual + relu" ("none" when nothing is taken)
};

// The epilogue of convolution `call` (with ConvShape `c`); `why` says why it stops before the
// last post-op.
ConvEpilogue convEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, const ConvShape& c,
                          std::string* why);

}  // namespace kiln::codegen::cuda
