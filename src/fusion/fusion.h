// Fusion: groups the ops of a function into kernels, each decision a value with its reason.
//
// The planner is the same for every backend: it decides which ops run together in one kernel, and
// the kernel IR lowering (src/kernel/) turns each kernel into loops. Kinds of fusion:
//   - loop fusion: an elementwise or injective producer computed inside its consumer's loop;
//   - input fusion: elementwise/injective producers computed inside a reduction's loop (the
//     softmax, layer norm and pooling kernels read their input once);
//   - epilogue fusion: elementwise consumers (bias add, activation, residual add) applied to the
//     result of a matrix product, convolution, reduction or attention before it is stored;
//   - recomputation: an injective producer (a broadcast, a transpose) computed again in each of
//     its consumers instead of being stored (index arithmetic only);
//   - multi-output fusion: a producer needed by several kernels is computed in one of them, which
//     also stores it for the others;
//   - sibling fusion: two loop kernels that read the same large input over the same iteration
//     space become one kernel with two outputs (one pass over the input).
// One bound: a kernel computes at most 128 values again per element (a member computed at n
// distinct indices, each a copy of its expression, counts n - 1); past it the producer is
// stored. Data movement that branches and joins (ShuffleNet's channel shuffles) would otherwise
// grow a kernel exponentially.
//
// Needs: a verified function, best after the default pipeline and shape specialisation (costs
// take symbolic dimensions as 1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fusion/concat_views.h"
#include "fusion/custom_fusion.h"
#include "fusion/epilogue.h"
#include "fusion/op_pattern.h"
#include "ir/ir.h"

namespace kiln::fusion {

// Sort and top_k rows up to this long rank each element in loops (O(n^2) per row, an element
// per thread: kernel/lower_opaque.h); longer rows stay a library call. The targets' default.
inline constexpr int64_t kSortRowLimit = 4096;

// The longest rows a sort and a top_k rank in loops (FusionOptions::sortRows).
struct SortRowLimits {
  int64_t sort = kSortRowLimit, topK = kSortRowLimit;
  int64_t of(OpCode op) const { return op == OpCode::TopK ? topK : sort; }
};

enum class KernelKind : uint8_t {
  Loop,         // elementwise and injective ops over one iteration space
  Reduction,    // a reduction (reduce, softmax, layer_norm, pooling) with fused inputs/epilogue
  Contraction,  // a library matrix product or convolution with a fused epilogue
  Attention,    // an attention kernel
  Opaque,       // sort, top_k, cumsum, scatter: one op
  Custom,       // a target's own kernel for a group of library calls (custom_fusion.h)
};
std::string_view kernelKindName(KernelKind k);  // "loop", "reduction", ...

// One producer -> consumer edge (the consumer uses a result of the producer), or for sibling
// fusion two kernels' first ops, and what the planner decided about it.
struct Decision {
  const Node* producer = nullptr;
  const Node* consumer = nullptr;
  bool fused = false;
  // fused: "loop", "input", "epilogue", "recompute", "multi-output", "sibling", or
  // "custom: NAME" (a target's custom fusion, custom_fusion.h)
  std::string how;
  std::string reason;  // why (for both outcomes)
};

struct Kernel {
  int id = 0;
  KernelKind kind = KernelKind::Loop;
  // The op that defines the kernel's structure (the reduction, contraction or attention); for a
  // loop kernel, its last op.
  const Node* anchor = nullptr;
  std::vector<const Node*> nodes;     // in program order
  std::vector<const Value*> inputs;   // read from memory: parameters, constants, other kernels
  std::vector<const Value*> outputs;  // stored: used by another kernel or a function output
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;
  double flops = 0;
  // A library call's kernel (contraction, attention, opaque): the head of its epilogue the
  // library applies, decided by the target's EpiloguePolicy (epilogue.h).
  PostOpChain postOps;
  // A custom kernel (KernelKind::Custom): the custom fusion that formed it, why, and its steps
  // (library calls, in order, each with its post-op chain). The values one step passes to the
  // next are internal: computed and read inside the kernel, never stored.
  std::string custom;
  std::string customReason;
  std::vector<CustomStep> steps;
  std::vector<const Value*> internal;
};

struct FusionOptions {
  // false: one kernel per op (what fusion is measured against; also for debugging a backend).
  bool fuse = true;
  // Inputs smaller than this are not worth a sibling fusion.
  int64_t minSiblingBytes = 1024;
  // What the target's library calls apply as they write their results.
  EpiloguePolicy epilogue;
  // The target's custom fusions (custom_fusion.h), tried in order over the planned kernels.
  std::vector<CustomFusion> custom;
  // Concatenates written in place by their producers where the target's code can store strided
  // slices (concat_views.h); else every concatenate is computed by a kernel.
  bool concatViews = false;
  // A reduce's other outputs of its input's shape are stored from the loops that reduce (which
  // visit each element once) instead of a nest of their own that computes them again; the
  // CPU's choice (the GPU maps a reduction's loops to threads per output instead).
  bool storesAlongsideReductions = false;
  // Sort and top_k rows up to these lengths rank each element in loops; longer rows stay a
  // library call (the CPU's sort).
  SortRowLimits sortRows;
  // The largest function (in nodes) the planner keeps a reachability map for (reachability.h);
  // larger ones walk the graph for each convexity check, which decides the same.
  size_t reachabilityMaxNodes = 16384;
};

struct FusionPlan {
  std::vector<Kernel> kernels;      // in an order that respects their dependencies
  std::vector<Decision> decisions;  // every edge between compute ops, fused or not
  int64_t bytesUnfused = 0;         // memory traffic with one kernel per op, for comparison
  bool symbolic = false;            // some dimension was symbolic (counted as 1)
  // The kernels each compute node belongs to (more than one when recomputed).
  std::map<const Node*, std::vector<int>> kernelsOf;
  // Concatenates in place (no kernel) and the values stored as slices of their buffers.
  ConcatViews concats;
  bool storesAlongsideReductions = false;  // FusionOptions::storesAlongsideReductions
  SortRowLimits sortRows;                  // FusionOptions::sortRows
};

FusionPlan planFusion(const Function& f, const FusionOptions& options = {});

// `b` bytes as `kiln explain` prints them ("1.5 MiB").
std::string bytesText(int64_t b);

// The plan as text, the body of `kiln explain`: a summary line, each kernel with its ops, bytes
// and flops, and every producer -> consumer edge left unfused with its reason.
std::string explainPlan(const Function& f, const FusionPlan& plan);

}  // namespace kiln::fusion
