// decompose-composites: each composite op becomes the chain of core ops that defines it
// (docs/ops.md gives the formulas). The emitters below build the chain with a Builder placed
// before the composite; the driver then moves the composite's uses to the chain and erases it.
#include "passes/decompose_composites.h"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/rewrite_util.h"
#include "passes/unroll_recurrence.h"

namespace kiln {
namespace {

// --- Shape helpers -----------------------------------------------------------------------------

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> r;
  for (int64_t i = begin; i < end; ++i) r.push_back(i);
  return r;
}

// The dims of a rank-`rank` tensor that are not in `removed` (sorted), in order.
std::vector<int64_t> keptDims(int64_t rank, const std::vector<int64_t>& removed) {
  std::vector<int64_t> kept;
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (j < removed.size() && removed[j] == i) ++j;
    else kept.push_back(i);
  }
  return kept;
}

Shape subShape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape r;
  for (int64_t d : dims) r.push_back(s[static_cast<size_t>(d)]);
  return r;
}

// --- Emitters shared by several composites (all pass nullptr through) --------------------------
// Each builder call that creates nodes is its own statement: C++ leaves the evaluation order of
// call arguments unspecified, and the printed IR must not depend on the compiler.

// A constant `v` of dtype `t` broadcast to `shape` (rank 0: the scalar itself).
Value* splat(Builder& b, DType t, double v, const Shape& shape) {
  Value* s = b.scalar(t, v);
  return shape.empty() ? s : b.broadcastInDim(s, shape, {});
}

// `reduced` (the result of reducing `removed` away) broadcast back to `full`.
Value* broadcastBack(Builder& b, Value* reduced, const Shape& full,
                     const std::vector<int64_t>& removed) {
  return b.broadcastInDim(reduced, full, keptDims(static_cast<int64_t>(full.size()), removed));
}

// The dtype the arithmetic runs in: f16/bf16 widen to f32 (as the reference kernels accumulate),
// f32 and f64 stay.
DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

Value* widen(Builder& b, Value* x) {
  if (!x) return nullptr;
  DType t = computeType(x->type().dtype());
  return t == x->type().dtype() ? x : b.convert(x, t);
}

Value* narrow(Builder& b, Value* x, DType t) {
  if (!x) return nullptr;
  return x->type().dtype() == t ? x : b.convert(x, t);
}

// The number of elements of `x` in `dims`, as dtype `t`, shaped like the reduction of `dims`.
// A static count is a constant; a symbolic one is summed from ones, so it is known at run time.
Value* elementCount(Builder& b, Value* x, const std::vector<int64_t>& dims, DType t) {
  if (!x) return nullptr;
  const Shape& shape = x->type().dims();
  Shape reducedShape = subShape(shape, keptDims(x->type().rank(), dims));
  bool isStatic = true;
  double n = 1;
  for (int64_t d : dims) {
    const Dim& e = shape[static_cast<size_t>(d)];
    isStatic = isStatic && e.isStatic();
    if (e.isStatic()) n *= static_cast<double>(e.value());
  }
  if (isStatic) return splat(b, t, n, reducedShape);
  return b.reduce(splat(b, t, 1.0, shape), dims, "sum");
}

// softmax(x) = exp(x - max) / sum(exp(x - max)); log_softmax(x) = x - max - log(sum(exp(x - max))).
Value* emitSoftmax(Builder& b, Value* x, int64_t axis, bool log) {
  if (!x) return nullptr;
  const Shape shape = x->type().dims();
  Value* max = b.reduce(x, {axis}, "max");
  Value* shifted = b.sub(x, broadcastBack(b, max, shape, {axis}));
  Value* e = b.unary(OpCode::Exp, shifted);
  Value* sum = b.reduce(e, {axis}, "sum");
  if (log) return b.sub(shifted, broadcastBack(b, b.unary(OpCode::Log, sum), shape, {axis}));
  return b.div(e, broadcastBack(b, sum, shape, {axis}));
}

// --- One emitter per composite: returns the replacement of the node's result -------------------

Value* decomposeSoftmax(Builder& b, const Node& n, bool log) {
  Value* x = n.operand(0);
  DType t = x->type().dtype();
  return narrow(b, emitSoftmax(b, widen(b, x), n.attrInt("axis"), log), t);
}

