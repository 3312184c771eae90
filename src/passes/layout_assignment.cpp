// layout-assignment: (1) each convolution not in the target layout is rebuilt in it between
// transposes; (2) sweeps sink transposes toward the outputs and merge transpose pairs, and sink
// reshapes below elementwise ops of splats, until nothing moves. Sinking a transpose or reshape
// below an op needs no arithmetic change: the op runs on the data before it and its result is
// transposed or reshaped instead.
#include "passes/layout_assignment.h"

#include <algorithm>
#include <optional>

#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::builderBefore;
using rewrite::inversePermutation;
using rewrite::permuteShape;

// A layout as positions: entry l is where logical dimension l sits, logical order being
// (batch or kernel output, feature or kernel input, spatial 0, spatial 1, ...).
std::vector<int64_t> positions(int64_t a, int64_t b, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> p{a, b};
  p.insert(p.end(), spatial.begin(), spatial.end());
  return p;
}

// The permutation turning data laid out as `from` into data laid out as `to`: result position j
// holds logical dimension inverse(to)[j], found at from[...] in the source.
std::vector<int64_t> relayout(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  std::vector<int64_t> logicalAt = inversePermutation(to), p;
  for (int64_t l : logicalAt) p.push_back(from[static_cast<size_t>(l)]);
  return p;
}

std::string targetDimensionNumbers(ConvLayout layout, int64_t numSpatial) {
  if (layout == ConvLayout::ChannelsFirst) return defaultConvDimensionNumbers(numSpatial);
  std::string sp;
  for (int64_t i = 0; i < numSpatial; ++i) sp += static_cast<char>('0' + i);
  if (layout == ConvLayout::ChannelsLastOhwi) return "b" + sp + "f_o" + sp + "i->b" + sp + "f";
  return "b" + sp + "f_" + sp + "io->b" + sp + "f";
}

Value* transposeUnlessIdentity(Builder& b, Value* v, const std::vector<int64_t>& p) {
  return rewrite::isIdentityPermutation(p) ? v : b.transpose(v, p);
}

