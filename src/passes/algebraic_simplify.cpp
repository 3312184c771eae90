// algebraic-simplify: sweeps each function in order and applies the first rule of the node's op
// that matches, then repeats until a sweep changes nothing. Rules see operands that earlier in the
// sweep were already simplified, so most chains settle in one sweep; new nodes a rule creates are
// visited in the next one.
#include "passes/algebraic_simplify.h"

#include <algorithm>
#include <array>

#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"

namespace kiln {
namespace {

using simplify::Rule;

// Rules indexed by op.
using RuleIndex = std::array<std::vector<const Rule*>, kNumOps>;

const RuleIndex& ruleIndex() {
  static const RuleIndex index = [] {
    RuleIndex r;
    for (auto table :
         {simplify::arithmeticRules(), simplify::movementRules(), simplify::windowRules()})
      for (const Rule& rule : table) r[static_cast<size_t>(rule.op)].push_back(&rule);
    return r;
  }();
  return index;
}

// Applies the first matching rule to n; returns whether n was replaced.
bool simplifyNode(Node* n) {
  if (n->numResults() != 1) return false;
  for (const Rule* rule : ruleIndex()[static_cast<size_t>(n->op())]) {
    Value* r = rule->apply(*n);
    if (!r) continue;
    if (r == n->result() || r->type() != n->result()->type()) continue;
    rewrite::replaceValue(n->result(), r);
    rewrite::eraseIfDead(n);
    return true;
  }
  return false;
}

bool sweep(Function& f) {
  std::vector<Node*> order;
  for (const auto& n : f.nodes()) order.push_back(n.get());
  // A rewrite of `n` erases only `n` and dead producers of it, which come before it in the
  // order: the nodes still to visit all stay valid.
  bool changed = false;
  for (Node* n : order) changed = simplifyNode(n) || changed;
  return changed;
}

}  // namespace

StatusOr<bool> algebraicSimplify(Module& m) {
  // Each sweep shrinks or rewrites the graph; the bound only guards against a rule pair that
  // undoes each other, which would be a bug in the tables.
  constexpr int kMaxSweeps = 32;
  bool changed = false;
  for (const auto& f : m.functions()) {
    for (int i = 0; i < kMaxSweeps; ++i) {
      if (!sweep(*f)) break;
      changed = true;
    }
  }
  return changed;
}

std::vector<std::string> algebraicSimplifyRules() {
  std::vector<std::string> out;
  for (auto table :
       {simplify::arithmeticRules(), simplify::movementRules(), simplify::windowRules()})
    for (const Rule& rule : table) out.emplace_back(rule.formula);
  return out;
}

}  // namespace kiln
