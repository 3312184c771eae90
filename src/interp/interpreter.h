// The reference interpreter: runs graph IR on the CPU with plain loops. It is the oracle every
// pass and backend is checked against, so it favours obvious correctness over speed.
#pragma once

#include <span>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"

namespace kiln {

// Runs `f` on `inputs` (one per parameter, in order). Inputs are checked against the parameter
// types: dtype, rank, static extents, and one extent per symbol. Errors name the parameter or the
// node that failed.
StatusOr<std::vector<Tensor>> interpret(const Function& f, std::span<const Tensor> inputs);
// interpret after exposeDynamicSizes (passes/expose_dynamic_sizes.h), as the compile driver
// does: outputs of run-time size are cut to their sizes, and a consumer that would read the
// padding of one is an error naming it. Changes f (the sizes become extra outputs).
StatusOr<std::vector<Tensor>> interpretSized(Function& f, std::span<const Tensor> inputs);

// The reference kernel of one node: evaluates `n` on concrete operand values. Result dims are
// taken from the operands (and from the node's result types where those are static). Used by the
// interpreter and by constant folding.
StatusOr<std::vector<Tensor>> evaluateNode(const Node& n, std::span<const Tensor> operands);

}  // namespace kiln
