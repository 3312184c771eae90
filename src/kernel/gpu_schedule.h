// GPU schedule passes: the kernel IR a GPU target launches (the cuda target's schedule,
// codegen/cuda/cuda_target.cpp). Like the passes of schedule.h, each is a rule over kernel IR.
#pragma once

#include <cstdint>

#include "kernel/kernel_ir.h"

namespace kiln::kernel {

// Each top-level statement of `k` becomes one launch:
//   gpu_block for b in [0, B) { gpu_thread for t in [0, T) { if (b * T + t < n) { ... } } }
// The loops at the top of a nest, perfectly nested, whose iterations may run in any order (the
// rule of parallelizeOuter: they write no scratch buffer declared outside them; in an opaque
// kernel, the loops its lowering made parallel or vectorized) are flattened into one index
// g = b * T + t over their n iterations, each loop variable recovered from g; the guard is there
// only when B * T overhangs n. A nest without such a loop runs on one thread. Scratch buffers
// declared around the launches become the kernel's temp buffers (device memory, which its launches
// share, in order). T = min(threadsPerBlock, n).
//
// A nest whose reductions read consecutive elements for consecutive iterations of its innermost
// mapped loop, and not along their own innermost loop (a reduction over outer dims, as a global
// average pool in NHWC), keeps a thread per output: its threads' loads are coalesced and a row
// per block would read with a stride. Otherwise a nest whose body reduces rows of at least
// kMinBlockRow elements runs a row per block instead
// (blockIdx is the row): its Reduce statements split over the block's threads, each combining a
// strided part (consecutive threads read consecutive elements), then a tree in shared memory;
// its loops that store to memory split over the threads too, and its stores to memory outside
// loops run on thread 0 (a barrier follows a write that the row reads back). T is the row's
// length rounded up to a power of two, at least a warp and at most threadsPerBlock. A float sum
// or product splits only with `reassociate`; a body of another shape keeps a row per thread.
// The Reduce statements left (a row per thread) must be lowered after (lowerReductions).
// Rows of kMinBlockRow to kMaxWarpRow elements run a row per warp instead, threadsPerBlock / 32
// rows to a block: each Reduce combines its lanes' strided parts by shuffles (warp_sum,
// warp_max, warp_min; a kind or type they do not take, or a row that reads back what it
// stored, keeps the row per block), and stores outside loops run on lane 0.
// With `accessBytes` > 0, a warp's row whose 32 lanes can each take accessBytes of consecutive
// elements at a time (the row a multiple of 32 such groups) is split that way: each pass over
// the row is then one wide load or store per lane and access (wideAccesses), and rows of up to
// kWarpRowAccesses such groups a lane (a layer norm's 768 f16) run a row per warp too.
inline constexpr int64_t kMinBlockRow = 32;
inline constexpr int64_t kMaxWarpRow = 512;
inline constexpr int64_t kWarpRowAccesses = 4;
inline constexpr int64_t kMinRowLanes = 8;
// A row split over threads keeps the values its later passes would compute or load again
// (softmax's exps, a layer norm's input: cacheRowsIn), at most this many a thread, in registers.
inline constexpr int64_t kRowRegisters = 32;
Kernel mapToGpu(const Kernel& k, int64_t threadsPerBlock, bool reassociate = true,
                int64_t accessBytes = 0);

// The lowering gives a reduction that keeps the innermost dim a row of accumulators per index
// of the other kept dims (lower.h), updated by a loop inside the reduced loops: the CPU's vector
// form, but one GPU thread's serial work. Each such row becomes a loop over groups of L
// consecutive elements, each group an array of L accumulators that a vectorized loop updates
// inside the reduced loops (so each step's loads of the group move `bytes` at a time, like
// vectorizeLanes' stores), and mapToGpu maps every group to a thread. L is `bytes` over the
// widest element the row stores or loads along itself, halved until it divides the row and each
// such access's index at the group's first element, and until the groups number at least
// kMinLaneThreads; L = 1 (a row whose output is not contiguous in it, or too short) makes each
// element a Reduce into an accumulator of its own, a thread per output.
// Fewer threads leave a large GPU idle: 16384 (64 blocks) left half of the H200's 132 SMs
// without a block in resnet50_b64's global average pool.
inline constexpr int64_t kMinLaneThreads = 65536;
Kernel reductionsPerOutput(const Kernel& k, int64_t bytes);

// A nest of loops whose innermost loop only stores, each store to consecutive elements for
// consecutive iterations, splits that loop into groups of lanes a thread runs together:
//   for i in [0, E) { body }  ->  for io in [0, E / L) { vectorized for iv in [0, L) { body } }
// with i = io * L + iv, so that each group of stores, and of loads that move with them, is one
// access of `bytes` (a GPU's 16-byte loads and stores: a quarter of the memory instructions of
// 4-byte ones, half of what saturates the bus). L is `bytes` over the widest stored element,
// halved until it divides E and every store's index at iv = 0 (lanes.h); a buffer the body both
// loads and stores must be loaded only at the index it is stored at (each lane reads what it
// writes). Runs before mapToGpu, which maps the loops around the lanes.
Kernel vectorizeLanes(const Kernel& k, int64_t bytes);

// The most lanes a vectorized loop runs as one thread's group (a 16-byte access of one-byte
// elements); a longer one runs as a plain loop.
inline constexpr int64_t kMaxLanes = 16;

// Each vectorized loop of at most kMaxLanes lanes over stores only (vectorizeLanes' groups) moves
// the accesses whose elements are the lanes' consecutive group, its first aligned to the group
// (laneBase), as wide copies through local arrays the lanes then read and write:
//   vectorized for v in [0, L) { %y[b + v] = f(%x[b + v]) }  ->
//   local %ld0: f32[L] { local %st0: f32[L] {
//     %ld0[0 : L] = %x[b : L]
//     vectorized for v in [0, L) { %st0[v] = f(%ld0[v]) }
//     %y[b : L] = %st0[0 : L]
//   } }
// Only kernel buffers (memory) group; a load whose buffer an earlier store of the loop writes
// stays per lane. Runs last (after the indices are simplified), so the proofs are on the
// indices the code uses.
Kernel wideAccesses(const Kernel& k);

// A nest of loops over one store whose index moves by one element with the innermost loop s,
// and whose value loads a buffer along another loop a (its index moving by one element with a,
// by more with s: a transpose, as NCHW -> NHWC), becomes one launch through a tile in shared
// memory: a block per tile of Ta x Ts elements of a and s (Ts = min(extent of s, 32), Ta about
// 1024 / Ts, a multiple of 32, at most a's extent) and per index of the other loops; its threads
// load the tile with consecutive threads along a, then, after a barrier, store it with
// consecutive threads along s, each access coalesced; guards where a tile or a round overhangs.
// Of several such loads the widest element's is tiled; a shorter than 8 keeps the nest as is.
// Runs before vectorizeLanes and mapToGpu, which leave the launch as it is.
Kernel tileTransposes(const Kernel& k, int64_t threadsPerBlock);

// The launches of a kernel mapToGpu scheduled: its top-level statements.
std::vector<StmtRef> gpuLaunches(const Kernel& k);

}  // namespace kiln::kernel
