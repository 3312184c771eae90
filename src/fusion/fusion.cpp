// The fusion planner. One pass over the ops from last to first decides, for each producer, whether
// it joins the kernels of its consumers (loop and input fusion, recomputation, multi-output) or
// takes them in as its epilogue; a second pass merges sibling kernels. Every decision keeps its
// reason for `kiln explain`.
#include "fusion/fusion.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <tuple>

#include "fusion/reachability.h"
#include "ir/text/text.h"

namespace kiln::fusion {

std::string_view kernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::Loop: return "loop";
    case KernelKind::Reduction: return "reduction";
    case KernelKind::Contraction: return "contraction";
    case KernelKind::Attention: return "attention";
    case KernelKind::Opaque: return "opaque";
    case KernelKind::Custom: return "custom";
  }
  return "?";
}

namespace {

KernelKind kindFor(OpPattern p) {
  switch (p) {
    case OpPattern::Reduction: return KernelKind::Reduction;
    case OpPattern::Contraction: return KernelKind::Contraction;
    case OpPattern::Attention: return KernelKind::Attention;
    case OpPattern::Opaque: return KernelKind::Opaque;
    default: return KernelKind::Loop;
  }
}

// Elementwise ops that may join a library call's kernel as its epilogue: the head of the chain
// as post-ops where the target's EpiloguePolicy takes them (planPostOps, epilogue.h), the rest
// as loops over the call's result.
bool isLibraryEpilogueOp(OpCode op) {
  switch (op) {
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Max:
    case OpCode::Min:
    case OpCode::Clamp:
    case OpCode::Gelu:
    case OpCode::Tanh:
    case OpCode::Sigmoid:
    case OpCode::Exp:
    case OpCode::Log:
    case OpCode::Abs:
    case OpCode::Sqrt:
    case OpCode::Neg:
    case OpCode::Convert: return true;
    default: return false;
  }
}

// The most values one kernel computes again per element: a member computed at n indices
// (Planner::indicesIn) counts n - 1. Past it the producer is stored once and read instead: each
// index is a copy of its expression, and chains that double the indices at every step (channel
// shuffles) would grow the kernel exponentially. A 7x7 im2col recomputes its pad 48 times.
constexpr size_t kMaxRecomputed = 128;

// The most operands of a concatenate computed inside another op's kernel: there each element
// selects its operand, and the CPU schedule splits a loop at the boundaries into at most this
// many pieces (kernel/schedule.h, kMaxLoopPieces). A larger one (an unrolled recurrence stacking
// its 100 steps) is stored by a kernel of its own, one loop nest per operand.
constexpr size_t kMaxInlinedConcatOperands = 64;

struct Group {
  KernelKind kind = KernelKind::Loop;
  const Node* anchor = nullptr;
  std::set<const Node*> members;
  bool alive = true;
  size_t recomputed = 0;  // the sum over members of (indices - 1)
};

struct EdgeNote {
  std::string how;  // set when the planner fused the edge
  std::string reason;
};

class Planner {
 public:
  Planner(const Function& f, const FusionOptions& o) : f_(f), o_(o) {
    int i = 0;
    for (const auto& n : f.nodes()) order_[n.get()] = i++;
    reach_ = std::make_unique<Reachability>(order_, o.reachabilityMaxNodes);
    names_ = printedValueNames(f);
  }

  FusionPlan run() {
    if (o_.fuse && o_.concatViews)
      views_ = planConcatViews(f_, [&](const Value* v) { return name(v); });
    std::vector<const Node*> compute;
    for (const auto& n : f_.nodes())
      if (patternOf(*n) != OpPattern::Buffer && !views_.inPlace.count(n.get()))
        compute.push_back(n.get());
    noteInPlaceEdges();
    if (o_.fuse) reserveEpilogues(compute);
    for (auto it = compute.rbegin(); it != compute.rend(); ++it) place(*it);
    if (o_.fuse) fuseSiblings();
    return finish(compute);
  }

 private:
  std::string name(const Value* v) const {
    auto it = names_.find(v);
    return it == names_.end() ? "%?" : it->second;
  }
  std::string name(const Node* n) const { return name(n->result()); }
  std::string opText(const Node* n) const { return std::string(opName(n->op())); }

