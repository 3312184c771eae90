// Einsum: the equation is parsed into integer labels (ellipsis dims get labels of their own,
// right-aligned across operands); each operand first takes diagonals of repeated labels and sums
// labels nobody else needs, then operands are contracted pairwise with dot_general, and the
// result is transposed into the output order.
#include <algorithm>
#include <map>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

constexpr int kEllipsisBase = 1000;

struct Term {
  Value* v;
  std::vector<int> labels;  // one per dim of v
};

// Parses one term ("ab...c") of an operand of rank `rank` (-1 for the output, whose "..."
// stands for every ellipsis dim).
StatusOr<std::vector<int>> parseLabels(OpContext& c, const std::string& s, int64_t rank,
                                       int maxEllipsis) {
  bool hasEllipsis = false;
  size_t at = 0;
  std::vector<int> out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "...") == 0) {
      if (hasEllipsis) return c.err("an operand has two ellipses");
      hasEllipsis = true;
      at = out.size();
      i += 2;
      continue;
    }
    char ch = s[i];
    if (!std::isalpha(static_cast<unsigned char>(ch)))
      return c.err(std::string("bad label '") + ch + "'");
    out.push_back(static_cast<int>(ch));
  }
  int64_t e = hasEllipsis ? rank - static_cast<int64_t>(out.size()) : 0;
  if (rank >= 0 && (e < 0 || (!hasEllipsis && static_cast<int64_t>(out.size()) != rank)))
    return c.err("term '" + s + "' does not match rank " + std::to_string(rank));
  if (rank < 0) e = maxEllipsis;  // the output: every ellipsis dim
  std::vector<int> ell;
  for (int64_t k = 0; k < e; ++k)
    ell.push_back(kEllipsisBase + static_cast<int>(maxEllipsis - e + k));
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), ell.begin(), ell.end());
  return out;
}

// Takes the diagonal of a label that repeats in one term.
StatusOr<Term> diagonals(OpContext& c, Term t) {
  for (size_t i = 0; i < t.labels.size(); ++i)
    for (size_t j = i + 1; j < t.labels.size(); ++j) {
      if (t.labels[i] != t.labels[j]) continue;
      const Shape& d = t.v->type().dims();
      if (d[i] != d[j]) return c.err("repeated label has different extents");
      TensorType it(DType::I64, d);
      Value* mask = c.b.compare("eq", c.b.iota(it, static_cast<int64_t>(i)),
                                c.b.iota(it, static_cast<int64_t>(j)));
      Value* kept = c.b.select(mask, t.v, splat(c.b, t.v, 0));
      t.v = c.b.reduce(kept, {static_cast<int64_t>(j)}, "sum");
      ONNX_BUILT(c, t.v);
      t.labels.erase(t.labels.begin() + static_cast<std::ptrdiff_t>(j));
      return diagonals(c, t);
    }
  return t;
}

// Sums the labels of t that `needed` does not contain.
Value* sumUnneeded(OpContext& c, Term& t, const std::multiset<int>& needed) {
  std::vector<int64_t> axes;
  std::vector<int> kept;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (needed.count(t.labels[i])) kept.push_back(t.labels[i]);
    else axes.push_back(static_cast<int64_t>(i));
  }
  if (!axes.empty()) t.v = c.b.reduce(t.v, axes, "sum");
  t.labels = kept;
  return t.v;
}

// Broadcasts extent-1 dims of a shared label to the other operand's extent.
StatusOr<Term> stretch(OpContext& c, Term t, const Term& other) {
  Shape s = t.v->type().dims();
  bool changed = false;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    auto it = std::find(other.labels.begin(), other.labels.end(), t.labels[i]);
    if (it == other.labels.end()) continue;
    const Dim& o = other.v->type().dim(static_cast<size_t>(it - other.labels.begin()));
    if (s[i] != o && s[i].isStatic() && s[i].value() == 1) {
      s[i] = o;
      changed = true;
    }
  }
  if (changed) {
    t.v = c.b.broadcastTo(t.v, s);
    ONNX_BUILT(c, t.v);
  }
  return t;
}

