// Concatenations written in place. See concat_views.h.
#include "fusion/concat_views.h"

#include <algorithm>

#include "fusion/op_pattern.h"

namespace kiln::fusion {
namespace {

struct Leaf {
  const Value* value = nullptr;
  int64_t extent = 0;  // along the concatenated axis
};

size_t axisOf(const Node& c) { return static_cast<size_t>(c.attrInt("dimension")); }

// The elements of a row: the dims after the concatenated axis.
int64_t innerOf(const Node& c) {
  std::vector<int64_t> d = c.result()->type().staticDims();
  int64_t inner = 1;
  for (size_t i = axisOf(c) + 1; i < d.size(); ++i) inner *= d[i];
  return inner;
}

class ViewPlanner {
 public:
  ViewPlanner(const Function& f, const std::function<std::string(const Value*)>& name)
      : f_(f), name_(name) {
    int i = 0;
    for (const auto& n : f.nodes()) order_[n.get()] = i++;
  }

  ConcatViews run() {
    std::vector<const Node*> cands;
    for (const auto& n : f_.nodes())
      if (candidate(*n)) cands.push_back(n.get());
    for (const Node* c : cands) leaves_[c] = leavesOf(c);
    // The largest first (DenseNet's block concatenate before its prefixes), later ones first
    // among equals (an outer concatenate before the operands it nests).
    std::stable_sort(cands.begin(), cands.end(), [&](const Node* a, const Node* b) {
      if (leaves_[a].size() != leaves_[b].size()) return leaves_[a].size() > leaves_[b].size();
      return order_.at(a) > order_.at(b);
    });
    for (const Node* c : cands)
      if (!out_.inPlace.count(c)) decide(c);
    std::sort(out_.notes.begin(), out_.notes.end(), [&](const auto& a, const auto& b) {
      return order_.at(a.first) < order_.at(b.first);
    });
    return std::move(out_);
  }

 private:
  std::string name(const Value* v) const { return name_(v); }
  std::string name(const Node* n) const { return name_(n->result()); }
  static std::string op(const Node* n) { return std::string(opName(n->op())); }

  bool candidate(const Node& n) const {
    return n.op() == OpCode::Concatenate && n.numResults() == 1 && n.result()->type().isStatic() &&
           !n.result()->isFunctionOutput();
  }

  // Same axis, rank, dtype and extents off the axis: the two share a row structure.
  static bool sameFrame(const Node& a, const Node& b) {
    const TensorType &ta = a.result()->type(), &tb = b.result()->type();
    if (axisOf(a) != axisOf(b) || ta.dtype() != tb.dtype()) return false;
    std::vector<int64_t> da = ta.staticDims(), db = tb.staticDims();
    if (da.size() != db.size()) return false;
    for (size_t i = 0; i < da.size(); ++i)
      if (i != axisOf(a) && da[i] != db[i]) return false;
    return true;
  }

  // The operands of `c` with each single-use concatenate operand of the same frame expanded.
  std::vector<Leaf> leavesOf(const Node* c) const {
    std::vector<Leaf> out;
    for (const Value* v : c->operands()) {
      const Node* d = v->def();
      if (d && candidate(*d) && sameFrame(*d, *c) && v->uses().size() == 1) {
        std::vector<Leaf> inner = leavesOf(d);
        out.insert(out.end(), inner.begin(), inner.end());
      } else {
        out.push_back({v, v->type().staticDims()[axisOf(*c)]});
      }
    }
    return out;
  }

  // The first library node (contraction or attention) above `v` through elementwise ops: an
  // elementwise op that depends on one may run in its epilogue.
  const Node* libraryAbove(const Value* v) const {
    std::vector<const Node*> work;
    std::set<const Node*> seen;
    if (v->def()) work.push_back(v->def());
    while (!work.empty() && seen.size() < 256) {
      const Node* n = work.back();
      work.pop_back();
      if (!seen.insert(n).second) continue;
      OpPattern p = patternOf(*n);
      if (p == OpPattern::Contraction || p == OpPattern::Attention) return n;
      if (p != OpPattern::Elementwise) continue;
      for (const Value* o : n->operands())
        if (o->def()) work.push_back(o->def());
    }
    return nullptr;
  }

  // Why the producer of operand `v` cannot store it strided; "" when it can.
  std::string writerProblem(const Value* v) const {
    const Node* d = v->def();
    if (!d) return name(v) + " has no producer";
    if (d->op() == OpCode::Parameter || d->op() == OpCode::Constant)
      return name(v) + " is a " + op(d) + ": nothing computes it in place";
    if (v->isFunctionOutput()) return name(v) + " is a function output, stored on its own";
    OpPattern p = patternOf(*d);
    if (p == OpPattern::Opaque || p == OpPattern::Attention)
      return name(v) + " is computed by " + op(d) + ", a kernel of its own that writes dense rows";
    if (p == OpPattern::Injective)
      return name(v) + " is computed by " + op(d) +
             ", data movement the concatenate's own kernel does as well (no store to save)";
    return "";
  }

