// Index simplification with loop bounds. See simplify.h.
#include "kernel/simplify.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::kernel {
namespace {

// A closed range [lo, hi] of an i64 expression.
struct Range {
  int64_t lo = 0, hi = 0;
};

bool isConst(const ExprRef& e) { return e->kind == Expr::Kind::Const && e->type == DType::I64; }
bool isBoolConst(const ExprRef& e) {
  return e->kind == Expr::Kind::Const && e->type == DType::Bool;
}

// a op b for the ends of two ranges, or nullopt when it overflows.
std::optional<int64_t> checked(BinaryOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case BinaryOp::Add: overflow = __builtin_add_overflow(a, b, &r); break;
    case BinaryOp::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
    case BinaryOp::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
    default: return std::nullopt;
  }
  if (overflow) return std::nullopt;
  return r;
}

class Simplifier {
 public:
  Kernel run(const Kernel& k) {
    for (const Symbol& sym : k.symbols) vars_[sym.name] = Range{sym.lo, sym.hi};
    Kernel out = k;
    out.body = stmt(k.body);
    return out;
  }

  // Whether every i64 expression of `s` and below (loop variables included) has a known range
  // within [lo, hi] for the loops' ranges.
  bool within(const Stmt& s, int64_t lo, int64_t hi, const std::vector<Symbol>& symbols) {
    for (const Symbol& sym : symbols) vars_[sym.name] = Range{sym.lo, sym.hi};
    return within(s, lo, hi);
  }

  bool within(const Stmt& s, int64_t lo, int64_t hi) {
    if (s.kind == Stmt::Kind::Reduce) return false;  // its variables have no scope here
    for (const ExprRef& e : {s.index, s.value, s.cond, s.extent, s.fromIndex})
      if (e && !exprWithin(e, lo, hi)) return false;
    if (s.kind == Stmt::Kind::Copy)  // its last elements
      for (const ExprRef& e : {s.index, s.fromIndex})
        if (!exprWithin(binary(BinaryOp::Add, e, intConst(s.lanes)), lo, hi)) return false;
    if (s.kind != Stmt::Kind::For) {
      for (const StmtRef& b : s.body)
        if (b && !within(*b, lo, hi)) return false;
      return true;
    }
    std::optional<Range> loop = loopRange(s.extent);
    if (!loop) return false;
    std::optional<Range> saved;
    if (auto it = vars_.find(s.var); it != vars_.end()) saved = it->second;
    vars_[s.var] = *loop;
    forget();
    bool ok = !s.body[0] || within(*s.body[0], lo, hi);
    if (saved) vars_[s.var] = *saved;
    else vars_.erase(s.var);
    forget();
    return ok;
  }

 private:
  StmtRef stmt(const StmtRef& s) {
    if (!s) return s;
    auto out = std::make_shared<Stmt>(*s);
    if (s->kind == Stmt::Kind::For) {
      out->extent = expr(s->extent);
      std::optional<Range> saved;
      auto it = vars_.find(s->var);
      if (it != vars_.end()) saved = it->second;
      if (std::optional<Range> loop = loopRange(out->extent)) vars_[s->var] = *loop;
      else vars_.erase(s->var);
      forget();
      for (StmtRef& b : out->body) b = stmt(b);
      if (saved) vars_[s->var] = *saved;
      else vars_.erase(s->var);
      forget();
      return out;
    }
    if (s->kind == Stmt::Kind::Reduce) return reduce(out);
    if (out->index) out->index = expr(out->index);
    if (out->fromIndex) out->fromIndex = expr(out->fromIndex);
    if (out->value) out->value = expr(out->value);
    if (out->cond) out->cond = expr(out->cond);
    for (StmtRef& b : out->body) b = stmt(b);
    return out;
  }

  // The index outside the reduction's loops, the value inside them (the variables are fresh).
  StmtRef reduce(std::shared_ptr<Stmt> out) {
    out->index = expr(out->index);
    for (size_t i = 0; i < out->vars.size(); ++i) {
      out->extents[i] = expr(out->extents[i]);
      if (std::optional<Range> loop = loopRange(out->extents[i])) vars_[out->vars[i]] = *loop;
    }
    forget();
    out->value = expr(out->value);
    for (const std::string& v : out->vars) vars_.erase(v);
    forget();
    return out;
  }