  std::vector<const Node*> usersOf(const Node* n) const {
    std::vector<const Node*> users;
    for (size_t r = 0; r < n->numResults(); ++r)
      for (const Use& u : n->result(r)->uses())
        if (std::find(users.begin(), users.end(), u.user) == users.end()) users.push_back(u.user);
    return users;
  }

  bool isOutput(const Node* n) const {
    for (size_t r = 0; r < n->numResults(); ++r)
      if (n->result(r)->isFunctionOutput()) return true;
    return false;
  }

  int newGroup(const Node* n) {
    Group g;
    g.kind = kindFor(patternOf(*n));
    if (g.kind != KernelKind::Loop) g.anchor = n;
    g.members.insert(n);
    groups_.push_back(std::move(g));
    int id = static_cast<int>(groups_.size()) - 1;
    groupsOf_[n].push_back(id);
    indices_[{id, n}] = {0};
    return id;
  }

  void join(const Node* n, int g) {
    std::set<int> ids = indicesIn(g, n);
    groups_[g].recomputed += ids.size() - 1;
    indices_[{g, n}] = std::move(ids);
    groups_[g].members.insert(n);
    groupsOf_[n].push_back(g);
  }

  // The distinct indices at which kernel `g` would compute `p` per element of its iteration
  // space (index 0: the kernel's own). An elementwise user computes its operands at its own
  // indices; an injective user (reshape, transpose, slice, concatenate, ...) maps each of them to
  // another. The lowering writes p's expression once per index, so data movement that branches
  // and joins (channel shuffles through splits and concatenations) doubles it at every step.
  std::set<int> indicesIn(int g, const Node* p) {
    std::set<int> ids;
    for (const Node* u : usersOf(p)) {
      if (!groups_[g].members.count(u)) {
        ids.insert(0);  // stored for another kernel, at the kernel's own index
        continue;
      }
      const std::set<int>& at = indices_[{g, u}];
      if (patternOf(*u) != OpPattern::Injective) {
        ids.insert(at.begin(), at.end());
        continue;
      }
      for (size_t i = 0; i < u->numOperands(); ++i) {
        if (u->operand(i)->def() != p) continue;
        for (int id : at) {
          auto [it, added] = mappedIndex_.try_emplace({u, i, id}, nextIndex_);
          if (added) ++nextIndex_;
          ids.insert(it->second);
        }
      }
    }
    if (isOutput(p)) ids.insert(0);
    return ids;
  }

  // Why kernel `g` should store `p` rather than compute it at more indices; "" when it may.
  std::string indexBound(int g, const Node* p) {
    size_t n = indicesIn(g, p).size();
    size_t total = groups_[g].recomputed + n - 1;
    if (total <= kMaxRecomputed) return "";
    return name(p) + " would be computed at " + std::to_string(n) +
           " different indices per element of this kernel, which would then compute " +
           std::to_string(total) + " values again per element (at most " +
           std::to_string(kMaxRecomputed) + "): stored";
  }

  // Whether `members` stays convex (no path leaves it and comes back) when `extra` is added: a
  // kernel must be able to run after everything it reads and before everything that reads it.
  bool convexWith(const std::set<const Node*>& members, const std::set<const Node*>& extra) const {
    if (reach_->available()) return reach_->convex(members, extra);
    std::set<const Node*> all = members;
    all.insert(extra.begin(), extra.end());
    int last = 0;
    for (const Node* m : all) last = std::max(last, order_.at(m));
    std::vector<const Node*> work;
    std::set<const Node*> seen;
    for (const Node* m : all)
      for (const Node* u : usersOf(m))
        if (!all.count(u) && seen.insert(u).second) work.push_back(u);
    while (!work.empty()) {
      const Node* n = work.back();
      work.pop_back();
      if (order_.at(n) > last) continue;  // program order is topological: no way back
      for (const Node* u : usersOf(n)) {
        if (all.count(u)) return false;
        if (seen.insert(u).second) work.push_back(u);
      }
    }
    return true;
  }

