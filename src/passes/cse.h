// cse: common subexpression elimination.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Merges nodes that compute the same thing: same op, same operands (the same values, in order),
// equal attributes and equal result types. Constants are equal when their dtype, dims and bytes
// are (so duplicate initializers of a model merge, whatever their names); floats in attributes
// compare by bits, so 0.0 and -0.0 differ and a NaN equals itself. The first node in program
// order stays and the later ones' users move to it. Returns whether anything merged.
//
// Needs: a verified module (nodes in topological order, so the kept node dominates its twins).
// Leaves true: the module verifies; no two nodes of a function are equal in the sense above;
// merged nodes are erased.
// Does not: parameters (two inputs are never the same value); commutativity (add(a, b) and
// add(b, a) stay two nodes); merge across functions; look at what ops compute (no op has side
// effects, so equal inputs give equal results).
StatusOr<bool> eliminateCommonSubexpressions(Module& m);

}  // namespace kiln
