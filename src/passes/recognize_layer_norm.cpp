// recognize-patterns: layer normalisation as exporters write it (ONNX before opset 17, TF):
//   mean = ReduceMean(x, axes = [axis..rank), keepdims)    reduce sum, then * 1/n or / n
//   d    = x - mean
//   var  = ReduceMean(d * d  or  d ^ 2)      or, as ONNX's LayerNormalization function body
//          ReduceMean(x * x) - mean * mean    writes it (means at the keepdims shape)
//   y    = d / sqrt(var + eps)   or   d * rsqrt(var + eps)
//   y    = y * scale + bias        (either, both or neither)
// -> layer_norm(x, scale, [bias]) {axis, epsilon = eps}.
#include <algorithm>

#include "passes/recognize_matchers.h"
#include "passes/recognize_util.h"
#include "passes/rewrite_util.h"

namespace kiln::recognize {
namespace {

// scale or bias, as the composite wants it: shape x.shape[axis:].
struct NormOperand {
  Value* value = nullptr;  // used as is, or reshaped when `reshape`
  bool reshape = false;
  std::optional<Tensor> data;  // a new constant (taken from a full-shape constant)
};

struct LayerNormMatch {
  Value* x = nullptr;
  int64_t axis = 0;
  double epsilon = 0;
  std::optional<NormOperand> scale, bias;
};

bool isSuffix(const std::vector<int64_t>& dims, int64_t rank) {
  if (dims.empty()) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != rank - static_cast<int64_t>(dims.size() - i)) return false;
  return true;
}

// The product of a chain's Mul steps, checking that nothing else precedes position `end`.
std::optional<double> scaleOf(const std::vector<ReduceStep>& steps, size_t end) {
  double s = 1;
  for (size_t i = 0; i < end; ++i) {
    if (steps[i].op != OpCode::Mul) return std::nullopt;
    s *= steps[i].constant;
  }
  return s;
}

// mean(x) over a suffix of dims, brought back to x's shape: returns the dims.
std::optional<std::vector<int64_t>> matchMean(Value* v, Value* x, double tol) {
  auto c = matchReduceChain(v);
  if (!c || c->input != x || c->kind != "sum" || !isSuffix(c->dims, x->type().rank()))
    return std::nullopt;
  auto n = staticCount(x->type(), c->dims);
  auto s = scaleOf(c->steps, c->steps.size());
  if (!n || *n == 0 || !s || !rewrite::approxEqual(*s, 1.0 / static_cast<double>(*n), tol))
    return std::nullopt;
  return c->dims;
}

bool isSquareOf(Value* q, Value* v) {
  return (isOp(q, OpCode::Mul) && q->def()->operand(0) == v && q->def()->operand(1) == v) ||
         (isOp(q, OpCode::Pow) && q->def()->operand(0) == v &&
          rewrite::isSplat(q->def()->operand(1), 2));
}

// A mean over `dims` of `input` at the reduced or keepdims shape: sum times 1/n.
bool isPartialMean(Value* v, Value* input, const std::vector<int64_t>& dims, double tol) {
  auto c = matchReduceChain(v, /*allowReducedShape=*/true);
  if (!c || c->input != input || c->kind != "sum" || c->dims != dims) return false;
  auto n = staticCount(input->type(), dims);
  auto s = scaleOf(c->steps, c->steps.size());
  return n && *n > 0 && s && rewrite::approxEqual(*s, 1.0 / static_cast<double>(*n), tol);
}

// Form A, two passes: reduce(d * d or d^2) times 1/n, + eps, then `root`, back to x's shape.
std::optional<double> twoPassVariance(Value* den, OpCode root, Value* d, Value* x,
                                      const std::vector<int64_t>& dims, double tol) {
  auto c = matchReduceChain(den);
  if (!c || c->kind != "sum" || c->dims != dims || !isSquareOf(c->input, d) || c->steps.size() < 2)
    return std::nullopt;
  size_t k = c->steps.size();
  auto s = scaleOf(c->steps, k - 2);
  auto n = staticCount(x->type(), dims);
  if (c->steps[k - 1].op != root || c->steps[k - 2].op != OpCode::Add || !s || !n ||
      !rewrite::approxEqual(*s, 1.0 / static_cast<double>(*n), tol))
    return std::nullopt;
  return c->steps[k - 2].constant;
}

// Form B, the ONNX function body of LayerNormalization: var = mean(x * x) - mean(x)^2, + eps,
// then `root`, back to x's shape. The composite computes the two-pass variance, which is the
// same quantity without the cancellation of the one-pass formula.
std::optional<double> onePassVariance(Value* den, OpCode root, Value* x,
                                      const std::vector<int64_t>& dims, double tol) {
  std::vector<Node*> plumbing;  // top to bottom
  Value* cur = den;
  bool rooted = false;
  for (int guard = 0; guard < 16; ++guard) {
    Node* n = cur->def();
    if (n->op() == OpCode::BroadcastInDim || n->op() == OpCode::Reshape) {
      plumbing.push_back(n);
      cur = n->operand(0);
    } else if (!rooted && n->op() == root) {
      rooted = true;
      cur = n->operand(0);
    } else {
      break;
    }
  }
  if (!rooted || !isOp(cur, OpCode::Add)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto eps = rewrite::splatValue(cur->def()->operand(side));
    Value* var = cur->def()->operand(1 - side);
    if (!eps || !isOp(var, OpCode::Sub)) continue;
    Value *meanSq = var->def()->operand(0), *sqMean = var->def()->operand(1);
    if (!isOp(sqMean, OpCode::Mul) && !isOp(sqMean, OpCode::Pow)) return std::nullopt;
    Value* mean = sqMean->def()->operand(0);
    auto chain = matchReduceChain(meanSq, /*allowReducedShape=*/true);
    if (!chain || !isSquareOf(sqMean, mean) || !isSquareOf(chain->input, x) ||
        !isPartialMean(meanSq, chain->input, dims, tol) || !isPartialMean(mean, x, dims, tol) ||
        mean->type() != var->type())
      return std::nullopt;
    // Replay the plumbing from var (reduced or keepdims shape) up to den.
    const TensorType& xt = x->type();
    std::vector<int64_t> labels;
    bool keepShape = var->type().rank() == xt.rank();
    for (int64_t i = 0; i < xt.rank(); ++i) {
      bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
      if (keepShape) labels.push_back(reduced ? -1 : i);
      else if (!reduced) labels.push_back(i);
    }
    for (auto it = plumbing.rbegin(); it != plumbing.rend(); ++it)
      if (!followPlumbing(**it, labels)) return std::nullopt;
    if (den->type().dims() != xt.dims() || !alignedBack(labels, xt, dims)) return std::nullopt;
    return *eps;
  }
  return std::nullopt;
}

// The core (x - mean) / sqrt(var + eps) or (x - mean) * rsqrt(var + eps).
std::optional<LayerNormMatch> matchCore(Value* v) {
  const TensorType& t = v->type();
  if (!isFloat(t.dtype())) return std::nullopt;
  double tol = rewrite::constantTolerance(t.dtype());
  Node* n = v->def();
  if (n->op() != OpCode::Div && n->op() != OpCode::Mul) return std::nullopt;
  OpCode root = n->op() == OpCode::Div ? OpCode::Sqrt : OpCode::Rsqrt;
  for (int side = 0; side < (n->op() == OpCode::Div ? 1 : 2); ++side) {
    Value* d = n->operand(side);
    Value* den = n->operand(1 - side);
    if (!isOp(d, OpCode::Sub)) continue;
    Value* x = d->def()->operand(0);
    auto dims = matchMean(d->def()->operand(1), x, tol);
    if (!dims) continue;
    auto eps = twoPassVariance(den, root, d, x, *dims, tol);
    if (!eps) eps = onePassVariance(den, root, x, *dims, tol);
    if (eps) return LayerNormMatch{x, (*dims)[0], *eps, std::nullopt, std::nullopt};
  }
  return std::nullopt;
}

// v as an operand of shape x.shape[axis:] broadcast along the leading dims.
std::optional<NormOperand> matchNormOperand(Value* v, const TensorType& x, int64_t axis) {
  Shape norm(x.dims().begin() + axis, x.dims().end());
  int64_t rank = x.rank(), k = rank - axis;
  if (v->type().dtype() != x.dtype()) return std::nullopt;
  if (axis == 0) return NormOperand{v, false, std::nullopt};
  if (isOp(v, OpCode::BroadcastInDim)) {
    Value* s = v->def()->operand(0);
    int64_t sr = s->type().rank();
    std::vector<int64_t> dims = v->def()->attrInts("dims");
    bool aligned = sr >= k && sr <= rank;
    for (int64_t i = 0; aligned && i < sr; ++i) {
      const Dim& e = s->type().dim(static_cast<size_t>(i));
      aligned = dims[static_cast<size_t>(i)] == rank - sr + i &&
                (i >= sr - k ? e == norm[static_cast<size_t>(i - (sr - k))]
                             : e.isStatic() && e.value() == 1);
    }
    if (aligned) return NormOperand{s, sr != k, std::nullopt};
  }
  // A constant of x's full shape (a folded broadcast) that repeats one norm-shaped block.
  const Tensor* c = rewrite::constantOf(v);
  auto blockSize = TensorType(x.dtype(), norm).numElements();
  if (!c || !blockSize || *blockSize == 0) return std::nullopt;
  size_t bytes = static_cast<size_t>(*blockSize) * dtypeSize(x.dtype());
  for (size_t off = bytes; off < c->byteSize(); off += bytes)
    if (!std::equal(c->bytes(), c->bytes() + bytes, c->bytes() + off)) return std::nullopt;
  std::vector<int64_t> normDims;
  for (const Dim& d : norm) normDims.push_back(d.value());
  Tensor block(x.dtype(), normDims);
  std::copy(c->bytes(), c->bytes() + bytes, block.mutableBytes());
  return NormOperand{nullptr, false, std::move(block)};
}

std::optional<LayerNormMatch> matchLayerNorm(Value* v) {
  if (auto core = matchCore(v)) return core;
  Node* n = v->def();
  if (n->op() != OpCode::Mul && n->op() != OpCode::Add) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    Value* inner = n->operand(side);
    auto m = n->op() == OpCode::Mul ? matchCore(inner) : matchLayerNorm(inner);
    if (!m || (n->op() == OpCode::Add && m->bias)) continue;
    auto operand = matchNormOperand(n->operand(1 - side), m->x->type(), m->axis);
    if (!operand) continue;
    (n->op() == OpCode::Mul ? m->scale : m->bias) = std::move(operand);
    return m;
  }
  return std::nullopt;
}

