// constant-fold: one forward sweep per function. Nodes are visited in order, so a node whose
// operands were folded earlier in the sweep sees them as constants: a whole constant subgraph
// folds in one sweep.
#include "passes/constant_fold.h"

#include <algorithm>

#include "interp/interpreter.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

int64_t elements(const TensorType& t) { return t.numElements().value_or(0); }

// Multiply-adds of a contraction (other ops: 0, bounded by the element caps instead).
// In double: a product of extents below 2^40 each would overflow int64.
double contractionWork(const Node& n) {
  if (n.op() != OpCode::DotGeneral && n.op() != OpCode::Convolution) return 0;
  const TensorType& out = n.result()->type();
  const TensorType& rhs = n.operand(1)->type();
  if (n.op() == OpCode::DotGeneral) {
    double k = 1;
    for (int64_t d : n.attrInts("rhs_contracting"))
      k *= static_cast<double>(rhs.dim(static_cast<size_t>(d)).value());
    return static_cast<double>(elements(out)) * k;
  }
  auto dn = convDimensionNumbers(n.attrs(), rhs.rank());
  if (!dn) return 0;
  int64_t outFeatures =
      std::max<int64_t>(1, rhs.dim(static_cast<size_t>(dn->kernelOutput)).value());
  return static_cast<double>(elements(out)) * static_cast<double>(elements(rhs) / outFeatures);
}

bool foldable(const Node& n, const ConstantFoldOptions& o) {
  if (n.op() == OpCode::Constant || n.op() == OpCode::Parameter) return false;
  // Its result has the size only at the program's boundary (passes/expose_dynamic_sizes.h).
  if (n.op() == OpCode::SetDimensionSize) return false;
  int64_t in = 0, out = 0;
  for (Value* v : n.operands()) {
    if (!rewrite::constantOf(v)) return false;
    in += elements(v->type());
  }
  for (size_t i = 0; i < n.numResults(); ++i) {
    const TensorType& t = n.result(i)->type();
    if (!t.isStatic()) return false;
    out += elements(t);
  }
  if (out > o.maxResultElements) return false;
  if (out > in && out > o.smallResultElements) return false;
  // A broadcast only replicates its operand: folding it stores the copies and hides the
  // structure (a broadcast scalar is what backends turn into an immediate), so only the
  // element-preserving ones (a relabelling of dims) fold.
  if (n.op() == OpCode::BroadcastInDim && out > in) return false;
  return contractionWork(n) <= static_cast<double>(o.maxContractionWork);
}

// Erases `n` and the constants that fed only it.
void eraseWithDeadConstants(Node* n) {
  std::vector<Node*> producers;
  for (Value* v : n->operands())
    if (std::find(producers.begin(), producers.end(), v->def()) == producers.end())
      producers.push_back(v->def());
  Function* f = n->parent();
  f->erase(n);
  for (Node* p : producers)
    if (p->op() == OpCode::Constant && !p->result()->hasUses()) f->erase(p);
}

bool foldNode(Node* n) {
  std::vector<Tensor> operands;
  for (Value* v : n->operands()) operands.push_back(*rewrite::constantOf(v));
  StatusOr<std::vector<Tensor>> results = evaluateNode(*n, operands);
  if (!results) return false;
  KILN_CHECK(results->size() == n->numResults(),
             "evaluateNode gave the wrong number of results for " + n->describe());
  for (size_t i = 0; i < n->numResults(); ++i)
    KILN_CHECK((*results)[i].type() == n->result(i)->type(),
               "evaluateNode gave " + (*results)[i].type().str() + " for " + n->describe() +
                   " of type " + n->result(i)->type().str());
  Builder b = rewrite::builderBefore(n);
  for (size_t i = 0; i < n->numResults(); ++i) {
    Value* c = b.constant(std::move((*results)[i]));
    KILN_CHECK(c, "building a folded constant failed: " + b.status().str());
    rewrite::replaceValue(n->result(i), c);
  }
  eraseWithDeadConstants(n);
  return true;
}

}  // namespace

StatusOr<bool> constantFold(Module& m, const ConstantFoldOptions& options) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    std::vector<Node*> order;
    for (const auto& n : f->nodes()) order.push_back(n.get());
    // Folding `n` erases only `n` and constants before it, so the rest of `order` stays valid.
    for (Node* n : order)
      if (foldable(*n, options)) changed = foldNode(n) || changed;
  }
  return changed;
}

StatusOr<bool> constantFold(Module& m) { return constantFold(m, ConstantFoldOptions{}); }

}  // namespace kiln
