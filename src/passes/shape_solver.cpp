// The symbol solver behind specialize-shapes and propagate-shapes: a union-find over symbols,
// filled by walking the function until no new fact appears, then applied to every type.
#include "passes/shape_solver.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/verifier.h"

namespace kiln::shapes {
namespace {

class Solver {
 public:
  void see(const Dim& d) {
    for (const std::string& f : d.factors()) id(f);
  }
  void seeType(const TensorType& t) {
    for (const Dim& d : t.dims()) see(d);
  }
  bool knows(const std::string& s) const { return ids_.count(s) != 0; }
  bool progress() const { return progress_; }
  void resetProgress() { progress_ = false; }

  // Each symbol of d replaced by its class: its extent, or the class's name.
  Dim resolve(const Dim& d) const {
    if (d.isStatic()) return d;
    int64_t coefficient = d.coefficient();
    std::vector<std::string> factors;
    for (const std::string& f : d.factors()) {
      int r = find(ids_.at(f));
      if (value_[r]) coefficient *= *value_[r];
      else factors.push_back(names_[r]);
    }
    return Dim::product(coefficient, std::move(factors));
  }
  TensorType resolve(const TensorType& t) const {
    Shape s;
    for (const Dim& d : t.dims()) s.push_back(resolve(d));
    return t.withDims(std::move(s));
  }

  // Records a == b. `where` names the node for the error of a conflict. A product of symbols
  // equal to an extent determines its one symbol; other products give no fact.
  Status unify(const Dim& a, const Dim& b, const Node* where) {
    Dim ra = resolve(a), rb = resolve(b);
    if (ra == rb) return Status::ok();
    if (ra.isStatic() && rb.isStatic()) return conflict(a, b, ra, rb, where);
    if (ra.isStatic()) std::swap(ra, rb);
    if (rb.isStatic()) {
      if (ra.factors().size() != 1) return Status::ok();
      if (rb.value() % ra.coefficient() != 0) return conflict(a, b, ra, rb, where);
      return bind(ra.factors()[0], rb.value() / ra.coefficient(), where);
    }
    if (!ra.isSymbol() || !rb.isSymbol()) return Status::ok();
    int x = find(ids_.at(ra.symbolName())), y = find(ids_.at(rb.symbolName()));
    // The class keeps the name seen first, so parameters' symbols win over derived ones.
    if (y < x) std::swap(x, y);
    parent_[y] = x;
    progress_ = true;
    return Status::ok();
  }

  // Records symbol == extent; `where` (may be null) names the node that implies it.
  Status bind(const std::string& symbol, int64_t extent, const Node* where) {
    int r = find(id(symbol));
    if (value_[r] && *value_[r] != extent) {
      Status e = Status::error("symbol " + symbol + " must be both " + std::to_string(*value_[r]) +
                               " and " + std::to_string(extent));
      if (where) e.prefix(where->describe()).at(where->loc());
      return e;
    }
    if (!value_[r]) progress_ = true;
    value_[r] = extent;
    return Status::ok();
  }