Value* materialise(Builder& b, const NormOperand& o, const Shape& norm) {
  if (o.data) return b.constant(*o.data);
  return o.reshape ? b.reshape(o.value, norm) : o.value;
}

}  // namespace

Value* recognizeLayerNorm(Node& root) {
  if (root.numResults() != 1) return nullptr;
  auto m = matchLayerNorm(root.result());
  if (!m) return nullptr;
  // Match the longest chain: leave the core to the `* scale` or `+ bias` that consumes it.
  const auto& uses = root.result()->uses();
  if (uses.size() == 1 && !root.result()->isFunctionOutput())
    if (auto outer = matchLayerNorm(uses[0].user->result()); outer && outer->x == m->x)
      return nullptr;
  const TensorType& x = m->x->type();
  if (x != root.result()->type()) return nullptr;
  Shape norm(x.dims().begin() + m->axis, x.dims().end());
  TensorType normType(x.dtype(), norm);
  if (!m->scale) {
    if (!normType.isStatic()) return nullptr;
    Tensor ones(x.dtype(), normType.staticDims());
    for (int64_t i = 0; i < ones.numElements(); ++i) ones.setDouble(i, 1.0);
    m->scale = NormOperand{nullptr, false, std::move(ones)};
  }
  Builder b = rewrite::builderBefore(&root);
  std::vector<Value*> operands{m->x, materialise(b, *m->scale, norm)};
  if (m->bias) operands.push_back(materialise(b, *m->bias, norm));
  return b.op(OpCode::LayerNorm, operands,
              {{"axis", intAttr(m->axis)},
               {"epsilon", floatAttr(rewrite::attributeValue(m->epsilon, x.dtype()))}});
}

}  // namespace kiln::recognize