  // Why a transpose `p` stays out of the row op `anchor` (softmax, log_softmax, layer_norm) that
  // reads it, where it moves another axis into the rows' contiguous one: the row op would read
  // each element of its rows from another cache line; a transpose of its own runs in blocks
  // (kernel::blockTransposes) and the row op then reads its rows in order. "" where it may fuse.
  std::string stridedRowReason(const Node* anchor, const Node* p) const {
    const OpCode op = anchor->op();
    if (p->op() != OpCode::Transpose || anchor->operand(0) != p->result() ||
        (op != OpCode::Softmax && op != OpCode::LogSoftmax && op != OpCode::LayerNorm))
      return "";
    const std::vector<int64_t> perm = p->attrInts("permutation");
    const std::vector<Dim>& in = p->operand(0)->type().dims();
    const auto rank = static_cast<int64_t>(perm.size());
    // The axis along a row: softmax's own, a layer norm's last (its rows span [axis, rank)).
    int64_t row = op == OpCode::LayerNorm ? rank - 1 : anchor->attrInt("axis");
    if (row < 0) row += rank;
    if (row < 0 || row >= rank || in.size() != perm.size()) return "";
    int64_t stride = 1;
    for (size_t d = static_cast<size_t>(perm[static_cast<size_t>(row)]) + 1; d < in.size(); ++d)
      stride *= in[d].isStatic() ? in[d].value() : 1;
    if (stride < 16) return "";  // rows whose elements share cache lines
    return opText(anchor) + " would read its rows through the transpose " + std::to_string(stride) +
           " elements apart (a cache line each): stored, in blocks";
  }

  // Whether the elementwise or injective producer `p` can be computed inside kernel `g`; the
  // reason it cannot otherwise.
  std::string acceptsProducer(int g, const Node* p, const std::vector<const Node*>& users) const {
    const Group& G = groups_[g];
    if (p->op() == OpCode::Concatenate && p->numOperands() > kMaxInlinedConcatOperands)
      return opText(p) + " of " + std::to_string(p->numOperands()) +
             " operands, computed inside this kernel, would select among them at every element "
             "(a loop splits into at most " +
             std::to_string(kMaxInlinedConcatOperands) +
             " pieces): stored, one loop nest per operand";
    switch (G.kind) {
      case KernelKind::Loop: return "";
      case KernelKind::Reduction:
        if (G.anchor->op() == OpCode::ReduceWindow) {
          auto win = G.anchor->attrInts("window_dimensions");
          auto str = G.anchor->attrInts("window_strides", std::vector<int64_t>(win.size(), 1));
          double factor = 1;
          for (size_t i = 0; i < win.size() && i < str.size(); ++i)
            factor *= std::max(1.0, static_cast<double>(win[i]) / static_cast<double>(str[i]));
          if (factor > 1 && patternOf(*p) == OpPattern::Elementwise) {
            char buf[128];
            std::snprintf(buf, sizeof buf,
                          "the pooling windows overlap: each input element would be computed "
                          "%.2f times",
                          factor);
            return buf;
          }
        }
        return stridedRowReason(G.anchor, p);
      case KernelKind::Contraction:
      case KernelKind::Attention: {
        bool feedsAnchor = std::find(users.begin(), users.end(), G.anchor) != users.end();
        if (!feedsAnchor && p->op() == OpCode::BroadcastInDim) return "";
        if (feedsAnchor)
          return G.kind == KernelKind::Attention
                     ? "attention reads q, k and v from memory"
                     : "the library " + opText(G.anchor) +
                           " reads its operands from memory (no prologue fusion)";
        return "the library epilogue reads its extra operands from memory";
      }
      case KernelKind::Opaque: return opText(G.anchor) + " is a kernel of its own";
      // Custom kernels form after this pass, from the planned kernels (custom_fusion.h).
      case KernelKind::Custom: return "a custom kernel takes no producers";
    }
    return "unknown kernel kind";
  }

  // Whether kernel `g` (a loop kernel consuming `p`) can become the epilogue of `p`; the reason it
  // cannot otherwise.
  std::string epilogueReason(const Node* p, int g) const {
    const Group& G = groups_[g];
    if (G.kind != KernelKind::Loop)
      return "the consumer kernel is a " + std::string(kernelKindName(G.kind)) + " kernel";
    const TensorType& shape = p->result()->type();
    bool library = patternOf(*p) == OpPattern::Contraction;
    // Members that depend on p inside the group.
    std::set<const Node*> dependent;
    std::vector<const Node*> sorted(G.members.begin(), G.members.end());
    std::sort(sorted.begin(), sorted.end(),
              [&](const Node* a, const Node* b) { return order_.at(a) < order_.at(b); });
    for (const Node* m : sorted) {
      for (const Value* v : m->operands())
        if (v->def() == p || dependent.count(v->def())) dependent.insert(m);
    }
    for (const Node* m : sorted) {
      OpPattern mp = patternOf(*m);
      if (mp == OpPattern::Injective) {
        if (m->op() == OpCode::BroadcastInDim && !dependent.count(m)) continue;
        return name(m) + " (" + opText(m) +
               ") moves data; an epilogue works on the result in place";
      }
      if (m->result()->type().dims() != shape.dims())
        return name(m) + " (" + opText(m) + ") has another shape than the " + opText(p) +
               " result (" + m->result()->type().str() + " vs " + shape.str() + ")";
      if (library && !isLibraryEpilogueOp(m->op()))
        return name(m) + " (" + opText(m) + ") is not an epilogue op of the library " + opText(p);
      if (library && !dependent.count(m))
        return name(m) + " (" + opText(m) + ") does not depend on the " + opText(p) +
               " result; the library epilogue reads such values from memory";
    }
    return "";
  }