// (x - mean) / sqrt(var + eps) * scale + bias over dims [axis, rank); var is biased.
Value* decomposeLayerNorm(Builder& b, const Node& n) {
  DType t = n.operand(0)->type().dtype();
  DType c = computeType(t);
  Value* x = widen(b, n.operand(0));
  if (!x) return nullptr;
  const Shape shape = x->type().dims();
  int64_t axis = n.attrInt("axis");
  std::vector<int64_t> dims = range(axis, x->type().rank());
  Shape outer = subShape(shape, range(0, axis));
  Value* count = elementCount(b, x, dims, c);
  Value* mean = b.div(b.reduce(x, dims, "sum"), count);
  Value* centered = b.sub(x, broadcastBack(b, mean, shape, dims));
  Value* var = b.div(b.reduce(b.mul(centered, centered), dims, "sum"), count);
  Value* stddev = b.unary(OpCode::Sqrt, b.add(var, splat(b, c, n.attrFloat("epsilon"), outer)));
  Value* y = b.div(centered, broadcastBack(b, stddev, shape, dims));
  // scale and bias have the shape of the normalised dims: they map onto [axis, rank).
  y = b.mul(y, b.broadcastInDim(widen(b, n.operand(1)), shape, dims));
  if (n.numOperands() == 3) y = b.add(y, b.broadcastInDim(widen(b, n.operand(2)), shape, dims));
  return narrow(b, y, t);
}

// (x - mean) / sqrt(variance + eps) * scale + offset, the 1-D operands along feature_index.
Value* decomposeBatchNorm(Builder& b, const Node& n) {
  DType t = n.operand(0)->type().dtype();
  DType c = computeType(t);
  Value* x = widen(b, n.operand(0));
  if (!x) return nullptr;
  const Shape shape = x->type().dims();
  int64_t f = n.attrInt("feature_index");
  auto along = [&](Value* v) { return b.broadcastInDim(v, shape, {f}); };
  Value* variance = widen(b, n.operand(4));
  Value* stddev =
      b.unary(OpCode::Sqrt,
              b.add(variance, splat(b, c, n.attrFloat("epsilon"), n.operand(4)->type().dims())));
  Value* centered = b.sub(x, along(widen(b, n.operand(3))));
  Value* y = b.div(centered, along(stddev));
  y = b.mul(y, along(widen(b, n.operand(1))));
  y = b.add(y, along(widen(b, n.operand(2))));
  return narrow(b, y, t);
}

// none: 0.5 * x * (1 + erf(x / sqrt(2)));
// tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
Value* decomposeGelu(Builder& b, const Node& n) {
  DType t = n.operand(0)->type().dtype();
  DType c = computeType(t);
  Value* x = widen(b, n.operand(0));
  if (!x) return nullptr;
  const Shape shape = x->type().dims();
  auto k = [&](double v) { return splat(b, c, v, shape); };
  Value* inner;
  if (n.attrEnum("approximate") == "tanh") {
    Value* cube = b.mul(b.mul(x, x), x);
    Value* poly = b.add(x, b.mul(k(0.044715), cube));
    inner = b.unary(OpCode::Tanh, b.mul(k(std::sqrt(2.0 / std::numbers::pi)), poly));
  } else {
    inner = b.unary(OpCode::Erf, b.div(x, k(std::numbers::sqrt2)));
  }
  Value* halfX = b.mul(k(0.5), x);
  Value* onePlus = b.add(k(1.0), inner);
  Value* y = b.mul(halfX, onePlus);
  return narrow(b, y, t);
}

// Whether query i may attend to key j: j <= i + (Sk - Sq), as a bool [Sq, Sk].
// Written as (Sk-1-j) >= (Sq-1-i) with reversed iotas, so that symbolic Sq and Sk need no
// arithmetic on extents: reversing iota along a dim of extent E gives E-1-index.
Value* causalAllowed(Builder& b, const Dim& sq, const Dim& sk) {
  TensorType it(DType::I64, {sq, sk});
  Value* rowsFromEnd = b.op(OpCode::Reverse, {b.iota(it, 0)}, {{"dims", intsAttr({0})}});
  Value* colsFromEnd = b.op(OpCode::Reverse, {b.iota(it, 1)}, {{"dims", intsAttr({1})}});
  return b.compare("ge", colsFromEnd, rowsFromEnd);
}

