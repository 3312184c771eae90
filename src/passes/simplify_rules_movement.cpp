// algebraic-simplify rules for data movement and reductions. All of them are exact: they only
// remove copies that do nothing or merge two copies into one.
#include <algorithm>

#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"

namespace kiln::simplify {
namespace {

using rewrite::builderBefore;

Value* operand(Node& n) { return n.operand(0); }
const TensorType& resultType(Node& n) { return n.result()->type(); }
bool isOp(const Value* v, OpCode op) { return v->def()->op() == op; }

// transpose(x, identity) -> x
Value* transposeIdentity(Node& n) {
  return rewrite::isIdentityPermutation(n.attrInts("permutation")) ? operand(n) : nullptr;
}

// transpose(transpose(x, p), q) -> transpose(x, p.q), or x when p.q is the identity
Value* transposeTranspose(Node& n) {
  Value* inner = operand(n);
  if (!isOp(inner, OpCode::Transpose)) return nullptr;
  std::vector<int64_t> q = rewrite::composePermutations(inner->def()->attrInts("permutation"),
                                                        n.attrInts("permutation"));
  Value* x = inner->def()->operand(0);
  if (rewrite::isIdentityPermutation(q)) return x;
  Builder b = builderBefore(&n);
  return b.transpose(x, q);
}

// transpose(broadcast_in_dim(x, d), p) -> broadcast_in_dim(x, p^-1 . d) when the new dims stay in
// increasing order (the broadcast then moves no data of x, so the transpose disappears)
Value* transposeBroadcast(Node& n) {
  Value* bc = operand(n);
  if (!isOp(bc, OpCode::BroadcastInDim)) return nullptr;
  std::vector<int64_t> inv = rewrite::inversePermutation(n.attrInts("permutation"));
  std::vector<int64_t> dims;
  for (int64_t d : bc->def()->attrInts("dims")) dims.push_back(inv[static_cast<size_t>(d)]);
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] <= dims[i - 1]) return nullptr;
  Builder b = builderBefore(&n);
  return b.broadcastInDim(bc->def()->operand(0), resultType(n).dims(), dims);
}

// Whether every path from v's uses through slices and reshapes reaches a transpose (and v is
// not returned): each element of v is then copied by a transpose anyway, so permuting v's dims
// too costs no copy of its own.
bool meetsTransposes(const Value* v) {
  if (v->isFunctionOutput() || v->uses().empty()) return false;
  for (const Use& u : v->uses()) {
    const Node& user = *u.user;
    if (user.op() == OpCode::Transpose) continue;
    if (user.op() != OpCode::Slice && user.op() != OpCode::Reshape) return false;
    if (!meetsTransposes(user.result())) return false;
  }
  return true;
}

// dot_general(transpose(x, p), y) -> transpose(dot_general(x, y), q) when the transpose has no
// other use and every path from the product meets a transpose: the operand's copy merges into
// the one the result gets anyway (attention's projection of a sequence-first input, whose heads
// are split by a transpose: one copy of the activations a layer fewer).
Value* dotOfTranspose(Node& n) {
  Value* t = n.operand(0);
  if (!isOp(t, OpCode::Transpose) || t->uses().size() != 1 || t->isFunctionOutput() ||
      !meetsTransposes(n.result()))
    return nullptr;
  const std::vector<int64_t> p = t->def()->attrInts("permutation");
  auto through = [&](const char* attr) {
    std::vector<int64_t> dims = n.attrInts(attr);
    for (int64_t& d : dims) d = p[static_cast<size_t>(d)];
    return dims;
  };
  DotDims d{through("lhs_batch"), n.attrInts("rhs_batch"), through("lhs_contracting"),
            n.attrInts("rhs_contracting")};
  // The lhs free dims as x's dims, in the old result's order; the new result has them sorted.
  const std::vector<int64_t> batch = n.attrInts("lhs_batch"), sum = n.attrInts("lhs_contracting");
  std::vector<int64_t> free;
  for (size_t i = 0; i < p.size(); ++i) {
    const auto dim = static_cast<int64_t>(i);
    if (std::count(batch.begin(), batch.end(), dim) + std::count(sum.begin(), sum.end(), dim) == 0)
      free.push_back(p[i]);
  }
  std::vector<int64_t> sorted = free;
  std::sort(sorted.begin(), sorted.end());
  const int64_t nb = static_cast<int64_t>(batch.size());
  std::vector<int64_t> q(static_cast<size_t>(resultType(n).rank()));
  for (size_t j = 0; j < q.size(); ++j) q[j] = static_cast<int64_t>(j);
  for (size_t k = 0; k < free.size(); ++k)
    q[size_t(nb) + k] =
        nb + (std::lower_bound(sorted.begin(), sorted.end(), free[k]) - sorted.begin());
  Builder b = builderBefore(&n);
  Value* product = b.dotGeneral(t->def()->operand(0), n.operand(1), d);
  return product ? b.transpose(product, q) : nullptr;
}

// reshape(x) -> x when the result type is x's type
Value* reshapeSame(Node& n) { return operand(n)->type() == resultType(n) ? operand(n) : nullptr; }