  // Why a reader of the strided value `v` cannot load it with the pitch; "" when all can. Every
  // reader outside `family` must be lowered to loops: not a library or opaque kernel, and not an
  // elementwise op that may join a library call's epilogue (which reads its operands dense).
  std::string readerProblem(const Value* v, const std::set<const Node*>& family) const {
    for (const Use& u : v->uses()) {
      const Node* r = u.user;
      if (family.count(r)) continue;
      OpPattern p = patternOf(*r);
      if (p == OpPattern::Injective || p == OpPattern::Reduction) continue;
      if (p != OpPattern::Elementwise)
        return name(v) + " is read by " + name(r) + " (" + op(r) +
               "), a library or opaque kernel that reads dense rows";
      for (const Value* o : r->operands()) {
        const Node* lib = o == v ? nullptr : libraryAbove(o);
        if (lib)
          return name(v) + " is read by " + name(r) + " (" + op(r) + "), which may run in the " +
                 "epilogue of " + name(lib) + " (" + op(lib) + "; its operands are read dense)";
      }
    }
    return "";
  }

  // Records `c` (a concatenate in place inside `root`, at `offset` elements) and the operands and
  // nested concatenates under it as views of `root`'s buffer.
  void assign(const Node* c, const Node* root, int64_t offset) {
    const int64_t inner = innerOf(*root);
    const int64_t pitch = root->result()->type().staticDims()[axisOf(*root)] * inner;
    out_.inPlace.insert(c);
    if (c != root)
      out_.views[c->result()] = {root->result(), offset,
                                 c->result()->type().staticDims()[axisOf(*c)] * inner, pitch};
    std::vector<const Value*>& writers = out_.writers[c->result()];
    for (const Leaf& l : leaves_.at(c)) writers.push_back(l.value);
    for (const Value* v : c->operands()) {
      const Node* d = v->def();
      int64_t extent = v->type().staticDims()[axisOf(*c)] * inner;
      if (d && leaves_.count(d) && sameFrame(*d, *c) && v->uses().size() == 1) {
        assign(d, root, offset);
        out_.notes.push_back({d, "in place: an operand of " + name(c) + ", a slice of " +
                                     name(root) + " (element offset " + std::to_string(offset) +
                                     ", row pitch " + std::to_string(pitch) + ")"});
      } else {
        out_.views[v] = {root->result(), offset, extent, pitch};
        owner_[v] = root;
      }
      offset += extent;
    }
  }

  // Where leaves(c) occur as a run in leaves(r), or -1.
  int64_t runIn(const Node* r, const Node* c) const {
    const std::vector<Leaf>& big = leaves_.at(r);
    const std::vector<Leaf>& small = leaves_.at(c);
    for (size_t i = 0; i + small.size() <= big.size(); ++i) {
      bool match = true;
      for (size_t j = 0; j < small.size() && match; ++j) match = big[i + j].value == small[j].value;
      if (match) return static_cast<int64_t>(i);
    }
    return -1;
  }

  void decide(const Node* c) {
    for (const Node* r : roots_) {
      int64_t at = sameFrame(*r, *c) ? runIn(r, c) : -1;
      if (at < 0) continue;
      std::string why = readerProblem(c->result(), out_.inPlace);
      if (!why.empty()) return refuse(c, why + "; it reads its operands' slices of " + name(r));
      int64_t offset = 0;
      for (int64_t i = 0; i < at; ++i) offset += leaves_.at(r)[static_cast<size_t>(i)].extent;
      assign(c, r, offset * innerOf(*r));
      const StoredView& v = out_.views.at(c->result());
      out_.notes.push_back({c, "in place: a slice of " + name(r) + " (element offset " +
                                   std::to_string(v.offset) + ", row pitch " +
                                   std::to_string(v.pitch) + ")"});
      return;
    }
    std::set<const Value*> seen;
    for (const Leaf& l : leaves_.at(c)) {
      if (auto o = owner_.find(l.value); o != owner_.end())
        return refuse(c, name(l.value) + " is already written into " + name(o->second) +
                             " at another place");
      if (!seen.insert(l.value).second) return refuse(c, name(l.value) + " appears twice");
      std::string why = writerProblem(l.value);
      if (why.empty()) why = readerProblem(l.value, {c});
      if (!why.empty()) return refuse(c, why);
    }
    roots_.push_back(c);
    assign(c, c, 0);
    out_.notes.push_back(
        {c, "in place: its " + std::to_string(leaves_.at(c).size()) +
                " operands store their slices of its buffer (row pitch " +
                std::to_string(c->result()->type().staticDims()[axisOf(*c)] * innerOf(*c)) + ")"});
  }

  void refuse(const Node* c, const std::string& why) {
    out_.notes.push_back({c, "not in place: " + why});
  }

  const Function& f_;
  const std::function<std::string(const Value*)>& name_;
  std::map<const Node*, int> order_;
  std::map<const Node*, std::vector<Leaf>> leaves_;
  std::map<const Value*, const Node*> owner_;  // operand -> the root it is written into
  std::vector<const Node*> roots_;
  ConcatViews out_;
};

}  // namespace

ConcatViews planConcatViews(const Function& f,
                            const std::function<std::string(const Value*)>& name) {
  return ViewPlanner(f, name).run();
}

std::string explainConcatViews(const ConcatViews& c,
                               const std::function<std::string(const Value*)>& name) {
  if (c.notes.empty()) return "";
  std::string out = "\nconcatenates written in place:\n";
  for (const auto& [n, note] : c.notes) out += "  " + name(n->result()) + ": " + note + "\n";
  return out;
}

}  // namespace kiln::fusion