  void note(const Node* p, const Node* u, std::string how, std::string reason) {
    notes_[{p, u}] = EdgeNote{std::move(how), std::move(reason)};
  }

  std::string howIntoLoop(int g) const {
    switch (groups_[g].kind) {
      case KernelKind::Loop: return "loop";
      case KernelKind::Reduction: return "input";
      default: return "epilogue";
    }
  }

  // The edges into a concatenate in place: each producer stores its slice of the root's buffer.
  void noteInPlaceEdges() {
    for (const Node* c : views_.inPlace)
      for (const Value* v : c->operands()) {
        auto view = views_.views.find(v);
        if (!v->def() || views_.inPlace.count(v->def()) || view == views_.views.end()) continue;
        note(v->def(), c, "in place",
             "stores its slice of " + name(view->second.of) + " (element offset " +
                 std::to_string(view->second.offset) + ", row pitch " +
                 std::to_string(view->second.pitch) + ")");
      }
  }

  // Library epilogues first: the chain of single-use elementwise ops after each matrix product or
  // convolution (bias add, activation, residual add, SiLU) is kept for it, so that a reduction
  // further down (a layer norm after the residual add) does not take those ops as its input first.
  // The library applies them for free while it stores its result.
  void reserveEpilogues(const std::vector<const Node*>& compute) {
    for (const Node* c : compute) {
      if (patternOf(*c) != OpPattern::Contraction) continue;
      const Node* cur = c;
      while (!isOutput(cur)) {
        // SiLU, x * sigmoid(x): the library applies it as one post-op (swish).
        if (const auto [s, m] = siluOf(cur->result());
            m && m->result()->type().dims() == c->result()->type().dims() && !reserved_.count(m)) {
          if (isOutput(s)) break;
          reserved_[s] = c;
          reserved_[m] = c;
          cur = m;
          continue;
        }
        std::vector<const Node*> users = usersOf(cur);
        if (users.size() != 1 || cur->result()->uses().size() != 1) break;
        const Node* u = users[0];
        if (patternOf(*u) != OpPattern::Elementwise || !isLibraryEpilogueOp(u->op()) ||
            u->result()->type().dims() != c->result()->type().dims() || reserved_.count(u))
          break;
        reserved_[u] = c;
        cur = u;
      }
    }
  }

  // Decides where `p` goes. Its users have been placed already (reverse program order).
  void place(const Node* p) {
    std::map<int, std::vector<const Node*>> byGroup;
    for (const Node* u : usersOf(p))
      for (int g : groupsOf_[u]) byGroup[g].push_back(u);
    bool output = isOutput(p);
    if (!o_.fuse) {
      newGroup(p);
      for (const auto& [g, us] : byGroup)
        for (const Node* u : us) note(p, u, "", "fusion is off");
      return;
    }
    OpPattern pattern = patternOf(*p);
    if (pattern == OpPattern::Elementwise || pattern == OpPattern::Injective)
      return placeLoopProducer(p, pattern, byGroup, output);
    if (pattern == OpPattern::Opaque) {
      newGroup(p);
      for (const auto& [g, us] : byGroup)
        for (const Node* u : us) note(p, u, "", opText(p) + " is a kernel of its own");
      return;
    }
    // A reduction, contraction or attention: takes its consumer's kernel as its epilogue when
    // there is exactly one and it qualifies.
    std::string why;
    if (byGroup.size() == 1 && !output) {
      int g = byGroup.begin()->first;
      why = epilogueReason(p, g);
      if (why.empty()) {
        join(p, g);
        groups_[g].kind = kindFor(pattern);
        groups_[g].anchor = p;
        for (const Node* u : byGroup.begin()->second)
          note(p, u, "epilogue",
               "the consumer runs on the " + opText(p) + " result before it is stored");
        return;
      }
    } else if (byGroup.size() > 1) {
      why = name(p) + " is used by " + std::to_string(byGroup.size()) +
            " kernels; an epilogue needs a single consumer kernel";
    } else if (output) {
      why = name(p) + " is a function output and must be stored as computed";
    }
    newGroup(p);
    for (const auto& [g, us] : byGroup)
      for (const Node* u : us) note(p, u, "", why);
  }