// The attention scale as a rank-0 value: the attribute, or 1/sqrt(D) (computed when D is
// symbolic).
Value* attentionScale(Builder& b, const Node& n, DType c) {
  if (hasAttr(n.attrs(), "scale")) return b.scalar(c, n.attrFloat("scale"));
  const Shape& q = n.operand(0)->type().dims();
  const Dim& d = q.back();
  if (d.isStatic()) return b.scalar(c, 1.0 / std::sqrt(static_cast<double>(d.value())));
  Value* count = b.reduce(splat(b, c, 1.0, {d}), {0}, "sum");
  Value* one = b.scalar(c, 1.0);
  return b.div(one, b.unary(OpCode::Sqrt, count));
}

// How decomposeNode rewrites a composite: into core ops; attention only, its softmax kept one
// composite (split-attention); the same with f16/bf16 scores and probabilities stored in that
// type (split-attention-stored-low).
enum class Form { Core, Split, SplitStoredLow };

// softmax(scale * q k^T + maskTerm) v over the trailing two dims, leading dims batched. Split
// keeps the softmax one composite op; SplitStoredLow also keeps f16/bf16 operands unconverted:
// the products accumulate in f32 and the softmax computes in f32 registers (docs/gpu.md), only
// what they store is rounded.
Value* decomposeAttention(Builder& b, const Node& n, Form form) {
  DType t = n.operand(0)->type().dtype();
  DType c = form == Form::SplitStoredLow ? t : computeType(t);
  auto in = [&](Value* x) { return narrow(b, x, c); };
  Value* q = in(n.operand(0));
  Value* k = in(n.operand(1));
  Value* v = in(n.operand(2));
  int64_t nb = n.operand(0)->type().rank() - 2;
  std::vector<int64_t> batch = range(0, nb);
  Value* scores = b.dotGeneral(q, k, DotDims{batch, batch, {nb + 1}, {nb + 1}});
  if (!scores) return nullptr;
  const Shape shape = scores->type().dims();  // [..., Sq, Sk]
  scores = b.mul(scores, b.broadcastInDim(attentionScale(b, n, c), shape, {}));
  auto maskOut = [&](Value* allowed, Value* s) {
    return b.select(allowed, s, splat(b, c, -INFINITY, shape));
  };
  if (n.numOperands() == 4) {
    Value* mask = n.operand(3);
    if (isBool(mask->type().dtype())) scores = maskOut(mask, scores);
    else scores = b.add(scores, in(mask));
  }
  if (n.attrBool("causal")) {
    Value* allowed = causalAllowed(b, shape[nb], shape[nb + 1]);
    if (nb > 0) allowed = b.broadcastInDim(allowed, shape, {nb, nb + 1});
    scores = maskOut(allowed, scores);
  }
  Value* p = form != Form::Core ? b.op(OpCode::Softmax, {scores}, {{"axis", intAttr(nb + 1)}})
                                : emitSoftmax(b, scores, nb + 1, /*log=*/false);
  Value* out = b.dotGeneral(p, v, DotDims{batch, batch, {nb + 1}, {nb}});
  return narrow(b, out, t);
}

Value* emitDecomposition(Builder& b, const Node& n, Form form) {
  if (form != Form::Core) return decomposeAttention(b, n, form);
  switch (n.op()) {
    case OpCode::Softmax: return decomposeSoftmax(b, n, /*log=*/false);
    case OpCode::LogSoftmax: return decomposeSoftmax(b, n, /*log=*/true);
    case OpCode::LayerNorm: return decomposeLayerNorm(b, n);
    case OpCode::BatchNormInference: return decomposeBatchNorm(b, n);
    case OpCode::Gelu: return decomposeGelu(b, n);
    case OpCode::Attention: return decomposeAttention(b, n, form);
    default: break;
  }
  KILN_CHECK(false, "no decomposition for " + n.describe());
  return nullptr;
}

