// constant-fold: evaluates nodes whose operands are all constants.
#pragma once

#include <cstdint>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// When a node may be folded. The rule: every operand is a `constant`, every result type is
// static, and the results together have
//   - at most maxResultElements elements (the compile-time and memory bound), and
//   - no more elements than the operands together, or at most smallResultElements.
// The second condition stops growth: broadcast_in_dim of a scalar into a large tensor, or a large
// iota, stays an op (a few bytes) instead of becoming megabytes of constant data, while the
// shape arithmetic of exporters (Shape/Gather/Concat into Reshape) and size-preserving weight
// rewrites (transpose or convert of a weight, batch-norm scaling) do fold. broadcast_in_dim never
// folds when it adds elements, small or not: a broadcast scalar is the form backends want.
struct ConstantFoldOptions {
  int64_t maxResultElements = int64_t(1) << 24;
  int64_t smallResultElements = 1024;
  // dot_general and convolution are folded only when their multiply-adds are at most this many,
  // so a constant matmul of two big weights does not stall compilation.
  int64_t maxContractionWork = int64_t(1) << 26;
};

// Replaces every foldable node of every function by `constant` nodes holding its results, computed
// with the reference kernels (evaluateNode), so folding is exact by construction. Returns whether
// anything was folded.
//
// Needs: a verified module.
// Leaves true: the module verifies; a folded value keeps its name; folded nodes are erased, and
// constants left unused by folding are erased too (the rest is dce's).
// Does not: fold `parameter`s or anything depending on one; fold past the size rule above;
// report evaluation errors (a node the reference kernel rejects is left alone, so the error
// appears when the program runs, where it belongs); merge equal constants (cse).
StatusOr<bool> constantFold(Module& m, const ConstantFoldOptions& options);
// With the default options.
StatusOr<bool> constantFold(Module& m);

}  // namespace kiln