// Rebuilds convolution `n` in `layout`; returns whether it changed.
bool convertConvolution(Node* n, ConvLayout layout) {
  const TensorType& x = n->operand(0)->type();
  // Dimension numbers are written with one digit per spatial dimension.
  if (x.rank() < 3 || x.rank() > 11) return false;
  auto cur = convDimensionNumbers(n->attrs(), x.rank());
  std::string want = targetDimensionNumbers(layout, x.rank() - 2);
  auto tgt = parseConvDimensionNumbers(want);
  if (!cur || !tgt) return false;
  auto curIn = positions(cur->inputBatch, cur->inputFeature, cur->inputSpatial);
  auto curK = positions(cur->kernelOutput, cur->kernelInput, cur->kernelSpatial);
  auto curOut = positions(cur->outputBatch, cur->outputFeature, cur->outputSpatial);
  auto tgtIn = positions(tgt->inputBatch, tgt->inputFeature, tgt->inputSpatial);
  auto tgtK = positions(tgt->kernelOutput, tgt->kernelInput, tgt->kernelSpatial);
  auto tgtOut = positions(tgt->outputBatch, tgt->outputFeature, tgt->outputSpatial);
  if (curIn == tgtIn && curK == tgtK && curOut == tgtOut) return false;

  Builder b = builderBefore(n);
  Value* input = transposeUnlessIdentity(b, n->operand(0), relayout(curIn, tgtIn));
  Value* kernel = transposeUnlessIdentity(b, n->operand(1), relayout(curK, tgtK));
  AttrMap attrs = n->attrs();
  attrs["dimension_numbers"] = stringAttr(want);
  const TensorType& y = n->result()->type();
  TensorType declared = y.withDims(permuteShape(y.dims(), relayout(curOut, tgtOut)));
  Value* conv = b.op(OpCode::Convolution, {input, kernel}, std::move(attrs), {declared});
  Value* out = conv ? transposeUnlessIdentity(b, conv, relayout(tgtOut, curOut)) : nullptr;
  KILN_CHECK(out, "relaying out " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

const std::vector<int64_t>* transposeOf(const Value* v, std::vector<int64_t>& storage) {
  if (v->def()->op() != OpCode::Transpose) return nullptr;
  storage = v->def()->attrInts("permutation");
  return &storage;
}

// True when `n` is the only user of v (and v is not returned).
bool onlyUser(const Value* v, const Node* n) {
  if (v->isFunctionOutput()) return false;
  for (const Use& u : v->uses())
    if (u.user != n) return false;
  return true;
}

// Elementwise ops, and gelu: a composite, but of elementwise ops (a layout means nothing to it).
bool isElementwise(const Node* n) {
  OpClass c = n->info().opClass;
  return c == OpClass::ElementwiseUnary || c == OpClass::ElementwiseBinary ||
         c == OpClass::ElementwiseTernary || n->op() == OpCode::Gelu;
}

bool isNearestResize(const Node* n) {
  return n->op() == OpCode::Resize && n->attrEnum("mode") == "nearest";
}

// Whether `w` is transposed by `perm`, or will be once transposes sink through the elementwise ops,
// poolings, normalizations and nearest resizes that compute it (sigmoid(transpose(x)) in SiLU's
// x * sigmoid(x)), looking `depth` ops up.
bool transposedAlike(const Value* w, const std::vector<int64_t>& perm, int depth) {
  std::vector<int64_t> p;
  if (transposeOf(w, p)) return p == perm;
  const Node* d = w->def();
  if (depth == 0) return false;
  if (d->op() == OpCode::ReduceWindow || d->op() == OpCode::BatchNormInference ||
      isNearestResize(d))
    return transposedAlike(d->operand(0), perm, depth - 1);
  if (!isElementwise(d) || d->numResults() != 1) return false;
  bool any = false;
  for (const Value* x : d->operands()) {
    if (x->type().rank() == 0 || rewrite::isConstantLike(x) ||
        x->def()->op() == OpCode::BroadcastInDim)
      continue;
    if (!transposedAlike(x, perm, depth - 1)) return false;
    any = true;
  }
  return any;
}

// Whether `u`, reading a transpose by `perm`, takes it below itself without transposing any other
// operand: a transpose (the pair merges), a reduce, reduce_window, nearest resize or
// batch_norm_inference (whose per-channel operands follow the feature index), a concatenate of
// operands all transposed alike, or an elementwise op whose other operands are transposed alike,
// scalars, broadcasts or constants.
bool absorbs(const Node* u, const std::vector<int64_t>& perm) {
  constexpr int kDepth = 4;
  switch (u->op()) {
    case OpCode::Transpose:
    case OpCode::Reduce:
    case OpCode::ReduceWindow:
    case OpCode::BatchNormInference: return true;
    case OpCode::Resize: return isNearestResize(u);
    case OpCode::Concatenate:
      for (const Value* w : u->operands())
        if (!transposedAlike(w, perm, kDepth)) return false;
      return true;
    default: break;
  }
  if (!isElementwise(u) || u->numResults() != 1) return false;
  for (const Value* w : u->operands()) {
    if (w->type().rank() == 0 || rewrite::isConstantLike(w) ||
        w->def()->op() == OpCode::BroadcastInDim)
      continue;
    if (!transposedAlike(w, perm, kDepth)) return false;
  }
  return true;
}

// Whether sinking the transpose `v` (by `perm`) below `n` frees it once every user has done the
// same: `n` is its only user, or every user absorbs it. SiLU's x * sigmoid(x) and hard-swish read
// x twice, and SPP's pyramid reads its input from three poolings and a concatenate; counting only
// sole users left their transposes in the middle of the graph.
bool freedBySinking(const Value* v, const Node* n, const std::vector<int64_t>& perm) {
  if (onlyUser(v, n)) return true;
  if (v->isFunctionOutput()) return false;
  for (const Use& u : v->uses())
    if (!absorbs(u.user, perm)) return false;
  return true;
}

// The permutation shared by the transposed operands of an elementwise op, if the sinking pays:
// the transposes it frees (freedBySinking) at least match the ones it adds (one
// for the result, one per operand that is neither transposed alike, a scalar, a broadcast nor a
// constant).
std::optional<std::vector<int64_t>> sinkablePermutation(const Node* n) {
  std::optional<std::vector<int64_t>> perm;
  std::vector<const Value*> freed;
  int added = 1;
  std::vector<int64_t> p;
  for (const Value* v : n->operands()) {
    if (v->type().rank() == 0) continue;
    if (transposeOf(v, p) && (!perm || *perm == p)) {
      perm = p;
      if (freedBySinking(v, n, p) && std::find(freed.begin(), freed.end(), v) == freed.end())
        freed.push_back(v);
      continue;
    }
    if (!rewrite::isConstantLike(v) && v->def()->op() != OpCode::BroadcastInDim) ++added;
  }
  if (!perm || rewrite::isIdentityPermutation(*perm) || static_cast<int>(freed.size()) < added)
    return std::nullopt;
  return perm;
}

// The operand of the sunk op standing for `v`, which the op saw transposed by `perm`.
Value* untransposed(Builder& b, Value* v, const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv = inversePermutation(perm), p;
  if (v->type().rank() == 0) return v;
  if (transposeOf(v, p) && p == perm) return v->def()->operand(0);
  if (v->def()->op() == OpCode::BroadcastInDim) {
    // broadcast_in_dim(x, d) transposed by perm^-1 is broadcast_in_dim(x, perm.d).
    std::vector<int64_t> dims;
    for (int64_t d : v->def()->attrInts("dims")) dims.push_back(perm[static_cast<size_t>(d)]);
    return b.broadcastInDim(v->def()->operand(0), permuteShape(v->type().dims(), inv), dims);
  }
  return b.transpose(v, inv);
}

// A per-dim list of an op reading transpose(a, perm), entry i of the transposed dim i, as a list
// over a's dims.
template <typename T>
std::vector<T> toSourceDims(const std::vector<T>& list, const std::vector<int64_t>& perm) {
  std::vector<T> moved(list.size());
  for (size_t i = 0; i < perm.size(); ++i) moved[static_cast<size_t>(perm[i])] = list[i];
  return moved;
}

// Replaces `n` (which read a transpose by `perm`) by the same op over `operands` with `attrs`,
// its result in a's dims, then transposed by `perm`.
bool rebuildBelowTranspose(Node* n, const std::vector<Value*>& operands, AttrMap attrs,
                           const std::vector<int64_t>& perm) {
  const TensorType& y = n->result()->type();
  TensorType declared = y.withDims(permuteShape(y.dims(), inversePermutation(perm)));
  Builder b = builderBefore(n);
  Value* inner = b.op(n->op(), operands, std::move(attrs), {declared});
  Value* out = inner ? b.transpose(inner, perm) : nullptr;
  KILN_CHECK(out, "sinking a transpose below " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

// op(transpose(a, p), ...) -> transpose(op(a, ...), p)
bool sinkThroughElementwise(Node* n) {
  if (!isElementwise(n) || n->numResults() != 1) return false;
  auto perm = sinkablePermutation(n);
  if (!perm) return false;
  Builder b = builderBefore(n);
  std::vector<Value*> operands;
  for (Value* v : n->operands()) operands.push_back(untransposed(b, v, *perm));
  return rebuildBelowTranspose(n, operands, n->attrs(), *perm);
}

// reduce(transpose(a, p), dims) -> transpose(reduce(a, p(dims)), q), q the order the kept
// dimensions had (often the identity, e.g. global pooling of NHWC data into [N, C]). Also when
// the transpose stays for other users, if the reduce at least halves the elements: the
// transpose it adds moves at most half of what the reduce reads, and the reduce reads a in its
// own order (strided_reduce's mean, max and sum over H or W of NHWC data read each element
// from another cache line through the transpose).
bool sinkThroughReduce(Node* n) {
  std::vector<int64_t> perm;
  Value* t = n->operand(0);
  if (!transposeOf(t, perm)) return false;
  const std::optional<int64_t> inCount = t->type().numElements(),
                               outCount = n->result()->type().numElements();
  const bool halves = inCount && outCount && 2 * *outCount <= *inCount;
  if (!freedBySinking(t, n, perm) && !halves) return false;
  std::vector<int64_t> dims = n->attrInts("dims"), newDims, keptSources, kept;
  for (int64_t d : dims) newDims.push_back(perm[static_cast<size_t>(d)]);
  std::sort(newDims.begin(), newDims.end());
  for (int64_t i = 0; i < static_cast<int64_t>(perm.size()); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) keptSources.push_back(perm[i]);
  kept = keptSources;
  std::sort(kept.begin(), kept.end());
  std::vector<int64_t> q;
  for (int64_t s : keptSources) q.push_back(std::find(kept.begin(), kept.end(), s) - kept.begin());
  Builder b = builderBefore(n);
  AttrMap attrs = n->attrs();
  attrs["dims"] = intsAttr(newDims);
  Value* inner = b.op(OpCode::Reduce, {t->def()->operand(0)}, std::move(attrs));
  Value* out = inner ? transposeUnlessIdentity(b, inner, q) : nullptr;
  KILN_CHECK(out, "sinking a transpose below " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

// reduce_window(transpose(a, p)) -> transpose(reduce_window(a) with per-dim attributes moved
// to a's dimensions, p)
bool sinkThroughReduceWindow(Node* n) {
  std::vector<int64_t> perm;
  Value* t = n->operand(0);
  if (!transposeOf(t, perm) || !freedBySinking(t, n, perm)) return false;
  AttrMap attrs = n->attrs();
  for (const char* name : {"window_dimensions", "window_strides", "base_dilations",
                           "window_dilations", "padding_low", "padding_high"}) {
    if (!hasAttr(attrs, name)) continue;
    std::vector<int64_t> old = n->attrInts(name);
    if (old.size() != perm.size()) return false;
    attrs[name] = intsAttr(toSourceDims(old, perm));
  }
  return rebuildBelowTranspose(n, {t->def()->operand(0)}, std::move(attrs), perm);
}

// resize(transpose(a, p)) -> transpose(resize(a) with its scales moved to a's dimensions, p),
// for a nearest resize: each element copies one input element, so the result is the same bit
// for bit (a linear or cubic resize would sum its taps over the dims in another order). The FPN's
// top-down path: each level's sum with the level above, repeated twice, in NHWC.
bool sinkThroughResize(Node* n) {
  std::vector<int64_t> perm;
  Value* t = n->operand(0);
  if (!isNearestResize(n) || !transposeOf(t, perm) || !freedBySinking(t, n, perm)) return false;
  AttrMap attrs = n->attrs();
  if (hasAttr(attrs, "scales")) {
    std::vector<double> old = getFloats(attrs, "scales");
    if (old.size() != perm.size()) return false;
    attrs["scales"] = floatsAttr(toSourceDims(old, perm));
  }
  return rebuildBelowTranspose(n, {t->def()->operand(0)}, std::move(attrs), perm);
}

// batch_norm_inference(transpose(a, p), scale, offset, mean, variance) {feature_index = f}
//   -> transpose(batch_norm_inference(a, scale, ...) {feature_index = p[f]}, p)
// (DenseNet's pre-activation after each concatenate: a normalization fold-batch-norm cannot fold.)
bool sinkThroughBatchNorm(Node* n) {
  std::vector<int64_t> perm;
  Value* t = n->operand(0);
  if (!transposeOf(t, perm) || !freedBySinking(t, n, perm)) return false;
  std::vector<Value*> operands = {t->def()->operand(0)};
  for (size_t i = 1; i < n->numOperands(); ++i) operands.push_back(n->operand(i));
  AttrMap attrs = n->attrs();
  attrs["feature_index"] = intAttr(perm[static_cast<size_t>(n->attrInt("feature_index"))]);
  return rebuildBelowTranspose(n, operands, std::move(attrs), perm);
}

// concatenate(transpose(a, p), transpose(b, p), ..., d) -> transpose(concatenate(a, b, ..., p[d]),
// p) when sinking frees at least one of the operands' transposes.
bool sinkThroughConcatenate(Node* n) {
  std::vector<int64_t> perm, p;
  for (const Value* v : n->operands()) {
    if (!transposeOf(v, p) || (!perm.empty() && p != perm)) return false;
    perm = p;
  }
  if (perm.empty() || rewrite::isIdentityPermutation(perm)) return false;
  bool freesOne = false;
  for (const Value* v : n->operands()) freesOne = freesOne || freedBySinking(v, n, perm);
  if (!freesOne) return false;
  std::vector<Value*> operands;
  for (Value* v : n->operands()) operands.push_back(v->def()->operand(0));
  AttrMap attrs = n->attrs();
  attrs["dimension"] = intAttr(perm[static_cast<size_t>(n->attrInt("dimension"))]);
  const TensorType& y = n->result()->type();
  TensorType declared = y.withDims(permuteShape(y.dims(), inversePermutation(perm)));
  Builder b = builderBefore(n);
  Value* inner = b.op(OpCode::Concatenate, operands, std::move(attrs), {declared});
  Value* out = inner ? b.transpose(inner, perm) : nullptr;
  KILN_CHECK(out, "sinking a transpose below " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

// transpose(transpose(x, p), q) -> transpose(x, p.q), or x for an inverse pair;
// transpose(x, identity) -> x.
bool mergeTransposes(Node* n) {
  std::vector<int64_t> inner, outer = n->attrInts("permutation");
  Value* x = n->operand(0);
  std::vector<int64_t> q = outer;
  if (transposeOf(x, inner)) {
    q = rewrite::composePermutations(inner, outer);
    x = x->def()->operand(0);
  } else if (!rewrite::isIdentityPermutation(outer)) {
    return false;
  }
  Builder b = builderBefore(n);
  Value* out = transposeUnlessIdentity(b, x, q);
  KILN_CHECK(out, "merging transposes at " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

// A splat: a rank-0 value or a broadcast_in_dim of one (it has any shape).
bool isSplat(const Value* v) {
  return v->type().rank() == 0 ||
         (v->def()->op() == OpCode::BroadcastInDim && v->def()->operand(0)->type().rank() == 0);
}

// op(reshape(a), splats...) -> reshape(op(a, splats...)) when the op is the reshape's only user:
// the op then has a's shape and becomes an epilogue of a's producer (a global average pool's
// division by the window after its reduce and the reshape to [N, C, 1, 1]).
bool sinkReshapeThroughElementwise(Node* n) {
  if (!isElementwise(n) || n->numResults() != 1) return false;
  const Value* reshaped = nullptr;
  for (const Value* v : n->operands()) {
    if (v->def()->op() == OpCode::Reshape && !reshaped && onlyUser(v, n)) reshaped = v;
    else if (!isSplat(v)) return false;
  }
  if (!reshaped || !reshaped->type().isStatic()) return false;
  const Value* a = reshaped->def()->operand(0);
  Builder b = builderBefore(n);
  std::vector<Value*> operands;
  for (Value* v : n->operands()) {
    if (v == reshaped) {
      operands.push_back(v->def()->operand(0));
      continue;
    }
    Value* scalar = v->type().rank() == 0 ? v : v->def()->operand(0);
    operands.push_back(a->type().rank() == 0 ? scalar
                                             : b.broadcastInDim(scalar, a->type().dims(), {}));
  }
  Value* inner =
      b.op(n->op(), operands, n->attrs(), {n->result()->type().withDims(a->type().dims())});
  Value* out = inner ? b.reshape(inner, n->result()->type().dims()) : nullptr;
  KILN_CHECK(out, "sinking a reshape below " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(n->result(), out);
  rewrite::eraseIfDead(n);
  return true;
}

bool moveTransposes(Node* n) {
  switch (n->op()) {
    case OpCode::Transpose: return mergeTransposes(n);
    case OpCode::Reduce: return sinkThroughReduce(n);
    case OpCode::ReduceWindow: return sinkThroughReduceWindow(n);
    case OpCode::Concatenate: return sinkThroughConcatenate(n);
    case OpCode::BatchNormInference: return sinkThroughBatchNorm(n);
    case OpCode::Resize: return sinkThroughResize(n);
    default: return sinkThroughElementwise(n) || sinkReshapeThroughElementwise(n);
  }
}

bool assignInFunction(Function& f, const LayoutTarget& target) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& n : f.nodes()) order.push_back(n.get());
  if (target.convolution != ConvLayout::Keep)
    for (Node* n : order)
      if (n->op() == OpCode::Convolution)
        changed = convertConvolution(n, target.convolution) || changed;
  // Every sink moves a transpose below one more op, and merges only remove transposes, so the
  // sweeps end; the bound guards against a rule cycle, which would be a bug.
  constexpr int kMaxSweeps = 256;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    order.clear();
    for (const auto& n : f.nodes()) order.push_back(n.get());
    bool moved = false;
    // Rewriting `n` erases only `n` and producers before it, so later entries stay valid.
    for (Node* n : order) moved = moveTransposes(n) || moved;
    if (!moved) break;
    changed = true;
  }
  return changed;
}

}  // namespace

StatusOr<LayoutTarget> parseLayoutTarget(std::string_view text) {
  if (text == "nhwc") return LayoutTarget{ConvLayout::ChannelsLast};
  if (text == "nhwc-ohwi") return LayoutTarget{ConvLayout::ChannelsLastOhwi};
  if (text == "nchw") return LayoutTarget{ConvLayout::ChannelsFirst};
  if (text == "keep") return LayoutTarget{ConvLayout::Keep};
  return Status::error("unknown layout target '" + std::string(text) +
                       "' (expected nhwc, nhwc-ohwi, nchw or keep)");
}

StatusOr<bool> assignLayout(Module& m, const LayoutTarget& target) {
  bool changed = false;
  for (const auto& f : m.functions()) changed = assignInFunction(*f, target) || changed;
  return changed;
}

StatusOr<bool> assignLayoutForCpu(Module& m) { return assignLayout(m, LayoutTarget::cpu()); }

std::unique_ptr<Pass> makeLayoutAssignmentPass(LayoutTarget target) {
  return makePass(
      "layout-assignment",
      "put convolutions in the target's layout and sink the transposes to the graph's edges",
      [target](Module& m) { return assignLayout(m, target); });
}

}  // namespace kiln