// Replaces composite node `n` of `f` by its decomposition.
Status decomposeNode(Function& f, Node* n, Form form = Form::Core) {
  Status valid = verifyNode(*n);
  if (!valid) return valid.prefix("cannot decompose " + n->describe());
  // The type rules admit float composites only; checked here too because the emitters rely on it.
  if (!isFloat(n->operand(0)->type().dtype()))
    return Status::error("cannot decompose " + n->describe() + ": operand type " +
                             n->operand(0)->type().str() + " is not floating point",
                         n->loc());
  Builder b(&f);
  b.setInsertionPoint(n);
  b.setLoc(n->loc());
  b.setOrigin(n->origin());
  Value* replacement = emitDecomposition(b, *n, form);
  if (!b.ok()) {
    Status s = b.status();
    return s.prefix("cannot decompose " + n->describe());
  }
  Value* old = n->result();
  KILN_CHECK(replacement && replacement->type() == old->type(),
             "decomposition of " + n->describe() + " has type " +
                 (replacement ? replacement->type().str() : std::string("<none>")) + ", expected " +
                 old->type().str());
  replacement->setName(old->name());
  f.replaceAllUsesWith(old, replacement);
  f.erase(n);
  return Status::ok();
}

bool isRecurrence(const Node& n) { return n.op() == OpCode::Lstm || n.op() == OpCode::Gru; }

// lstm / gru unrolled over their steps (passes/unroll_recurrence.h), y back to [S, B, D*H].
Status decomposeRecurrence(Function& f, Node* n) {
  Builder b = rewrite::builderBefore(n);
  RecurrenceSpec k;
  k.cell = n->op() == OpCode::Lstm ? RecurrentCell::Lstm : RecurrentCell::Gru;
  k.hidden = n->operand(2)->type().dim(2).value();
  k.bidirectional = n->attrEnum("direction") == "bidirectional";
  k.reverse = n->attrEnum("direction") == "reverse";
  k.linearBeforeReset = n->op() == OpCode::Gru && n->attrBool("linear_before_reset");
  k.activations = defaultActivations(k.cell, k.bidirectional ? 2 : 1);
  RecurrenceOperands in{n->operand(0), n->operand(1),
                        n->operand(2), n->operand(3),
                        n->operand(4), n->numOperands() > 5 ? n->operand(5) : nullptr};
  StatusOr<RecurrenceResults> r = unrollRecurrence(b, k, in);
  if (!r) return Status(r.status()).prefix("cannot decompose " + n->describe());
  const Shape& yDims = n->result(0)->type().dims();
  std::vector<Value*> now{b.reshape(b.transpose(r->y, {0, 2, 1, 3}), yDims), r->yh, r->yc};
  if (!b.ok()) return Status(b.status()).prefix("cannot decompose " + n->describe());
  for (size_t i = 0; i < n->numResults(); ++i) {
    Value* old = n->result(i);
    KILN_CHECK(now[i] && now[i]->type() == old->type(), "decomposition of " + n->describe() +
                                                            " result " + std::to_string(i) +
                                                            " has the wrong type");
    now[i]->setName(old->name());
    f.replaceAllUsesWith(old, now[i]);
  }
  f.erase(n);
  return Status::ok();
}

// Decomposes the composites of `m` that `pick` selects.
StatusOr<bool> decomposeWhere(Module& m, const std::function<bool(const Node&)>& pick) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    // Collect first: decomposing inserts nodes into the list being walked.
    std::vector<Node*> composites;
    for (const auto& n : f->nodes())
      if (n->info().opClass == OpClass::Composite && pick(*n)) composites.push_back(n.get());
    for (Node* n : composites)
      KILN_RETURN_IF_ERROR(isRecurrence(*n) ? decomposeRecurrence(*f, n) : decomposeNode(*f, n));
    changed = changed || !composites.empty();
  }
  return changed;
}

}  // namespace

StatusOr<bool> decomposeComposites(Module& m) {
  return decomposeWhere(m, [](const Node&) { return true; });
}

StatusOr<bool> decomposeRecurrences(Module& m, const std::function<bool(const Node&)>& keep) {
  return decomposeWhere(m, [&](const Node& n) { return isRecurrence(n) && !(keep && keep(n)); });
}

StatusOr<bool> splitAttention(Module& m, bool storeLow) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    std::vector<Node*> attention;
    for (const auto& n : f->nodes())
      if (n->op() == OpCode::Attention) attention.push_back(n.get());
    for (Node* n : attention)
      KILN_RETURN_IF_ERROR(decomposeNode(*f, n, storeLow ? Form::SplitStoredLow : Form::Split));
    changed = changed || !attention.empty();
  }
  return changed;
}

}  // namespace kiln
