// Matching helpers for recognize-patterns.
#include "passes/recognize_util.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "interp/interpreter.h"
#include "passes/rewrite_util.h"

namespace kiln::recognize {

using rewrite::splatValue;

bool isOp(const Value* v, OpCode op) { return v && v->def()->op() == op; }

namespace {

void flattenInto(Value* v, Product& p) {
  if (!p.ok || ++p.nodesVisited > kMaxProductNodes) {
    p.ok = false;
    return;
  }
  if (auto c = splatValue(v)) {
    p.coefficient *= *c;
    return;
  }
  Node* n = v->def();
  if (n->op() == OpCode::Mul) {
    flattenInto(n->operand(0), p);
    flattenInto(n->operand(1), p);
    return;
  }
  if (n->op() == OpCode::Div) {
    if (auto c = splatValue(n->operand(1)); c && *c != 0) {
      p.coefficient /= *c;
      flattenInto(n->operand(0), p);
      return;
    }
  }
  if (n->op() == OpCode::Pow) {
    auto k = splatValue(n->operand(1));
    if (k && (*k == 2 || *k == 3 || *k == 4)) {
      for (int i = 0; i < static_cast<int>(*k); ++i) flattenInto(n->operand(0), p);
      return;
    }
  }
  p.factors.push_back(v);
  if (p.factors.size() > kMaxFactors) p.ok = false;
}

// Labels say which dimension of the reduce input each dimension carries (-1: a broadcast or
// unit dimension). Returns false when an op does not keep the labels meaningful.
bool followBroadcast(const Node& n, std::vector<int64_t>& labels) {
  const TensorType &x = n.operand(0)->type(), &r = n.result()->type();
  std::vector<int64_t> dims = n.attrInts("dims"), out(r.dims().size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& from = x.dim(i);
    if (from.isStatic() && from.value() == 1) continue;
    out[static_cast<size_t>(dims[i])] = labels[i];
  }
  labels = std::move(out);
  return true;
}

// A reshape that only inserts or removes unit dimensions keeps the order of the others.
bool followReshape(const Node& n, std::vector<int64_t>& labels) {
  const TensorType &x = n.operand(0)->type(), &r = n.result()->type();
  auto isUnit = [](const Dim& d) { return d.isStatic() && d.value() == 1; };
  std::vector<int64_t> out(r.dims().size(), -1);
  size_t j = 0;
  for (size_t i = 0; i < x.dims().size(); ++i) {
    if (isUnit(x.dim(i))) continue;
    while (j < r.dims().size() && isUnit(r.dim(j))) ++j;
    if (j == r.dims().size() || r.dim(j) != x.dim(i)) return false;
    out[j++] = labels[i];
  }
  for (; j < r.dims().size(); ++j)
    if (!isUnit(r.dim(j))) return false;
  labels = std::move(out);
  return true;
}

// One arithmetic step of a reduce chain: the non-constant operand, with the step recorded.
Value* peelStep(Node* n, std::vector<ReduceStep>& steps) {
  switch (n->op()) {
    case OpCode::Sqrt:
    case OpCode::Rsqrt: steps.push_back({n->op(), 0}); return n->operand(0);
    case OpCode::Mul:
    case OpCode::Add:
      for (int side = 0; side < 2; ++side)
        if (auto c = splatValue(n->operand(side))) {
          steps.push_back({n->op(), *c});
          return n->operand(1 - side);
        }
      return nullptr;
    case OpCode::Div:
      if (auto c = splatValue(n->operand(1)); c && *c != 0) {
        steps.push_back({OpCode::Mul, 1 / *c});
        return n->operand(0);
      }
      return nullptr;
    default: return nullptr;
  }
}

}  // namespace

Product flattenProduct(Value* v) {
  Product p;
  flattenInto(v, p);
  return p;
}

bool sameFactors(std::vector<Value*> a, std::vector<Value*> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

Value* peelScale(Value* v, double& scale) {
  Node* n = v->def();
  if (n->op() == OpCode::Mul) {
    for (int side = 0; side < 2; ++side)
      if (auto c = splatValue(n->operand(side))) {
        scale = *c;
        return n->operand(1 - side);
      }
  }
  if (n->op() == OpCode::Div)
    if (auto c = splatValue(n->operand(1)); c && *c != 0) {
      scale = 1 / *c;
      return n->operand(0);
    }
  return nullptr;
}

bool followPlumbing(const Node& n, std::vector<int64_t>& labels) {
  if (n.op() == OpCode::BroadcastInDim) return followBroadcast(n, labels);
  if (n.op() == OpCode::Reshape) return followReshape(n, labels);
  return false;
}

bool alignedBack(const std::vector<int64_t>& labels, const TensorType& input,
                 const std::vector<int64_t>& reducedDims) {
  if (labels.size() != input.dims().size()) return false;
  for (size_t j = 0; j < labels.size(); ++j) {
    const Dim& e = input.dim(j);
    if (e.isStatic() && e.value() == 1) continue;
    bool reduced = std::find(reducedDims.begin(), reducedDims.end(), static_cast<int64_t>(j)) !=
                   reducedDims.end();
    if (reduced ? labels[j] != -1 : labels[j] != static_cast<int64_t>(j)) return false;
  }
  return true;
}

namespace {

// v (shape: reduced, or keepdims) carries the kept dims of `input` in order.
bool alignedPartial(const std::vector<int64_t>& labels, const Value* v, const TensorType& input,
                    const std::vector<int64_t>& dims) {
  const Shape& s = v->type().dims();
  auto unit = [](const Dim& d) { return d.isStatic() && d.value() == 1; };
  // Unit dims (keepdims placeholders, or kept dims of extent 1) carry nothing to check.
  std::vector<int64_t> kept, want;
  for (size_t j = 0; j < labels.size(); ++j) {
    if (unit(s[j])) continue;
    if (labels[j] == -1) return false;
    kept.push_back(labels[j]);
  }
  for (int64_t i = 0; i < input.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end() &&
        !unit(input.dim(static_cast<size_t>(i))))
      want.push_back(i);
  return kept == want;
}

}  // namespace

std::optional<ReduceChain> matchReduceChain(Value* v, bool allowReducedShape) {
  // Walk down, remembering the plumbing to replay it upward from the reduce.
  std::vector<Node*> plumbing;  // top to bottom
  std::vector<ReduceStep> stepsTopDown;
  Value* cur = v;
  for (int guard = 0; guard < 32 && !isOp(cur, OpCode::Reduce); ++guard) {
    Node* n = cur->def();
    if (n->op() == OpCode::BroadcastInDim || n->op() == OpCode::Reshape) {
      plumbing.push_back(n);
      cur = n->operand(0);
      continue;
    }
    cur = peelStep(n, stepsTopDown);
    if (!cur) return std::nullopt;
  }
  if (!isOp(cur, OpCode::Reduce)) return std::nullopt;
  ReduceChain c;
  c.reduce = cur->def();
  c.input = c.reduce->operand(0);
  c.dims = c.reduce->attrInts("dims");
  std::sort(c.dims.begin(), c.dims.end());
  c.kind = c.reduce->attrEnum("kind");
  c.steps.assign(stepsTopDown.rbegin(), stepsTopDown.rend());
  const TensorType& in = c.input->type();
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < in.rank(); ++i)
    if (!std::binary_search(c.dims.begin(), c.dims.end(), i)) labels.push_back(i);
  for (auto it = plumbing.rbegin(); it != plumbing.rend(); ++it)
    if (!followPlumbing(**it, labels)) return std::nullopt;
  bool full = v->type().dims() == in.dims() && alignedBack(labels, in, c.dims);
  bool partial =
      allowReducedShape && v->type().dims() != in.dims() && alignedPartial(labels, v, in, c.dims);
  if (!full && !partial) return std::nullopt;
  return c;
}

std::optional<int64_t> staticCount(const TensorType& t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    const Dim& e = t.dim(static_cast<size_t>(d));
    if (!e.isStatic()) return std::nullopt;
    n *= e.value();
  }
  return n;
}

namespace {

std::optional<Tensor> evaluateMemo(Value* v, int64_t maxElements,
                                   std::unordered_map<Value*, Tensor>& memo, int depth) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  auto count = v->type().numElements();
  Node* n = v->def();
  if (depth > 64 || !count || *count > maxElements || n->op() == OpCode::Parameter)
    return std::nullopt;
  std::vector<Tensor> operands;
  for (Value* o : n->operands()) {
    auto t = evaluateMemo(o, maxElements, memo, depth + 1);
    if (!t) return std::nullopt;
    operands.push_back(*t);
  }
  auto results = evaluateNode(*n, operands);
  if (!results) return std::nullopt;
  for (size_t i = 0; i < n->numResults(); ++i) memo[n->result(i)] = (*results)[i];
  return (*results)[v->index()];
}

}  // namespace

std::optional<Tensor> evaluateConstantSubgraph(Value* v, int64_t maxElements) {
  std::unordered_map<Value*, Tensor> memo;
  return evaluateMemo(v, maxElements, memo, 0);
}

}  // namespace kiln::recognize