 private:
  int id(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    int i = static_cast<int>(names_.size());
    ids_[s] = i;
    names_.push_back(s);
    parent_.push_back(i);
    value_.push_back(std::nullopt);
    return i;
  }
  int find(int i) const {
    while (parent_[i] != i) i = parent_[i];
    return i;
  }
  static Status conflict(const Dim& a, const Dim& b, const Dim& ra, const Dim& rb, const Node* n) {
    return Status::error(n->describe() + ": dimension " + a.str() + " (= " + ra.str() +
                             ") must equal " + b.str() + " (= " + rb.str() + ")",
                         n->loc());
  }

  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<int> parent_;
  std::vector<std::optional<int64_t>> value_;
  bool progress_ = false;
};

// reshape keeps the element count: cancel the symbols both sides share; one symbol left on a
// side is then determined by the other side (a static quotient, or another lone symbol).
Status deriveReshape(const Node& n, Solver& s) {
  TensorType x = s.resolve(n.operand(0)->type()), r = s.resolve(n.result()->type());
  std::vector<std::string> sx, sr;
  int64_t px = 1, pr = 1;
  auto split = [](const TensorType& t, int64_t& product, std::vector<std::string>& symbols) {
    for (const Dim& d : t.dims()) {
      product *= d.isStatic() ? d.value() : d.coefficient();
      symbols.insert(symbols.end(), d.factors().begin(), d.factors().end());
    }
  };
  split(x, px, sx);
  split(r, pr, sr);
  for (auto it = sx.begin(); it != sx.end();) {
    auto j = std::find(sr.begin(), sr.end(), *it);
    if (j == sr.end()) {
      ++it;
      continue;
    }
    sr.erase(j);
    it = sx.erase(it);
  }
  if (px == 0 || pr == 0) return Status::ok();
  auto solveOne = [&](const std::string& sym, int64_t mine, int64_t other) -> Status {
    if (other % mine != 0)
      return Status::error(n.describe() + ": no extent of " + sym + " makes " + x.str() + " and " +
                               r.str() + " hold the same number of elements",
                           n.loc());
    return s.bind(sym, other / mine, &n);
  };
  if (sx.size() == 1 && sr.empty()) return solveOne(sx[0], px, pr);
  if (sr.size() == 1 && sx.empty()) return solveOne(sr[0], pr, px);
  if (sx.size() == 1 && sr.size() == 1 && px == pr)
    return s.unify(Dim::symbol(sx[0]), Dim::symbol(sr[0]), &n);
  return Status::ok();
}

// A window that maps extent d to d: stride 1, no dilation of the input, and padding that makes up
// exactly for the (dilated) window.
bool keepsExtent(int64_t window, int64_t stride, int64_t baseDil, int64_t winDil, int64_t lo,
                 int64_t hi) {
  return stride == 1 && baseDil == 1 && lo + hi == (window - 1) * winDil;
}

Status deriveConvolution(const Node& n, Solver& s) {
  const TensorType &x = n.operand(0)->type(), &w = n.operand(1)->type(), &r = n.result()->type();
  auto dn = convDimensionNumbers(n.attrs(), x.rank());
  if (!dn) return Status::ok();
  size_t ns = dn->inputSpatial.size();
  auto get = [&](const char* a, int64_t fill) {
    return n.attrInts(a, std::vector<int64_t>(ns, fill));
  };
  auto strides = get("window_strides", 1), lo = get("padding_low", 0), hi = get("padding_high", 0),
       lhsDil = get("lhs_dilation", 1), rhsDil = get("rhs_dilation", 1);
  for (size_t i = 0; i < ns; ++i) {
    const Dim& k = w.dim(static_cast<size_t>(dn->kernelSpatial[i]));
    if (!k.isStatic() || !keepsExtent(k.value(), strides[i], lhsDil[i], rhsDil[i], lo[i], hi[i]))
      continue;
    KILN_RETURN_IF_ERROR(s.unify(x.dim(static_cast<size_t>(dn->inputSpatial[i])),
                                 r.dim(static_cast<size_t>(dn->outputSpatial[i])), &n));
  }
  return Status::ok();
}

Status deriveReduceWindow(const Node& n, Solver& s) {
  const TensorType &x = n.operand(0)->type(), &r = n.result()->type();
  size_t rank = static_cast<size_t>(x.rank());
  auto get = [&](const char* a, int64_t fill) {
    return n.attrInts(a, std::vector<int64_t>(rank, fill));
  };
  auto window = n.attrInts("window_dimensions"), strides = get("window_strides", 1),
       baseDil = get("base_dilations", 1), winDil = get("window_dilations", 1),
       lo = get("padding_low", 0), hi = get("padding_high", 0);
  for (size_t i = 0; i < rank && i < window.size(); ++i)
    if (keepsExtent(window[i], strides[i], baseDil[i], winDil[i], lo[i], hi[i]))
      KILN_RETURN_IF_ERROR(s.unify(x.dim(i), r.dim(i), &n));
  return Status::ok();
}

// Facts the type rules cannot state because they take these dims from the declared result type.
Status deriveDeclared(const Node& n, Solver& s) {
  const TensorType& r = n.result()->type();
  switch (n.op()) {
    case OpCode::Reshape: return deriveReshape(n, s);
    case OpCode::Convert:
      for (size_t i = 0; i < r.dims().size(); ++i)
        KILN_RETURN_IF_ERROR(s.unify(n.operand(0)->type().dim(i), r.dim(i), &n));
      return Status::ok();
    case OpCode::BroadcastInDim: {
      std::vector<int64_t> dims = n.attrInts("dims");
      const TensorType& x = n.operand(0)->type();
      for (size_t i = 0; i < dims.size(); ++i) {
        Dim from = s.resolve(x.dim(i));
        if (from.isStatic() && from.value() == 1) continue;
        KILN_RETURN_IF_ERROR(s.unify(x.dim(i), r.dim(static_cast<size_t>(dims[i])), &n));
      }
      return Status::ok();
    }
    case OpCode::Concatenate: {
      size_t axis = static_cast<size_t>(n.attrInt("dimension"));
      int64_t total = 0;
      for (Value* v : n.operands()) {
        Dim d = s.resolve(v->type().dim(axis));
        if (!d.isStatic()) return Status::ok();
        total += d.value();
      }
      return s.unify(r.dim(axis), Dim(total), &n);
    }
    case OpCode::Convolution: return deriveConvolution(n, s);
    case OpCode::ReduceWindow: return deriveReduceWindow(n, s);
    default: return Status::ok();
  }
}

// Runs the node's type rule on the resolved types and equates its results with the node's.
// A rule error is not reported here: bindings may still be incomplete; the final check reports.
Status deriveInferred(const Node& n, Solver& s) {
  std::vector<TensorType> operands, declared;
  for (Value* v : n.operands()) operands.push_back(s.resolve(v->type()));
  for (size_t i = 0; i < n.numResults(); ++i) declared.push_back(s.resolve(n.result(i)->type()));
  InferInput in{n.op(), operands, n.attrs(), declared};
  auto inferred = inferResultTypes(in);
  if (!inferred || inferred->size() != n.numResults()) return Status::ok();
  for (size_t i = 0; i < n.numResults(); ++i) {
    const TensorType& t = (*inferred)[i];
    if (t.rank() != n.result(i)->type().rank()) continue;
    for (size_t d = 0; d < t.dims().size(); ++d)
      KILN_RETURN_IF_ERROR(s.unify(n.result(i)->type().dim(d), t.dim(d), &n));
  }
  return Status::ok();
}

// Rewrites every type to its resolution; returns whether one changed.
bool apply(Function& f, const Solver& s) {
  bool changed = false;
  for (const auto& np : f.nodes()) {
    Node& n = *np;
    if (n.op() == OpCode::Slice) {
      // A slice of symbolic length is spelt limit = kMaxElements; a now-static one needs its value.
      std::vector<int64_t> limit = n.attrInts("limit");
      TensorType r = s.resolve(n.result()->type());
      for (size_t i = 0; i < limit.size(); ++i)
        if (limit[i] == kMaxElements && r.dim(i).isStatic()) limit[i] = r.dim(i).value();
      if (limit != n.attrInts("limit")) n.setAttr("limit", intsAttr(limit));
    }
    for (size_t i = 0; i < n.numResults(); ++i) {
      TensorType t = s.resolve(n.result(i)->type());
      if (t == n.result(i)->type()) continue;
      n.result(i)->setType(std::move(t));
      changed = true;
    }
  }
  return changed;
}

}  // namespace

StatusOr<bool> resolveFunctionShapes(Function& f, const Bindings& fixed) {
  Solver s;
  for (const auto& n : f.nodes())
    for (size_t i = 0; i < n->numResults(); ++i) s.seeType(n->result(i)->type());
  for (const auto& [symbol, extent] : fixed)
    if (s.knows(symbol)) KILN_RETURN_IF_ERROR(s.bind(symbol, extent, nullptr));
  // Each round that makes progress merges two classes or gives one an extent, so the number of
  // rounds is bounded by twice the number of symbols.
  for (;;) {
    s.resetProgress();
    for (const auto& n : f.nodes()) {
      if (n->op() == OpCode::Parameter || n->op() == OpCode::Constant) continue;
      KILN_RETURN_IF_ERROR(deriveDeclared(*n, s));
      KILN_RETURN_IF_ERROR(deriveInferred(*n, s));
    }
    if (!s.progress()) break;
  }
  bool changed = apply(f, s);
  if (!changed) return false;
  for (const auto& n : f.nodes()) {
    Status v = verifyNode(*n);
    if (!v) return v.prefix(n->describe() + " does not type-check with the resolved shapes");
  }
  return true;
}

}  // namespace kiln::shapes
