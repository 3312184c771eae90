// Internal to src/interp: the reference kernels, one entry point per op family.
#pragma once

#include <span>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"

namespace kiln::interp {

// What a kernel sees: the node (op, attributes), its operand values, and the concrete result
// types (symbolic dims already resolved from the operands by the caller).
struct EvalContext {
  const Node& node;
  std::span<const Tensor> operands;
  std::span<const TensorType> resultTypes;  // static
};

using EvalResult = StatusOr<std::vector<Tensor>>;

EvalResult evalElementwise(const EvalContext& c);   // unary, binary, ternary, convert, iota
EvalResult evalDataMovement(const EvalContext& c);  // broadcast ... grid_sample
EvalResult evalReduction(const EvalContext& c);     // reduce, argmax/argmin, reduce_window,
                                                    // cumsum, sort, top_k
EvalResult evalDynamicSize(const EvalContext& c);   // unique, non_max_suppression
EvalResult evalContraction(const EvalContext& c);   // dot_general, convolution
EvalResult evalComposite(const EvalContext& c);     // softmax ... attention
EvalResult evalStrings(const EvalContext& c);       // string_normalize
EvalResult convertStrings(const Tensor& x, const TensorType& rt);  // convert from or to strings

}  // namespace kiln::interp
