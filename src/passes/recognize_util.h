// Matching helpers for recognize-patterns (internal to src/passes): products of factors,
// reductions brought back to their operand's shape, and evaluation of constant subgraphs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::recognize {

// True when v's producer has op `op`.
bool isOp(const Value* v, OpCode op);

// A value seen as coefficient * product(factors): mul nodes are flattened, a division by a splat
// constant divides the coefficient, a splat constant multiplies it, pow(v, k) for k = 2..4
// contributes v k times. Anything else is a factor. `ok` is false when the tree is too large to
// be a pattern (more than kMaxFactors factors, or more than kMaxProductNodes nodes visited).
struct Product {
  double coefficient = 1;
  std::vector<Value*> factors;
  bool ok = true;
  int nodesVisited = 0;
};
inline constexpr size_t kMaxFactors = 16;
inline constexpr int kMaxProductNodes = 64;
Product flattenProduct(Value* v);

// True when a and b hold the same factors with the same multiplicities.
bool sameFactors(std::vector<Value*> a, std::vector<Value*> b);

// v = c * x or x * c or x / c for a splat c: returns x and sets `scale` to c (or 1/c).
Value* peelScale(Value* v, double& scale);

// A reduction seen from above: v = steps(reduce(input, dims)) brought back to input's shape
// through broadcast_in_dim and unit-dimension reshapes. The arithmetic steps (mul/div by a splat,
// add of a splat, sqrt, rsqrt) are listed from the reduce upward.
struct ReduceStep {
  OpCode op;        // Mul (constant = multiplier, divisions already inverted), Add, Sqrt, Rsqrt
  double constant;  // the splat for Mul and Add
};
struct ReduceChain {
  Node* reduce = nullptr;
  Value* input = nullptr;
  std::vector<int64_t> dims;
  std::string kind;
  std::vector<ReduceStep> steps;
};
// Matches when v's shape is the reduce input's shape and every kept dimension lands where it came
// from (a broadcast that moves dimensions is not a broadcast back). With `allowReducedShape`, v
// may also have the reduced shape or the keepdims shape (reduced dims as 1), kept dims in order.
std::optional<ReduceChain> matchReduceChain(Value* v, bool allowReducedShape = false);

// Labels say which dimension of a reduce input each dimension of a value carries (-1: a
// broadcast or unit dimension). followPlumbing replays one broadcast_in_dim or unit-dimension
// reshape on them (false: the op moves dimensions); alignedBack checks that a value of the
// input's shape has every kept dimension in place and only broadcasts in the reduced ones.
bool followPlumbing(const Node& n, std::vector<int64_t>& labels);
bool alignedBack(const std::vector<int64_t>& labels, const TensorType& input,
                 const std::vector<int64_t>& reducedDims);

// The product of the extents of `dims` in t, or nullopt when one is symbolic.
std::optional<int64_t> staticCount(const TensorType& t, const std::vector<int64_t>& dims);

// Evaluates v when it depends on no parameter (constants, iotas and ops on them) and no value
// on the way has more than maxElements elements. Used to classify masks (is it causal?).
std::optional<Tensor> evaluateConstantSubgraph(Value* v, int64_t maxElements = int64_t(1) << 22);

}  // namespace kiln::recognize
