// See reachability.h.
#include "fusion/reachability.h"

namespace kiln::fusion {

Reachability::Reachability(const std::map<const Node*, int>& order, size_t maxNodes)
    : order_(order) {
  const size_t n = order.size();
  if (n == 0 || n > maxNodes) return;
  words_ = (n + 63) / 64;
  from_.assign(n * words_, 0);
  to_.assign(n * words_, 0);
  std::vector<const Node*> nodes(n);
  for (const auto& [node, i] : order) nodes[static_cast<size_t>(i)] = node;
  auto orInto = [&](std::vector<uint64_t>& m, int dst, int src) {
    uint64_t* d = m.data() + static_cast<size_t>(dst) * words_;
    const uint64_t* s = m.data() + static_cast<size_t>(src) * words_;
    for (size_t w = 0; w < words_; ++w) d[w] |= s[w];
    d[static_cast<size_t>(src) / 64] |= uint64_t{1} << (src % 64);
  };
  for (size_t i = n; i-- > 0;)  // users come later in program order
    for (size_t r = 0; r < nodes[i]->numResults(); ++r)
      for (const Use& u : nodes[i]->result(r)->uses())
        if (auto it = order.find(u.user); it != order.end())
          orInto(from_, static_cast<int>(i), it->second);
  for (size_t i = 0; i < n; ++i)
    for (size_t o = 0; o < nodes[i]->numOperands(); ++o)
      if (const Node* p = nodes[i]->operand(o)->def())
        if (auto it = order.find(p); it != order.end())
          orInto(to_, static_cast<int>(i), it->second);
}

bool Reachability::convex(const std::set<const Node*>& a, const std::set<const Node*>& b) const {
  std::vector<uint64_t> members(words_, 0), after(words_, 0), before(words_, 0);
  for (const std::set<const Node*>* s : {&a, &b})
    for (const Node* m : *s) {
      const int i = order_.at(m);
      members[static_cast<size_t>(i) / 64] |= uint64_t{1} << (i % 64);
      const uint64_t* f = row(from_, i);
      const uint64_t* t = row(to_, i);
      for (size_t w = 0; w < words_; ++w) {
        after[w] |= f[w];
        before[w] |= t[w];
      }
    }
  for (size_t w = 0; w < words_; ++w)
    if (after[w] & before[w] & ~members[w]) return false;
  return true;
}

}  // namespace kiln::fusion
