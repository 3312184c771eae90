// recognize-patterns: two forward sweeps per function. The first tries GELU, layer norm and
// softmax at every node; the second tries attention, which needs the softmax composites of the
// first. A matcher sees its root's operands already rewritten, since they come earlier.
#include "passes/recognize_patterns.h"

#include "passes/recognize_matchers.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using Matcher = Value* (*)(Node&);

bool sweep(Function& f, std::initializer_list<Matcher> matchers) {
  std::vector<Node*> order;
  for (const auto& n : f.nodes()) order.push_back(n.get());
  bool changed = false;
  // Replacing `n` erases `n` and the chain before it that nothing else uses; those nodes come
  // earlier in `order`, so the nodes still to visit stay valid.
  for (Node* n : order) {
    if (n->numResults() != 1) continue;
    for (Matcher match : matchers) {
      Value* composite = match(*n);
      if (!composite) continue;
      rewrite::replaceValue(n->result(), composite);
      rewrite::eraseIfDead(n);
      changed = true;
      break;
    }
  }
  return changed;
}

}  // namespace

StatusOr<bool> recognizePatterns(Module& m) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    changed = sweep(*f, {recognize::recognizeGelu, recognize::recognizeLayerNorm,
                         recognize::recognizeSoftmax}) ||
              changed;
    changed = sweep(*f, {recognize::recognizeAttention}) || changed;
  }
  return changed;
}

}  // namespace kiln
