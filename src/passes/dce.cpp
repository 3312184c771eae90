// dce: walks each function backwards, erasing nodes whose results have no uses. Because nodes are
// kept in topological order, every user of a node comes after it, so by the time the walk reaches
// a node all of its users have already been considered: one backward sweep removes whole dead
// chains.
#include "passes/dce.h"

#include <vector>

namespace kiln {
namespace {

bool isDead(const Node& n) {
  if (n.op() == OpCode::Parameter) return false;
  for (size_t i = 0; i < n.numResults(); ++i)
    if (n.result(i)->hasUses()) return false;
  return true;
}

bool eliminateInFunction(Function& f) {
  // A snapshot of the order: erasing a node leaves pointers to the others valid.
  std::vector<Node*> order;
  for (const auto& n : f.nodes()) order.push_back(n.get());
  bool changed = false;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!isDead(**it)) continue;
    f.erase(*it);
    changed = true;
  }
  return changed;
}

}  // namespace

StatusOr<bool> eliminateDeadCode(Module& m) {
  bool changed = false;
  for (const auto& f : m.functions()) changed = eliminateInFunction(*f) || changed;
  return changed;
}

}  // namespace kiln