  void placeLoopProducer(const Node* p, OpPattern pattern,
                         const std::map<int, std::vector<const Node*>>& byGroup, bool output) {
    std::vector<int> accepting;
    std::map<int, std::string> refused;
    auto reservedFor = reserved_.find(p);
    // A node kept for a library epilogue joins only kernels made of the same epilogue.
    auto keptElsewhere = [&](int g) {
      if (reservedFor == reserved_.end()) return false;
      for (const Node* m : groups_[g].members) {
        auto r = reserved_.find(m);
        if ((r == reserved_.end() || r->second != reservedFor->second) &&
            m->op() != OpCode::BroadcastInDim)
          return true;
      }
      return false;
    };
    for (const auto& [g, us] : byGroup) {
      std::string r = acceptsProducer(g, p, us);
      if (r.empty()) r = indexBound(g, p);
      if (r.empty() && keptElsewhere(g))
        r = name(p) + " is kept for the epilogue of " + name(reservedFor->second) + " (" +
            opText(reservedFor->second) + "), which applies it while storing its result";
      if (r.empty()) accepting.push_back(g);
      else refused[g] = r;
    }
    // Injective ops are index arithmetic: computed again in every consumer kernel, when all of
    // them can take it and nothing else needs it stored.
    if (pattern == OpPattern::Injective && refused.empty() && !output && !accepting.empty()) {
      bool several = accepting.size() > 1;
      for (int g : accepting) {
        join(p, g);
        for (const Node* u : byGroup.at(g))
          note(p, u, several ? "recompute" : howIntoLoop(g),
               several ? opText(p) + " is index arithmetic: recomputed in each of its " +
                             std::to_string(accepting.size()) + " consumer kernels"
                       : "computed inside the consumer's loop");
      }
      return;
    }
    // Otherwise the producer joins one consumer kernel (the first that stays convex); when it has
    // other consumers, that kernel also stores it for them (multi-output).
    int target = -1;
    for (int g : accepting) {
      if (convexWith(groups_[g].members, {p})) {
        target = g;
        break;
      }
      refused[g] = "fusing " + name(p) +
                   " into this kernel would make it depend on itself "
                   "through another kernel";
    }
    bool multi = byGroup.size() > 1 || output;
    if (target < 0) newGroup(p);
    else join(p, target);
    for (const auto& [g, us] : byGroup) {
      for (const Node* u : us) {
        if (g == target) {
          note(p, u, multi ? "multi-output" : howIntoLoop(g),
               multi ? "computed inside the consumer's loop and also stored for its other users"
                     : "computed inside the consumer's loop");
        } else if (refused.count(g)) {
          note(p, u, "", refused[g]);
        } else {
          note(p, u, "",
               name(p) + " is computed in another consumer's kernel and stored (multi-output); "
                         "this kernel reads it");
        }
      }
    }
  }

  // The iteration space of a loop or reduction kernel: the anchor's input for a reduction, the
  // last op's result for a loop.
  const TensorType* iterationSpace(const Group& g) const {
    if (g.kind == KernelKind::Reduction) return &g.anchor->operand(0)->type();
    const Node* last = nullptr;
    for (const Node* m : g.members)
      if (!last || order_.at(m) > order_.at(last)) last = m;
    return last ? &last->result()->type() : nullptr;
  }

