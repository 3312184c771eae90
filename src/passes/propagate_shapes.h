// propagate-shapes: resolves symbolic dimensions that the graph determines.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Unifies symbols with each other and with static extents wherever the op semantics equate them,
// then rewrites the types. The facts: what every type rule computes from its operands (so a
// result equated to an operand dimension follows it), elementwise operands and dot_general batch
// and contracting dims being equal, a reshape's element count (reshape f32[N,4] -> f32[M,2,2]
// gives M = N; f32[N,M,4] -> f32[N,8] gives M = 2), broadcast_in_dim and convert keeping extents,
// concatenation totals, and convolutions / reduce_windows whose window keeps the extent (stride 1,
// padding = window - 1: "same" padding) keeping a symbolic spatial dim. A class of symbols takes
// the name seen first (the parameters' names win). Returns whether any type changed.
//
// Needs: a verified module.
// Leaves true: the module verifies; no two symbols name a dimension the graph proves equal.
// Does not: introduce symbolic expressions (a stride-2 convolution of H gives a dimension that is
// a function of H, which stays its own symbol); change a dimension the graph does not determine.
StatusOr<bool> propagateShapes(Module& m);

}  // namespace kiln
