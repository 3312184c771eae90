// Kiln's matrix product of a few rows against constant weights that stream from memory
// (AVX-512): vit_b_32's and BERT-like encoders' layers at batch 1 (16 to 64 rows), and
// matrix-vector products (one row: classifier layers at batch 1).
//
// Such a product does 2 x rows flops per weight, so with weights that are not in cache it waits
// on memory unless the weights arrive ahead of their use. oneDNN's brgemm matmul leaves that to
// the hardware prefetchers, which do not keep up: 50x768x3072 with weights cold took 1.77 ms
// (5.3 GB/s of weights) against 1.16 ms warm. Here the weights are packed into panels of 64
// columns, each panel K x 64 contiguous, and while a panel's rows are computed (6 rows a pass:
// 24 accumulators) the next one is fetched into L2, spread over the passes: 1.20 ms cold (then
// fetching the panel two ahead; fetching the next one instead ran the products of 13 zoo models
// 5% faster, at 1 and at 2 threads).
// Warm it runs as fast as oneDNN's kernel (1.24 against 1.16-1.33 ms); with more rows oneDNN's
// blocking is faster warm (128 rows: 3.03 against 2.70 ms), and so it is with 2 to 15 (9 rows:
// 0.43 against 0.29 ms). One row (a matrix-vector product) streams its panels without fetches,
// which only get in the way of the hardware's stream there: alexnet's 1x9216x4096 took 4.97 ms
// in oneDNN's matmul and 4.70 here (2 threads: 2.43 against 2.31). A panel deeper than
// kPanelProductChunkDepth rows is computed in chunks of K, C holding the sums between them, with
// the next chunk fetched. On several threads each takes one run of panels. Post-ops run as
// loops after the call.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Rows it takes: 1, or kPanelProductMinRows to kPanelProductMaxRows (those fetched ahead).
inline constexpr int64_t kPanelProductMinRows = 16;
inline constexpr int64_t kPanelProductMaxRows = 64;
// Weights of at least this many bytes: smaller ones stay in cache from run to run.
inline constexpr int64_t kPanelProductMinWeightBytes = 256 * 1024;
// On several threads each takes a run of panels; each thread's share of the weights must be at
// least this for the fetching ahead to pay (2 threads: seq2seq_transformer's 1 MiB products 0.83 ->
// 0.87 ms, vit_b_32's 2.3-9.4 MiB ones 30.0 -> 27.2 ms).
inline constexpr int64_t kPanelProductMinWeightBytesPerThread = 1024 * 1024;
// Panels are computed in chunks of at most this many rows of K (256 KiB), so that the chunk
// computed and the one fetched ahead share L2 with room (wide_resnet50_2's 16x9216x1024 ran at
// 10 GB/s of weights in oneDNN's matmul, 14 in chunks; whole panels of K = 3072 overflowed L2).
inline constexpr int64_t kPanelProductChunkDepth = 1024;

// Whether the kernel takes dot_general `n` on a run of `threads` threads: AVX-512, on several
// threads kPanelProductMinWeightBytesPerThread, f32 lhs [..., K] contracting its last dim into M =
// 1 or kPanelProductMinRows..kPanelProductMaxRows rows, constant 2-D weights [K, N] or [N, K] of N
// a multiple of 64, at least kPanelProductMinWeightBytes, no batch dims. Else why not (`why`).
bool panelProductTakes(const Node& n, int threads, std::string* why = nullptr);
// The same for an f32 product of m rows by k by n against constant 2-D weights.
bool panelProductTakes(int64_t m, int64_t k, int64_t n, int threads, std::string* why = nullptr);

// The kernel for `n` (panelProductTakes), with its weights packed here or taken in place from an
// artifact's (`prepacked`, when in its layout). With `probe`, only its description. run()'s
// buffers: lhs, weights (unread), result.
StatusOr<std::unique_ptr<LibraryKernel>>
createPanelProduct(const Node& n, int threads, const PackedWeights* prepacked, bool probe);

}  // namespace kiln::codegen::cpu
