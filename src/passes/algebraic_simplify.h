// algebraic-simplify: local rewrites that always pay (identities, inverse pairs, merged copies).
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Rewrites nodes by the rules of simplify_rules_arith.cpp and simplify_rules_movement.cpp (one
// formula per rule, e.g. `add(x, 0) -> x`, `transpose(transpose(x, p), q) -> transpose(x, p.q)`)
// until none applies, in every function. Returns whether anything changed.
//
// Needs: a verified module. Constants are recognised as `constant` nodes; a splat is a constant
// whose elements are all equal, seen through broadcast_in_dim and reshape.
// Leaves true: the module verifies; replaced values keep their users and, where the replacement
// has no name, their name. Nodes left unused by a rewrite are erased.
// Float policy: rules hold for every input including NaN and infinities, except that the sign of
// a zero result may change (x + 0 -> x). Hence x * 0 -> 0 and x - x -> 0 only for integers, and
// x / c -> x * (1/c) only when c is a power of two (exact); other divisions stay divisions.
// Does not: fold constants (constant-fold), merge duplicates (cse), reassociate or distribute
// (that changes float rounding), or look across more than the node and its operands' producers.
StatusOr<bool> algebraicSimplify(Module& m);

// The formula of every rule, in table order (for documentation and tests).
std::vector<std::string> algebraicSimplifyRules();

}  // namespace kiln
