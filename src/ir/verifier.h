// Structural and type checks of graph IR.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Checks one node: operand count, attributes against the op's schema, and that its result types
// are those its type rule gives. Errors carry the node's location.
Status verifyNode(const Node& n);

// Checks every node, that operands are defined before use in the same function, that use lists
// agree with operands, that parameters are numbered in order, and that outputs exist.
Status verify(const Function& f);
Status verify(const Module& m);

}  // namespace kiln