  // Sibling fusion: loop kernels of the same iteration space that read the same large input
  // become one kernel that reads it once.
  void fuseSiblings() {
    bool changed = true;
    while (changed) {
      changed = false;
      std::map<const Value*, std::vector<int>> readers;
      for (size_t g = 0; g < groups_.size(); ++g) {
        const Group& G = groups_[g];
        // Loop kernels only: a kernel with two reductions needs a multi-reduction lowering,
        // which the kernel IR lowering does not have yet.
        if (!G.alive || G.kind != KernelKind::Loop) continue;
        std::set<const Value*> ins;
        for (const Node* m : G.members)
          for (const Value* v : m->operands())
            if (!G.members.count(v->def())) ins.insert(v);
        for (const Value* v : ins) readers[v].push_back(static_cast<int>(g));
      }
      // In the function's order, not the values' addresses: the plan and its listing must not
      // depend on where the heap put the nodes.
      std::vector<std::pair<std::pair<size_t, size_t>, const Value*>> ordered;
      for (const auto& [v, gs] : readers) ordered.push_back({positionOf(v), v});
      std::sort(ordered.begin(), ordered.end());
      for (const auto& [at, v] : ordered) {
        const std::vector<int>& gs = readers[v];
        if (gs.size() < 2 || bytesOf(*v) < o_.minSiblingBytes) continue;
        for (size_t i = 0; i < gs.size() && !changed; ++i)
          for (size_t j = i + 1; j < gs.size() && !changed; ++j)
            changed = trySiblings(v, gs[i], gs[j]);
        if (changed) break;
      }
    }
  }

  // A value's place in the function: its node's position and its result index.
  std::pair<size_t, size_t> positionOf(const Value* v) {
    if (positions_.empty())
      for (const auto& n : f_.nodes()) positions_.emplace(n.get(), positions_.size());
    return {positions_.at(v->def()), v->index()};
  }

  bool trySiblings(const Value* shared, int a, int b) {
    Group& A = groups_[a];
    Group& B = groups_[b];
    if (A.kind != B.kind) return false;
    const TensorType* sa = iterationSpace(A);
    const TensorType* sb = iterationSpace(B);
    if (!sa || !sb || sa->dims() != sb->dims()) return false;
    if (!convexWith(A.members, B.members)) return false;
    const Node* ua = nullptr;
    const Node* ub = nullptr;
    for (const Use& u : shared->uses()) {
      if (A.members.count(u.user) && !ua) ua = u.user;
      if (B.members.count(u.user) && !ub) ub = u.user;
    }
    for (const Node* m : B.members) {
      A.members.insert(m);
      auto& gs = groupsOf_[m];
      std::replace(gs.begin(), gs.end(), b, a);
    }
    B.alive = false;
    B.members.clear();
    siblings_.push_back(Decision{ua, ub, true, "sibling",
                                 "both read " + name(shared) + " (" + bytesText(bytesOf(*shared)) +
                                     ") over " + sa->str() + ": one pass over it"});
    return true;
  }

