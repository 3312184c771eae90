// Which nodes of a function reach which through their uses, as bitsets over program order: the
// fusion planner's convexity check in O(members * nodes / 64) word operations, where a walk of
// the graph between the members costs the whole region every time (quadratic on an unrolled
// recurrence: a 100-step GRU spent 2.3 s planning). The map holds 2 * nodes^2 bits, so a
// function of more than `maxNodes` nodes (FusionOptions::reachabilityMaxNodes, 64 MiB of bitsets
// at its default) has none and the planner walks the graph instead.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "ir/ir.h"

namespace kiln::fusion {

class Reachability {
 public:
  // `order`: each node's position in program order (topological).
  Reachability(const std::map<const Node*, int>& order, size_t maxNodes);

  bool available() const { return words_ > 0; }
  // Whether a ∪ b is convex: no node outside it is reachable from a member and reaches a member
  // (a kernel must run after everything it reads and before everything that reads it).
  bool convex(const std::set<const Node*>& a, const std::set<const Node*>& b) const;

 private:
  const uint64_t* row(const std::vector<uint64_t>& m, int i) const {
    return m.data() + static_cast<size_t>(i) * words_;
  }
  size_t words_ = 0;
  std::vector<uint64_t> from_;  // row i: the nodes reachable from node i
  std::vector<uint64_t> to_;    // row i: the nodes that reach node i
  const std::map<const Node*, int>& order_;
};

}  // namespace kiln::fusion