  // The range of a loop's variable: [0, extent) for the largest extent the symbols' ranges
  // allow; nullopt for a loop that never runs or an extent of unknown range.
  std::optional<Range> loopRange(const ExprRef& extent) const {
    std::optional<Range> n = range(extent);
    if (!n || n->hi <= 0) return std::nullopt;
    return Range{0, n->hi - 1};
  }

  // The memos hold results for the variable ranges in force; a loop scope changes them.
  void forget() {
    simplified_.clear();
    ranges_.clear();
    seen_.clear();
  }

  bool exprWithin(const ExprRef& e, int64_t lo, int64_t hi) {
    if (!seen_.insert(e.get()).second) return true;  // a shared node is checked once
    if (e->type == DType::I64) {
      std::optional<Range> r = range(e);
      if (!r || r->lo < lo || r->hi > hi) return false;
    }
    for (const ExprRef& a : e->args)
      if (!exprWithin(a, lo, hi)) return false;
    return true;
  }

  std::optional<Range> range(const ExprRef& e) const {
    if (e->type != DType::I64) return std::nullopt;
    auto it = ranges_.find(e);
    if (it != ranges_.end()) return it->second;
    std::optional<Range> r = computeRange(e);
    ranges_.emplace(e, r);
    return r;
  }

  std::optional<Range> computeRange(const ExprRef& e) const {
    switch (e->kind) {
      case Expr::Kind::Const: return Range{e->i, e->i};
      case Expr::Kind::Var: {
        auto it = vars_.find(e->name);
        if (it == vars_.end()) return std::nullopt;
        return it->second;
      }
      case Expr::Kind::Binary: break;
      default: return std::nullopt;
    }
    std::optional<Range> a = range(e->args[0]), b = range(e->args[1]);
    if (!a || !b) return std::nullopt;
    switch (e->binary) {
      case BinaryOp::Add:
      case BinaryOp::Sub:
      case BinaryOp::Mul: {
        int64_t as[2] = {a->lo, a->hi}, bs[2] = {b->lo, b->hi};
        std::optional<Range> r;
        for (int64_t x : as)
          for (int64_t y : bs) {
            // For a subtraction the extremes pair lo with hi, which the four products cover.
            std::optional<int64_t> v = checked(e->binary, x, y);
            if (!v) return std::nullopt;
            if (!r) r = Range{*v, *v};
            r->lo = std::min(r->lo, *v);
            r->hi = std::max(r->hi, *v);
          }
        return r;
      }
      case BinaryOp::Div:
        if (a->lo >= 0 && b->lo > 0) return Range{a->lo / b->hi, a->hi / b->lo};
        return std::nullopt;
      case BinaryOp::Rem:
        if (a->lo >= 0 && b->lo > 0) {
          if (a->hi < b->lo) return *a;
          return Range{0, std::min(a->hi, b->hi - 1)};
        }
        return std::nullopt;
      case BinaryOp::Min: return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      case BinaryOp::Max: return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      default: return std::nullopt;
    }
  }

  bool nonNegative(const ExprRef& e) const {
    std::optional<Range> r = range(e);
    return r && r->lo >= 0;
  }

  // The terms of a sum, each with the constant factor it is multiplied by; + is flattened and
  // a constant factor distributed over it ((a * 6 + b) * 64 -> a * 384 + b * 64).
  struct Term {
    ExprRef e;      // nullptr for a constant term
    int64_t c = 1;  // coefficient
  };
  static bool terms(const ExprRef& e, int64_t c, std::vector<Term>& out) {
    if (e->kind == Expr::Kind::Binary && e->binary == BinaryOp::Add)
      return terms(e->args[0], c, out) && terms(e->args[1], c, out);
    if (isConst(e)) {
      std::optional<int64_t> v = checked(BinaryOp::Mul, e->i, c);
      if (!v) return false;
      out.push_back({nullptr, *v});
      return true;
    }
    if (e->kind == Expr::Kind::Binary && e->binary == BinaryOp::Mul) {
      for (int k : {1, 0}) {
        if (!isConst(e->args[static_cast<size_t>(k)])) continue;
        std::optional<int64_t> v = checked(BinaryOp::Mul, e->args[static_cast<size_t>(k)]->i, c);
        if (!v) return false;
        return terms(e->args[static_cast<size_t>(1 - k)], *v, out);
      }
    }
    out.push_back({e, c});
    return true;
  }
  static std::vector<Term> terms(const ExprRef& e) {
    std::vector<Term> out;
    if (!terms(e, 1, out)) out = {{e, 1}};
    return out;
  }
  static ExprRef termExpr(const Term& t) {
    return t.e ? binary(BinaryOp::Mul, t.e, intConst(t.c)) : intConst(t.c);
  }
  static ExprRef sum(const std::vector<Term>& ts) {
    ExprRef s;
    for (const Term& t : ts) s = s ? binary(BinaryOp::Add, s, termExpr(t)) : termExpr(t);
    return s ? s : intConst(0);
  }

