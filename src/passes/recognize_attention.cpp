// recognize-patterns: scaled dot-product attention.
//   s = dot_general(q, k) contracting the last dims (or q against k^T given as [.., D, Sk])
//   s = s * scale  |  s / c  (and/or q and k each multiplied by a splat: scales multiply)
//   s = s + mask   |  select(mask, s, -inf)  |  select(mask, -inf, s)
//   o = dot_general(softmax(s, last axis), v)
// -> attention(q, k, v [, mask]) {scale, causal}. A mask that depends on no input and equals the
// bottom-right-aligned causal pattern (key j visible to query i iff j <= i + Sk - Sq) becomes
// causal = true; any other mask is passed on (a float mask is added, a bool mask selects).
#include <cmath>

#include "passes/recognize_matchers.h"
#include "passes/recognize_util.h"
#include "passes/rewrite_util.h"

namespace kiln::recognize {
namespace {

std::vector<int64_t> iotaVec(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// The permutation swapping the last two dims of a rank-r tensor.
std::vector<int64_t> swapLast(int64_t r) {
  std::vector<int64_t> p = iotaVec(r);
  std::swap(p[static_cast<size_t>(r - 1)], p[static_cast<size_t>(r - 2)]);
  return p;
}

// x with its last two dims swapped; a transpose that swapped them is undone rather than doubled.
Value* swapLastDims(Builder& b, Value* x, int64_t r) {
  if (isOp(x, OpCode::Transpose) && x->def()->attrInts("permutation") == swapLast(r))
    return x->def()->operand(0);
  return b.transpose(x, swapLast(r));
}

// dot_general over batch dims [0, r-2), contracting lhs dim r-1 with rhs dim `rhsContracting`.
bool isBatchedMatmul(const Node& n, int64_t r, int64_t rhsContracting) {
  if (n.op() != OpCode::DotGeneral || n.operand(0)->type().rank() != r ||
      n.operand(1)->type().rank() != r)
    return false;
  return n.attrInts("lhs_batch") == iotaVec(r - 2) && n.attrInts("rhs_batch") == iotaVec(r - 2) &&
         n.attrInts("lhs_contracting") == std::vector<int64_t>{r - 1} &&
         n.attrInts("rhs_contracting") == std::vector<int64_t>{rhsContracting};
}

struct Scores {
  Value* q = nullptr;
  Value* k = nullptr;
  bool kTransposed = false;  // k is given as [..., D, Sk]
  double scale = 1;
};

// s = [scale *] dot_general([c *] q, [c *] k).
std::optional<Scores> matchScores(Value* s, int64_t r) {
  Scores sc;
  double c = 1;
  if (Value* inner = peelScale(s, c)) {
    sc.scale = c;
    s = inner;
  }
  Node* dot = s->def();
  bool natural = isBatchedMatmul(*dot, r, r - 1);
  if (!natural && !isBatchedMatmul(*dot, r, r - 2)) return std::nullopt;
  sc.kTransposed = !natural;
  sc.q = dot->operand(0);
  sc.k = dot->operand(1);
  for (Value** side : {&sc.q, &sc.k})
    if (Value* inner = peelScale(*side, c)) {
      sc.scale *= c;
      *side = inner;
    }
  return sc;
}

// True when t (shape [..., Sq, Sk]) is the causal mask: allowed positions are nonzero (bool,
// `negated` flips it) or 0 against -inf (float).
bool isCausalMask(const Tensor& t, bool negated) {
  int64_t r = t.rank();
  if (r < 2) return false;
  int64_t sq = t.dims()[static_cast<size_t>(r - 2)], sk = t.dims()[static_cast<size_t>(r - 1)];
  for (int64_t idx = 0; idx < t.numElements(); ++idx) {
    int64_t j = idx % sk, i = (idx / sk) % sq;
    bool allowed = j <= i + (sk - sq);
    double v = t.getDouble(idx);
    if (t.dtype() == DType::Bool) {
      if (((v != 0) != negated) != allowed) return false;
    } else if (allowed ? v != 0 : !(std::isinf(v) && v < 0)) {
      return false;
    }
  }
  return true;
}

struct MaskedScores {
  Scores scores;
  Value* mask = nullptr;  // float (added) or bool (selects)
  bool negated = false;   // bool mask given as "true = masked"
};

std::optional<MaskedScores> matchMasked(Value* s, int64_t r) {
  Node* n = s->def();
  if (n->op() == OpCode::Add) {
    for (int side = 0; side < 2; ++side)
      if (auto sc = matchScores(n->operand(side), r))
        return MaskedScores{*sc, n->operand(1 - side), false};
  }
  if (n->op() == OpCode::Select && n->operand(0)->type().rank() == r) {
    double negInf = -INFINITY;
    if (rewrite::isSplat(n->operand(2), negInf))
      if (auto sc = matchScores(n->operand(1), r)) return MaskedScores{*sc, n->operand(0), false};
    if (rewrite::isSplat(n->operand(1), negInf))
      if (auto sc = matchScores(n->operand(2), r)) return MaskedScores{*sc, n->operand(0), true};
  }
  if (auto sc = matchScores(s, r)) return MaskedScores{*sc, nullptr, false};
  return std::nullopt;
}

}  // namespace

Value* recognizeAttention(Node& root) {
  if (root.op() != OpCode::DotGeneral) return nullptr;
  Value* p = root.operand(0);
  Value* v = root.operand(1);
  int64_t r = p->type().rank();
  if (!isOp(p, OpCode::Softmax) || r < 2 || p->def()->attrInt("axis") != r - 1) return nullptr;
  bool vNatural = isBatchedMatmul(root, r, r - 2);
  if (!vNatural && !isBatchedMatmul(root, r, r - 1)) return nullptr;
  auto m = matchMasked(p->def()->operand(0), r);
  if (!m) return nullptr;
  bool causal = false;
  if (m->mask) {
    if (auto t = evaluateConstantSubgraph(m->mask); t && isCausalMask(*t, m->negated)) {
      causal = true;
      m->mask = nullptr;
    }
  }
  // Type-check the composite before building anything, so a mismatch leaves no debris.
  auto swapped = [&](const Value* x) {
    return x->type().withDims(rewrite::permuteShape(x->type().dims(), swapLast(r)));
  };
  std::vector<TensorType> types{m->scores.q->type(),
                                m->scores.kTransposed ? swapped(m->scores.k) : m->scores.k->type(),
                                vNatural ? v->type() : swapped(v)};
  if (m->mask) types.push_back(m->mask->type());
  DType dtype = m->scores.q->type().dtype();
  AttrMap attrs{{"scale", floatAttr(rewrite::attributeValue(m->scores.scale, dtype))}};
  if (causal) attrs["causal"] = boolAttr(true);
  auto inferred = inferResultTypes(InferInput{OpCode::Attention, types, attrs, {}});
  if (!inferred || (*inferred)[0] != root.result()->type()) return nullptr;

  Builder b = rewrite::builderBefore(&root);
  Value* k = m->scores.kTransposed ? swapLastDims(b, m->scores.k, r) : m->scores.k;
  Value* vv = vNatural ? v : swapLastDims(b, v, r);
  std::vector<Value*> operands{m->scores.q, k, vv};
  if (m->mask) operands.push_back(m->negated ? b.unary(OpCode::Not, m->mask) : m->mask);
  Value* out = b.op(OpCode::Attention, operands, std::move(attrs));
  KILN_CHECK(out, "building attention at " + root.describe() + " failed: " + b.status().str());
  return out;
}

}  // namespace kiln::recognize