// reshape(reshape(x)) -> reshape(x), or x when the outer type is x's type
Value* reshapeReshape(Node& n) {
  Value* inner = operand(n);
  if (!isOp(inner, OpCode::Reshape)) return nullptr;
  Value* x = inner->def()->operand(0);
  if (x->type() == resultType(n)) return x;
  Builder b = builderBefore(&n);
  return b.reshape(x, resultType(n).dims());
}

// reshape(broadcast_in_dim(s)) -> broadcast_in_dim(s) for a rank-0 s (a splat has any shape)
Value* reshapeScalarBroadcast(Node& n) {
  Value* bc = operand(n);
  if (!isOp(bc, OpCode::BroadcastInDim) || bc->def()->operand(0)->type().rank() != 0)
    return nullptr;
  Builder b = builderBefore(&n);
  return b.broadcastInDim(bc->def()->operand(0), resultType(n).dims(), {});
}

// broadcast_in_dim(x, [0, 1, ..., r-1]) -> x when the result type is x's type
Value* broadcastSame(Node& n) {
  if (operand(n)->type() != resultType(n)) return nullptr;
  return rewrite::isIdentityPermutation(n.attrInts("dims")) ? operand(n) : nullptr;
}

// broadcast_in_dim(broadcast_in_dim(x, d1), d2) -> broadcast_in_dim(x, d2 . d1)
Value* broadcastBroadcast(Node& n) {
  Value* inner = operand(n);
  if (!isOp(inner, OpCode::BroadcastInDim)) return nullptr;
  std::vector<int64_t> outer = n.attrInts("dims"), dims;
  for (int64_t d : inner->def()->attrInts("dims")) dims.push_back(outer[static_cast<size_t>(d)]);
  Builder b = builderBefore(&n);
  return b.broadcastInDim(inner->def()->operand(0), resultType(n).dims(), dims);
}

// slice(x) -> x when it keeps everything (start 0, stride 1, limit = extent)
Value* sliceAll(Node& n) { return operand(n)->type() == resultType(n) ? operand(n) : nullptr; }

// pad(x, v) -> x when low, high and interior are all 0
Value* padNothing(Node& n) {
  for (const char* a : {"low", "high", "interior"})
    for (int64_t e : n.attrInts(a))
      if (e != 0) return nullptr;
  return operand(n);
}

// concatenate(x) -> x
Value* concatenateOne(Node& n) { return n.numOperands() == 1 ? operand(n) : nullptr; }

// reverse(x, dims) -> x when every reversed dimension has extent <= 1
Value* reverseNothing(Node& n) {
  for (int64_t d : n.attrInts("dims")) {
    const Dim& e = operand(n)->type().dim(static_cast<size_t>(d));
    if (!e.isStatic() || e.value() > 1) return nullptr;
  }
  return operand(n);
}

// reduce(x, dims = []) -> x
Value* reduceNothing(Node& n) {
  return n.attrInts("dims").empty() && operand(n)->type() == resultType(n) ? operand(n) : nullptr;
}

// dynamic_slice(x, s...) -> x when the sizes are x's extents (every start clamps to 0)
Value* dynamicSliceAll(Node& n) {
  return operand(n)->type() == resultType(n) ? operand(n) : nullptr;
}

const Rule kRules[] = {
    {OpCode::Transpose, "transpose(x, identity) -> x", transposeIdentity},
    {OpCode::Transpose, "transpose(transpose(x, p), q) -> transpose(x, p.q)", transposeTranspose},
    {OpCode::Transpose, "transpose(broadcast_in_dim(x, d), p) -> broadcast_in_dim(x, p^-1.d)",
     transposeBroadcast},
    {OpCode::DotGeneral,
     "dot_general(transpose(x, p), y) -> transpose(dot_general(x, y), q) when every path from "
     "the product meets a transpose",
     dotOfTranspose},
    {OpCode::Reshape, "reshape(x: T) -> x when the result type is T", reshapeSame},
    {OpCode::Reshape, "reshape(reshape(x)) -> reshape(x)", reshapeReshape},
    {OpCode::Reshape, "reshape(broadcast_in_dim(s: rank 0)) -> broadcast_in_dim(s)",
     reshapeScalarBroadcast},
    {OpCode::BroadcastInDim, "broadcast_in_dim(x: T, identity) -> x when the result type is T",
     broadcastSame},
    {OpCode::BroadcastInDim,
     "broadcast_in_dim(broadcast_in_dim(x, d1), d2) -> "
     "broadcast_in_dim(x, d2.d1)",
     broadcastBroadcast},
    {OpCode::Slice, "slice(x) -> x when it keeps every element", sliceAll},
    {OpCode::Pad, "pad(x, v) {low = high = interior = 0} -> x", padNothing},
    {OpCode::Concatenate, "concatenate(x) -> x", concatenateOne},
    {OpCode::Reverse, "reverse(x) -> x when the reversed extents are <= 1", reverseNothing},
    {OpCode::Reduce, "reduce(x) {dims = []} -> x", reduceNothing},
    {OpCode::DynamicSlice, "dynamic_slice(x, s...) -> x when sizes are x's extents",
     dynamicSliceAll},
};

}  // namespace

std::span<const Rule> movementRules() { return kRules; }

}  // namespace kiln::simplify