  FusionPlan finish(const std::vector<const Node*>& compute) {
    FusionPlan plan;
    for (const auto& n : f_.nodes())
      for (size_t r = 0; r < n->numResults(); ++r)
        if (!n->result(r)->type().isStatic()) plan.symbolic = true;
    // Kernels from live groups, in dependency order (Kahn's algorithm over stored values).
    std::vector<int> live;
    for (size_t g = 0; g < groups_.size(); ++g)
      if (groups_[g].alive) live.push_back(static_cast<int>(g));
    std::map<int, Kernel> kernels;
    std::map<const Value*, int> storedBy;
    for (int g : live) {
      const Group& G = groups_[g];
      Kernel k;
      k.kind = G.kind;
      k.nodes.assign(G.members.begin(), G.members.end());
      std::sort(k.nodes.begin(), k.nodes.end(),
                [&](const Node* x, const Node* y) { return order_.at(x) < order_.at(y); });
      k.anchor = G.anchor ? G.anchor : k.nodes.back();
      for (const Node* m : k.nodes) {
        k.flops += flopsOf(*m);
        for (const Value* v : m->operands())
          if (!G.members.count(v->def()) &&
              std::find(k.inputs.begin(), k.inputs.end(), v) == k.inputs.end())
            k.inputs.push_back(v);
        for (size_t r = 0; r < m->numResults(); ++r) {
          const Value* v = m->result(r);
          bool stored = v->isFunctionOutput();
          for (const Use& u : v->uses()) {
            if (views_.inPlace.count(u.user)) stored = true;  // into its slice
            for (int h : groupsOf_[u.user])
              if (!groups_[h].members.count(m)) stored = true;
          }
          if (stored) {
            k.outputs.push_back(v);
            storedBy[v] = g;
          }
        }
      }
      for (const Value* v : k.inputs) k.bytesRead += bytesOf(*v);
      for (const Value* v : k.outputs) k.bytesWritten += bytesOf(*v);
      kernels[g] = std::move(k);
    }
    std::map<int, std::set<int>> deps;
    for (auto& [g, k] : kernels)
      for (const Value* v : k.inputs) {
        auto it = storedBy.find(v);
        if (it != storedBy.end() && it->second != g) deps[g].insert(it->second);
        // A concatenate in place is complete when the kernels storing its slices have run.
        if (auto w = views_.writers.find(v); w != views_.writers.end())
          for (const Value* slice : w->second)
            if (auto s = storedBy.find(slice); s != storedBy.end() && s->second != g)
              deps[g].insert(s->second);
      }
    std::map<int, int> newId;
    while (newId.size() < kernels.size()) {
      // The ready kernel whose first op comes first, so the order follows the program.
      int best = -1;
      for (auto& [g, k] : kernels) {
        if (newId.count(g)) continue;
        bool ready =
            std::all_of(deps[g].begin(), deps[g].end(), [&](int d) { return newId.count(d) > 0; });
        if (ready &&
            (best < 0 || order_.at(k.nodes.front()) < order_.at(kernels[best].nodes.front())))
          best = g;
      }
      KILN_CHECK(best >= 0, "fusion: the kernels depend on each other in a cycle");
      newId[best] = static_cast<int>(plan.kernels.size());
      kernels[best].id = newId[best];
      plan.kernels.push_back(kernels[best]);
    }
    for (Kernel& k : plan.kernels) {
      for (const Node* n : k.nodes) plan.kernelsOf[n].push_back(k.id);
      if (k.kind != KernelKind::Loop && k.kind != KernelKind::Reduction)
        k.postOps = planPostOps(k, o_.epilogue, [&](const Value* v) { return name(v); });
    }
    // Decisions on every edge between compute ops, from the final kernels.
    for (const Node* p : compute) {
      for (const Node* u : usersOf(p)) {
        bool fused = true;
        for (int h : groupsOf_[u])
          if (!groups_[h].members.count(p)) fused = false;
        const EdgeNote& n = notes_[{p, u}];
        Decision d{p, u, fused, fused ? n.how : "", n.reason};
        if (fused && d.how.empty()) {
          d.how = "sibling";
          d.reason = "the kernels were merged as siblings";
        }
        if (!fused && d.reason.empty())
          d.reason = "no rule fuses " + opText(p) + " into " + opText(u);
        plan.decisions.push_back(std::move(d));
      }
      for (const Value* v : p->operands()) plan.bytesUnfused += bytesOf(*v);
      for (size_t r = 0; r < p->numResults(); ++r) plan.bytesUnfused += bytesOf(*p->result(r));
    }
    for (Decision& d : siblings_) plan.decisions.push_back(std::move(d));
    plan.concats = std::move(views_);
    plan.storesAlongsideReductions = o_.storesAlongsideReductions;
    plan.sortRows = o_.sortRows;
    if (o_.fuse)
      planCustomFusions(
          o_.custom, [&](const Value* v) { return name(v); }, plan);
    return plan;
  }

  const Function& f_;
  const FusionOptions& o_;
  std::map<const Node*, int> order_;
  std::unique_ptr<Reachability> reach_;  // of order_'s nodes
  std::map<const Value*, std::string> names_;
  std::vector<Group> groups_;
  std::map<const Node*, std::vector<int>> groupsOf_;
  std::map<std::pair<const Node*, const Node*>, EdgeNote> notes_;
  std::vector<Decision> siblings_;
  std::map<const Node*, size_t> positions_;  // positionOf's
  ConcatViews views_;
  std::map<const Node*, const Node*> reserved_;  // epilogue op -> its contraction
  // indicesIn's record: the indices of each member of each kernel, and the index an injective
  // user's operand gets for each of the user's.
  std::map<std::pair<int, const Node*>, std::set<int>> indices_;
  std::map<std::tuple<const Node*, size_t, int>, int> mappedIndex_;
  int nextIndex_ = 1;
};

}  // namespace

FusionPlan planFusion(const Function& f, const FusionOptions& options) {
  return Planner(f, options).run();
}

std::string bytesText(int64_t b) {
  char buf[32];
  if (b < 1024) return std::to_string(b) + " B";
  if (b < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

}  // namespace kiln::fusion