  // Splits the terms of `x` into those whose coefficient d divides (as their quotient) and the
  // rest; nullopt when the rest may be negative (the rewrites need it non-negative) or nothing
  // splits off.
  std::optional<std::pair<std::vector<Term>, std::vector<Term>>> split(const ExprRef& x,
                                                                       int64_t d) const {
    std::vector<Term> ts = terms(x), whole, rest;
    for (const Term& t : ts) {
      if (t.c % d == 0) whole.push_back({t.e, t.c / d});
      else rest.push_back(t);
    }
    if (whole.empty()) return std::nullopt;
    for (const Term& t : whole)
      if (!nonNegative(termExpr(t))) return std::nullopt;
    if (!rest.empty() && !nonNegative(sum(rest))) return std::nullopt;
    return std::make_pair(whole, rest);
  }

  // x as c * w + r with 1 < c < d, c dividing d, w >= 0 and 0 <= r < c: a flattened index over
  // dims whose inner extents multiply to c (i2 * 784 + (i0 * 28 + i1) with the parenthesised
  // part below 784). Takes the largest such c; nullopt when there is none.
  struct Factored {
    ExprRef w, r;
    int64_t c = 1;
  };
  std::optional<Factored> factorOut(const ExprRef& x, int64_t d) const {
    std::vector<Term> ts = terms(x);
    std::vector<int64_t> candidates;
    for (const Term& t : ts)
      if (t.e && t.c > 1) candidates.push_back(std::gcd(t.c, d));
    std::sort(candidates.rbegin(), candidates.rend());
    for (int64_t c : candidates) {
      if (c <= 1 || c >= d) continue;
      std::vector<Term> whole, rest;
      for (const Term& t : ts) {
        if (t.c % c == 0) whole.push_back({t.e, t.c / c});
        else rest.push_back(t);
      }
      bool ok = !whole.empty();
      for (const Term& t : whole) ok = ok && nonNegative(termExpr(t));
      std::optional<Range> r = rest.empty() ? Range{0, 0} : range(sum(rest));
      if (!ok || !r || r->lo < 0 || r->hi >= c) continue;
      return Factored{sum(whole), rest.empty() ? nullptr : sum(rest), c};
    }
    return std::nullopt;
  }

  ExprRef divide(const ExprRef& x, int64_t d) {
    std::optional<Range> r = range(x);
    if (!r || r->lo < 0) return binary(BinaryOp::Div, x, intConst(d));
    if (r->hi < d) return intConst(0);
    // x / a / b -> x / (a * b)
    if (x->kind == Expr::Kind::Binary && x->binary == BinaryOp::Div && isConst(x->args[1]) &&
        x->args[1]->i > 0 && nonNegative(x->args[0])) {
      if (auto ab = checked(BinaryOp::Mul, x->args[1]->i, d)) return divide(x->args[0], *ab);
    }
    // x % m / d -> x / d % (m / d) when d divides m (one spelling for a digit of a flat index)
    if (x->kind == Expr::Kind::Binary && x->binary == BinaryOp::Rem && isConst(x->args[1]) &&
        x->args[1]->i > d && x->args[1]->i % d == 0 && nonNegative(x->args[0]))
      return remainder(divide(x->args[0], d), x->args[1]->i / d);
    // (a * c) / d -> a / (d / c) when c divides d
    if (x->kind == Expr::Kind::Binary && x->binary == BinaryOp::Mul && isConst(x->args[1]) &&
        x->args[1]->i > 0 && d % x->args[1]->i == 0 && nonNegative(x->args[0]))
      return divide(x->args[0], d / x->args[1]->i);
    if (auto parts = split(x, d)) {
      ExprRef q = sum(parts->first);
      if (parts->second.empty()) return q;
      return binary(BinaryOp::Add, q, divide(sum(parts->second), d));
    }
    // (c * w + r) / d -> w / (d / c) when c divides d and 0 <= r < c
    if (auto f = factorOut(x, d)) return divide(f->w, d / f->c);
    return binary(BinaryOp::Div, x, intConst(d));
  }

