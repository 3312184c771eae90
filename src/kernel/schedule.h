// Schedule passes: kernel IR in, kernel IR out. The lowering (lower.h) emits serial loops and
// Reduce statements; a target's schedule is a sequence of these passes with its parameters
// (the CPU's: runtime/target.h, Target::schedule). Each pass is a rule over the IR alone, so
// `kiln-opt --lower --<pass>` shows it on any `.kir` input.
//
// Every pass leaves kernels of kind "opaque" as they are: their lowering (lower_opaque.h)
// schedules its own loops, and only it knows which must run in order (a scatter's updates).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// The CPU target's parameters (its schedule: codegen/cpu/cpu_target.cpp): loop nests with less work
// than this (statements executed) run serially, since a thread handoff costs more; reductions split
// into this many partial accumulators (two AVX2 vectors of f32); rows up to this many elements are
// cached; a loop splits into at most this many pieces at its comparisons (a concatenate of up to
// this many inputs along it).
inline constexpr int64_t kParallelThreshold = 16384;
inline constexpr int64_t kReductionLanes = 16;
inline constexpr int64_t kRowCacheElements = 4096;
inline constexpr int64_t kMaxLoopPieces = 64;
// A scratch row of at most this many bytes (four AVX-512 vectors) is kept in vector registers.
inline constexpr int64_t kRegisterRowBytes = 256;
// Transposes run in blocks of this many elements square (blockTransposes): 16 f32 are a cache line.
inline constexpr int64_t kTransposeBlock = 16;
// The least work per part of a row reduction split over threads (splitRowReductions): its
// updates are vectorized, so a part of kParallelThreshold took about as long as the handoff
// (regnet_y_400mf 3% slower at 2 threads).
inline constexpr int64_t kRowSplitWork = 65536;

// A serial loop over [0, n) whose body compares its variable with constants (`v < c`, `v >= c`,
// ...) splits at those points into consecutive loops, at most `maxPieces`, each over a range
// where every such comparison has one value; the indices are then simplified, so each loop keeps
// only the operand its selects choose there (a concatenate along the loop reads one input per
// loop, not every input, clamped, at every point). Only loops that declare nothing inside
// (innermost loops without reductions or scratch) split. Each split is noted on the kernel.
Kernel partitionLoops(const Kernel& k, int64_t maxPieces);

// A Reduce over one loop whose value computes a transcendental function (exp, log, tanh, ...)
// that later loops or reductions over the same extent in the same block compute again at the
// same point (softmax's exp(x - max)): the values are stored to a local row of at most
// `maxElements` in a loop of their own, and the reduction and the later ones read them there.
// Without one, a load strided along the Reduce's loop that later loops read again (a layer norm
// over a transposed input) is cached the same way: one strided pass, the rest contiguous.
Kernel cacheRows(const Kernel& k, int64_t maxElements);

// cacheRows over the statements of `s` (a row the GPU schedule splits over threads, each of
// which then keeps its elements of the row in registers), for rows of constant length only: a
// Reduce's value that loads one of `memory` is kept too, so the later passes over the row load
// nothing again. `made` gets the names of the rows it declares.
StmtRef cacheRowsIn(const StmtRef& s, int64_t maxElements, const std::set<std::string>& memory,
                    FreshNames& names, std::set<std::string>& made);

// A scratch row that a serial loop nest only updates (acc[i] = acc[i] op x, op a sum, max or
// min; nothing else stored in the nest) over its outer loop: a reduction over outer axes that
// keeps a row too short to run in parallel (a squeeze-and-excitation block's pool over H and W of
// NHWC). The outer loop splits into 2-8 consecutive chunks (the most that divide it and leave
// each at least `threshold` work) in a parallel loop, each updating its own row of a
// new temp buffer from the identity, and the rows are then combined into the scratch row in
// order. A float sum splits only with `reassociate`.
Kernel splitRowReductions(const Kernel& k, int64_t threshold, bool reassociate);

// The outermost loop of each nest (a loop not inside another) becomes parallel when the nest
// executes at least `threshold` statements (a Reduce counts its iterations) and writes no
// scratch buffer declared outside it (its iterations would share it). A nest that reaches the
// threshold only at some sizes of the kernel's symbols chooses at run time, when the program has
// more than one thread (`threads`; with one, the parallel copy would run serially anyway).
Kernel parallelizeOuter(const Kernel& k, int64_t threshold, int threads = 2);

// Serial loops whose bodies only store (no loop, condition, call or scratch buffer inside)
// become vectorized loops.
Kernel vectorizeInner(const Kernel& k);

// A nest whose vectorized innermost loop stores contiguously while a load moves along an outer
// loop (a transpose: contiguous there, 16 or more elements apart along the store's loop; the
// innermost such loop) runs in blocks of `block` x `block` of those two loops, the last ones
// short, the block of the outer loop innermost but one, the other loops unchanged: the lines a
// block's first row loads serve its other rows from L1, where rows as long as a tensor's dim
// evict them first (a [3199, 256] f32 transpose at 9% of the copy bandwidth; NHWC -> NCHW of
// [1, 64, 64, 256], whose contiguous load runs along the outermost loop, at 9%). After
// vectorizeInner.
Kernel blockTransposes(const Kernel& k, int64_t block);

// A Reduce whose innermost loop has at least 2 * lanes iterations and reads some buffer
// contiguously along it accumulates into `lanes` partial results:
//   lanes[l] = identity;  for the outer loops { for jo { vectorized for l: lanes[l] op= x(jo*L+l) }
//   the tail into the first lanes };  then acc op= lanes[l] for each l.
// A float sum or product splits only with `reassociate` (its result depends on the order).
Kernel splitReductions(const Kernel& k, int64_t lanes, bool reassociate);

// Every Reduce becomes serial loops updating its accumulator, in the Reduce's order.
Kernel lowerReductions(const Kernel& k);
// A scratch row of more than `maxBytes` whose every use is a loop along it that reads and writes
// it at the loop's variable (a pooling's or a reduction's accumulators over the kept channels,
// updated at every point of the reduced loops around) is computed in blocks: a serial loop over
// blocks of at most `maxBytes` (the largest that divides the row, a multiple of 8 elements)
// around the row's declaration, each loop along the row covering one block. A block that fits in
// registers stays there over the reduced loops (the CPU: kRegisterRowBytes), where the whole row
// went through memory at every step. Rows also stored elsewhere, or other buffers both stored
// and loaded in the declaration, stay as they are, and so do rows updated at more than 32
// points of the loops around (a global pool streams its input once along the whole row).
Kernel registerRows(const Kernel& k, int64_t maxBytes);

// The size of the largest buffer of accumulators `k` updates through memory: in a loop, a store
// whose value loads the element it stores, to a temp buffer or to a scratch row of more than
// `registerBytes` (what registerRows left whole: one that long is not kept in registers); 0 when
// none. `kiln bench --roofline` names it as a slow memory-bound kernel's reason.
int64_t accumulatorsThroughMemory(const Kernel& k, int64_t registerBytes = kRegisterRowBytes);

}  // namespace kiln::kernel