StatusOr<Term> contract(OpContext& c, Term a, Term b, const std::multiset<int>& later) {
  KILN_ASSIGN_OR_RETURN(a, stretch(c, a, b));
  KILN_ASSIGN_OR_RETURN(b, stretch(c, b, a));
  DotDims d;
  std::vector<int> batch, freeA, freeB;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    auto it = std::find(b.labels.begin(), b.labels.end(), l);
    if (it == b.labels.end()) {
      freeA.push_back(l);
      continue;
    }
    auto j = static_cast<int64_t>(it - b.labels.begin());
    if (later.count(l)) {
      d.lhsBatch.push_back(static_cast<int64_t>(i));
      d.rhsBatch.push_back(j);
      batch.push_back(l);
    } else {
      d.lhsContracting.push_back(static_cast<int64_t>(i));
      d.rhsContracting.push_back(j);
    }
  }
  for (int l : b.labels)
    if (std::find(a.labels.begin(), a.labels.end(), l) == a.labels.end()) freeB.push_back(l);
  Term r{c.b.dotGeneral(a.v, b.v, d), batch};
  ONNX_BUILT(c, r.v);
  r.labels.insert(r.labels.end(), freeA.begin(), freeA.end());
  r.labels.insert(r.labels.end(), freeB.begin(), freeB.end());
  return r;
}

struct Equation {
  std::vector<Term> terms;  // one per input, diagonals taken
  std::vector<int> out;     // output labels
};

// Parses the equation against the inputs ("ij,jk->ik", with "..." and implicit outputs).
StatusOr<Equation> parseEquation(OpContext& c, const std::string& eq,
                                 const std::vector<Value*>& xs) {
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> sides;
  for (size_t p = 0;;) {
    size_t comma = lhs.find(',', p);
    sides.push_back(lhs.substr(p, comma - p));
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  if (sides.size() != xs.size())
    return c.err("the equation has " + std::to_string(sides.size()) + " terms for " +
                 std::to_string(xs.size()) + " inputs");
  int maxE = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t letters = 0;
    for (char ch : sides[i]) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    if (sides[i].find("...") != std::string::npos)
      maxE = std::max<int>(maxE,
                           static_cast<int>(xs[i]->type().rank() - static_cast<int64_t>(letters)));
  }
  Equation e;
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(auto labels, parseLabels(c, sides[i], xs[i]->type().rank(), maxE));
    KILN_ASSIGN_OR_RETURN(Term t, diagonals(c, Term{xs[i], labels}));
    e.terms.push_back(t);
  }
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(e.out, parseLabels(c, eq.substr(arrow + 2), -1, maxE));
    return e;
  }
  // Implicit output: ellipsis dims, then the labels seen once, alphabetically.
  std::map<int, int> count;
  for (const Term& t : e.terms)
    for (int l : t.labels) ++count[l];
  for (int k = 0; k < maxE; ++k) e.out.push_back(kEllipsisBase + k);
  for (auto [l, n] : count)
    if (n == 1 && l < kEllipsisBase) e.out.push_back(l);
  return e;
}

Status einsum(OpContext& c) {
  std::string eq;
  for (char ch : c.attrString("equation", ""))
    if (ch != ' ') eq += ch;
  std::vector<Value*> xs = c.allInputs();
  if (xs.empty()) return c.err("needs at least one input");
  KILN_RETURN_IF_ERROR(sameDType(c, xs));
  KILN_ASSIGN_OR_RETURN(Equation e, parseEquation(c, eq, xs));
  std::vector<Term>& terms = e.terms;
  // Sum labels nobody else needs, then contract left to right; a label stays while the output
  // or a later term needs it.
  for (size_t i = 0; i < terms.size(); ++i) {
    std::multiset<int> needed(e.out.begin(), e.out.end());
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) needed.insert(terms[j].labels.begin(), terms[j].labels.end());
    sumUnneeded(c, terms[i], needed);
    ONNX_BUILT(c, terms[i].v);
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::multiset<int> later(e.out.begin(), e.out.end());
    for (size_t j = i + 1; j < terms.size(); ++j)
      later.insert(terms[j].labels.begin(), terms[j].labels.end());
    KILN_ASSIGN_OR_RETURN(acc, contract(c, acc, terms[i], later));
    sumUnneeded(c, acc, later);
    ONNX_BUILT(c, acc.v);
  }
  std::vector<int64_t> perm;
  for (int l : e.out) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (it == acc.labels.end()) return c.err("output label is not in any input");
    perm.push_back(static_cast<int64_t>(it - acc.labels.begin()));
  }
  if (perm.size() != acc.labels.size()) return c.err("the output repeats a label");
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  c.setOutput(0, identity ? acc.v : c.b.transpose(acc.v, perm));
  return Status::ok();
}

}  // namespace

void addEinsumOps(OpTable& t) { t.add("Einsum", 12, einsum); }

}  // namespace kiln::onnx