  ExprRef remainder(const ExprRef& x, int64_t d) {
    std::optional<Range> r = range(x);
    if (!r || r->lo < 0) return binary(BinaryOp::Rem, x, intConst(d));
    if (r->hi < d) return x;
    // x % a % b -> x % b when b divides a
    if (x->kind == Expr::Kind::Binary && x->binary == BinaryOp::Rem && isConst(x->args[1]) &&
        x->args[1]->i > 0 && x->args[1]->i % d == 0 && nonNegative(x->args[0]))
      return remainder(x->args[0], d);
    if (auto parts = split(x, d)) {
      if (parts->second.empty()) return intConst(0);
      return remainder(sum(parts->second), d);
    }
    // (c * w + r) % d -> w % (d / c) * c + r when c divides d and 0 <= r < c
    if (auto f = factorOut(x, d)) {
      ExprRef high = binary(BinaryOp::Mul, remainder(f->w, d / f->c), intConst(f->c));
      return f->r ? binary(BinaryOp::Add, high, f->r) : high;
    }
    return binary(BinaryOp::Rem, x, intConst(d));
  }

  // y / b * (c * b) + y % b * c -> y * c (for y >= 0) among the terms of a sum, comparing the
  // quotient in its simplified form (so x / (a * b) pairs with x / a % b: a thread index split
  // into the dims of a flattened loop nest comes back whole); nullptr when no pair merges.
  // x / (a*D) * D + x / a % D -> x / a for a divisor D of positive range (a symbolic extent)
  // and a constant a >= 1 (the digits of a flat index over loops of symbolic extents): the terms
  // ts[j] (the remainder) and one with the same coefficient.
  bool mergeSymbolic(std::vector<Term>& ts, size_t j) {
    const ExprRef y = ts[j].e->args[0], d = ts[j].e->args[1];
    std::optional<Range> rd = range(d);
    if (!rd || rd->lo <= 0) return false;
    for (size_t i = 0; i < ts.size(); ++i) {
      const ExprRef t = ts[i].e;
      if (i == j || ts[i].c != ts[j].c || !t || t->kind != Expr::Kind::Binary ||
          t->binary != BinaryOp::Mul)
        continue;
      const ExprRef q = t->args[0] == d ? t->args[1] : t->args[1] == d ? t->args[0] : nullptr;
      if (!q || q->kind != Expr::Kind::Binary || q->binary != BinaryOp::Div ||
          !nonNegative(q->args[0]))
        continue;
      const std::optional<int64_t> a = multiplierOf(q->args[1], d);
      if (!a || *a < 1 || (*a == 1 ? q->args[0] : divide(q->args[0], *a)) != y) continue;
      ts[i] = {y, ts[j].c};
      ts.erase(ts.begin() + static_cast<std::ptrdiff_t>(j));
      return true;
    }
    return false;
  }

  // a when p is a * d or d * a for a constant a, 1 when p is d.
  static std::optional<int64_t> multiplierOf(const ExprRef& p, const ExprRef& d) {
    if (p == d) return 1;
    if (p->kind != Expr::Kind::Binary || p->binary != BinaryOp::Mul) return std::nullopt;
    if (p->args[1] == d && isConst(p->args[0])) return p->args[0]->i;
    if (p->args[0] == d && isConst(p->args[1])) return p->args[1]->i;
    return std::nullopt;
  }

  ExprRef mergeDivRem(const ExprRef& sumExpr) {
    std::vector<Term> ts = terms(sumExpr);
    bool merged = false;
    for (bool again = true; again;) {
      again = false;
      for (size_t j = 0; j < ts.size() && !again; ++j) {
        const ExprRef r = ts[j].e;
        if (!r || r->kind != Expr::Kind::Binary || r->binary != BinaryOp::Rem ||
            !nonNegative(r->args[0]))
          continue;
        if (!isConst(r->args[1])) {
          if (mergeSymbolic(ts, j)) merged = again = true;
          continue;
        }
        if (r->args[1]->i <= 0) continue;
        std::optional<int64_t> cb = checked(BinaryOp::Mul, ts[j].c, r->args[1]->i);
        if (!cb) continue;
        const ExprRef q = divide(r->args[0], r->args[1]->i);
        for (size_t i = 0; i < ts.size(); ++i) {
          if (i == j || ts[i].e != q || ts[i].c != *cb) continue;
          ts[i] = {r->args[0], ts[j].c};
          ts.erase(ts.begin() + static_cast<std::ptrdiff_t>(j));
          merged = again = true;
          break;
        }
      }
    }
    return merged ? sum(ts) : nullptr;
  }

