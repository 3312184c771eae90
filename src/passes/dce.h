// dce: dead code elimination.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Removes every node none of whose results is used by another node or returned by its function,
// in every function, including chains that become dead as their users go. Returns whether
// anything was removed.
//
// Needs: a module whose use lists are up to date (any module built through the IR API).
// Leaves true: every remaining non-parameter node has a used or returned result; node order is
// otherwise unchanged.
// Does not: remove parameters, even unused ones (that would change the function's signature);
// remove unused functions; merge duplicate nodes (that is CSE's job); look at what an op
// computes (no op has side effects, so an unused result is all it takes).
StatusOr<bool> eliminateDeadCode(Module& m);

}  // namespace kiln
