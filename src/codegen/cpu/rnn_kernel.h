// Kiln's lstm and gru kernel for the CPU (AVX-512): the whole sequence in one call. The gru is
// the linear_before_reset form (PyTorch's; ONNX's default form stays on oneDNN's primitive).
//
// The input projection of every step and direction is one oneDNN matrix product (x [S*B, I]
// times w, the biases b_w + b_r as its bias). Each step is then one pass over r's
// packed panels per batch row, with the gates applied to the accumulators in registers: a panel
// holds the gates (ONNX's i o f c, or z r h) of 32 hidden units, so a step reads r once and
// writes h (and c) directly, with no gate buffer. Weights are packed once, when the kernel is
// created. Threads: the two directions of a bidirectional lstm run on their own threads (each
// keeps its r in its core's cache); otherwise the panels of each step are split over the threads.
//
// Chosen over oneDNN's lstm_forward and lbr_gru_forward (their per-step products, a packed sgemm
// sized for many rows, ran bilstm_encoder's layers at 42-44 GFLOP/s, and stacked_gru_encoder's
// GRUs slower at 2 threads than at 1) where the CPU has AVX-512; elsewhere oneDNN's primitives
// run.
#pragma once

#include <memory>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Whether this machine runs the kernel (AVX-512F).
bool rnnKernelRuns();

// The kernel for lstm or gru node `n` (f32, static shapes, constant w, r and b; a gru with
// linear_before_reset), or why not. With `probe`, only its description (nothing packed). run()'s
// buffers: x, w, r, b, h0, (c0), y, y_h, (y_c); w, r and b are read from the packed copies.
StatusOr<std::unique_ptr<LibraryKernel>> createRnnKernel(const Node& n, int threads, bool probe);

}  // namespace kiln::codegen::cpu