  // Memoised by pointer: a subexpression shared in the DAG is simplified once.
  ExprRef expr(const ExprRef& e) {
    if (!e || e->args.empty()) return simplifyNode(e);
    auto it = simplified_.find(e);
    if (it != simplified_.end()) return it->second;
    ExprRef out = simplifyNode(e);
    simplified_.emplace(e, out);
    return out;
  }

  ExprRef simplifyNode(const ExprRef& e) {
    // A loop variable whose loop runs once is its only value.
    if (e && e->kind == Expr::Kind::Var) {
      std::optional<Range> r = range(e);
      return r && r->lo == r->hi ? intConst(r->lo) : e;
    }
    if (!e || e->args.empty()) return e;
    std::vector<ExprRef> args;
    bool changed = false;
    for (const ExprRef& a : e->args) {
      args.push_back(expr(a));
      changed |= args.back() != a;
    }
    if (e->kind == Expr::Kind::Binary && e->type == DType::I64 && isConst(args[1]) &&
        args[1]->i > 0) {
      if (e->binary == BinaryOp::Div) return divide(args[0], args[1]->i);
      if (e->binary == BinaryOp::Rem) return remainder(args[0], args[1]->i);
    }
    // min and max whose operands' ranges do not overlap pick one operand.
    if (e->kind == Expr::Kind::Binary && e->type == DType::I64 &&
        (e->binary == BinaryOp::Min || e->binary == BinaryOp::Max)) {
      std::optional<Range> a = range(args[0]), b = range(args[1]);
      if (a && b && a->hi <= b->lo) return e->binary == BinaryOp::Min ? args[0] : args[1];
      if (a && b && b->hi <= a->lo) return e->binary == BinaryOp::Min ? args[1] : args[0];
    }
    if (e->kind == Expr::Kind::Binary && e->type == DType::I64 && e->binary == BinaryOp::Add)
      if (ExprRef merged = mergeDivRem(binary(BinaryOp::Add, args[0], args[1]))) return merged;
    // Index comparisons the ranges decide, and the ands and selects they make trivial (the
    // bounds checks of a pad inside a loop that stays within them).
    if (e->kind == Expr::Kind::Binary && args[0]->type == DType::I64)
      if (std::optional<bool> c = compare(e->binary, args[0], args[1]))
        return intConst(*c ? 1 : 0, DType::Bool);
    if (e->kind == Expr::Kind::Binary && e->binary == BinaryOp::And && e->type == DType::Bool)
      for (int i = 0; i < 2; ++i)
        if (isBoolConst(args[static_cast<size_t>(i)]))
          return args[static_cast<size_t>(i)]->i ? args[static_cast<size_t>(1 - i)]
                                                 : args[static_cast<size_t>(i)];
    if (e->kind == Expr::Kind::Select && isBoolConst(args[0]))
      return args[0]->i ? args[1] : args[2];
    if (!changed) return e;
    return withArgs(e, std::move(args));
  }

  // a op b for i64 a, b when their ranges decide it.
  std::optional<bool> compare(BinaryOp op, const ExprRef& a, const ExprRef& b) const {
    std::optional<Range> x = range(a), y = range(b);
    if (!x || !y) return std::nullopt;
    switch (op) {
      case BinaryOp::Lt:
        if (x->hi < y->lo) return true;
        if (x->lo >= y->hi) return false;
        break;
      case BinaryOp::Le:
        if (x->hi <= y->lo) return true;
        if (x->lo > y->hi) return false;
        break;
      case BinaryOp::Gt:
        if (x->lo > y->hi) return true;
        if (x->hi <= y->lo) return false;
        break;
      case BinaryOp::Ge:
        if (x->lo >= y->hi) return true;
        if (x->hi < y->lo) return false;
        break;
      default: break;
    }
    return std::nullopt;
  }

  std::map<std::string, Range> vars_;
  std::unordered_map<ExprRef, ExprRef> simplified_;
  mutable std::unordered_map<ExprRef, std::optional<Range>> ranges_;
  std::unordered_set<const Expr*> seen_;
};

}  // namespace

Kernel simplifyIndices(const Kernel& k) { return Simplifier().run(k); }

bool indicesWithin(const Stmt& s, int64_t lo, int64_t hi, const std::vector<Symbol>& symbols) {
  return Simplifier().within(s, lo, hi, symbols);
}

}  // namespace kiln::kernel
