// Schedule passes. See schedule.h.
#include "kernel/schedule.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "kernel/schedule_util.h"
#include "kernel/simplify.h"

namespace kiln::kernel {
namespace detail {

StmtRef rewrite(const StmtRef& s, const std::function<StmtRef(StmtRef)>& f) {
  if (!s) return s;
  auto out = std::make_shared<Stmt>(*s);
  for (StmtRef& b : out->body) b = rewrite(b, f);
  return f(out);
}

StmtRef unwrap(StmtRef s) {
  while (s && s->kind == Stmt::Kind::Block && s->body.size() == 1) s = s->body[0];
  return s;
}

StmtRef perfectNest(const StmtRef& s, std::vector<StmtRef>& loops) {
  StmtRef cur = s;
  while (cur && cur->kind == Stmt::Kind::For) {
    loops.push_back(cur);
    cur = unwrap(cur->body[0]);
  }
  return cur;
}

StmtRef mapTopLevel(const StmtRef& body, const std::function<StmtRef(const StmtRef&)>& f) {
  if (!body) return body;
  if (body->kind == Stmt::Kind::Block || body->kind == Stmt::Kind::Alloc) {
    auto b = std::make_shared<Stmt>(*body);
    for (StmtRef& c : b->body) c = mapTopLevel(c, f);
    return b;
  }
  return f(body);
}

ExprRef replaceAll(const ExprRef& e, const std::unordered_map<const Expr*, ExprRef>& replace,
                   std::unordered_map<const Expr*, ExprRef>& memo) {
  auto r = replace.find(e.get());
  if (r != replace.end()) return r->second;
  auto m = memo.find(e.get());
  if (m != memo.end()) return m->second;
  ExprRef out = e;
  if (!e->args.empty()) {
    std::vector<ExprRef> args;
    bool changed = false;
    for (const ExprRef& a : e->args) {
      args.push_back(replaceAll(a, replace, memo));
      changed |= args.back() != a;
    }
    if (changed) out = withArgs(e, std::move(args));
  }
  memo.emplace(e.get(), out);
  return out;
}

StmtRef replaceInStmt(const StmtRef& s, const std::unordered_map<const Expr*, ExprRef>& replace) {
  std::unordered_map<const Expr*, ExprRef> memo;
  auto sub = [&](ExprRef& e) {
    if (e) e = replaceAll(e, replace, memo);
  };
  return rewrite(s, [&](StmtRef n) {
    sub(n->index);
    sub(n->fromIndex);
    sub(n->value);
    sub(n->cond);
    sub(n->extent);
    for (ExprRef& e : n->extents) sub(e);
    return n;
  });
}

bool writesAny(const StmtRef& s, const std::set<std::string>& buffers) {
  if (!s) return false;
  if ((s->kind == Stmt::Kind::Store || s->kind == Stmt::Kind::Reduce ||
       s->kind == Stmt::Kind::Copy) &&
      buffers.count(s->buffer))
    return true;
  if (s->kind == Stmt::Kind::Call) return true;  // a library call may write anything it names
  for (const StmtRef& b : s->body)
    if (writesAny(b, buffers)) return true;
  return false;
}

std::set<std::string> loadedBuffers(const ExprRef& e) {
  std::vector<ExprRef> loads;
  loadsIn(e, loads);
  std::set<std::string> out;
  for (const ExprRef& l : loads) out.insert(l->name);
  return out;
}

void loadsIn(const ExprRef& e, std::vector<ExprRef>& out) {
  std::set<const Expr*> seen;
  std::function<void(const ExprRef&)> walk = [&](const ExprRef& x) {
    if (!x || !seen.insert(x.get()).second) return;
    if (x->kind == Expr::Kind::Load) out.push_back(x);
    for (const ExprRef& a : x->args) walk(a);
  };
  walk(e);
}

}  // namespace detail
namespace {
using namespace detail;

Kernel rewriteKernel(const Kernel& k, const std::function<StmtRef(StmtRef)>& f) {
  Kernel out = k;
  if (k.kind != "opaque") out.body = rewrite(k.body, f);
  return out;
}

ExprRef substitute(const ExprRef& e, const std::string& v, const ExprRef& with) {
  std::unordered_map<const Expr*, ExprRef> memo;
  return replaceAll(e, {{var(v).get(), with}}, memo);
}

// Visits each distinct node of `e` once.
void visit(const ExprRef& e, const std::function<void(const Expr&)>& f,
           std::set<const Expr*>& seen) {
  if (!e || !seen.insert(e.get()).second) return;
  f(*e);
  for (const ExprRef& a : e->args) visit(a, f, seen);
}

bool anyNode(const ExprRef& e, const std::function<bool(const Expr&)>& pred) {
  bool found = false;
  std::set<const Expr*> seen;
  visit(
      e, [&](const Expr& x) { found = found || pred(x); }, seen);
  return found;
}

bool isTranscendental(const Expr& e) {
  if (e.kind == Expr::Kind::Binary) return e.binary == BinaryOp::Pow;
  if (e.kind != Expr::Kind::Unary) return false;
  switch (e.unary) {
    case UnaryOp::Exp:
    case UnaryOp::Expm1:
    case UnaryOp::Log:
    case UnaryOp::Log1p:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tan:
    case UnaryOp::Tanh:
    case UnaryOp::Erf:
    case UnaryOp::Sigmoid: return true;
    default: return false;
  }
}

// Whether some expression of `s` (or below it) contains `e`.
bool mentions(const StmtRef& s, const ExprRef& e) {
  if (!s) return false;
  auto has = [&](const ExprRef& x) {
    return x && anyNode(x, [&](const Expr& n) { return &n == e.get(); });
  };
  if (has(s->index) || has(s->value) || has(s->cond) || has(s->fromIndex)) return true;
  for (const StmtRef& b : s->body)
    if (mentions(b, e)) return true;
  return false;
}

StmtRef replaceIn(const StmtRef& s, const ExprRef& from, const ExprRef& to) {
  std::unordered_map<const Expr*, ExprRef> memo;
  std::unordered_map<const Expr*, ExprRef> replace = {{from.get(), to}};
  return rewrite(s, [&](StmtRef n) {
    if (n->index) n->index = replaceAll(n->index, replace, memo);
    if (n->fromIndex) n->fromIndex = replaceAll(n->fromIndex, replace, memo);
    if (n->value) n->value = replaceAll(n->value, replace, memo);
    if (n->cond) n->cond = replaceAll(n->cond, replace, memo);
    return n;
  });
}

// The loop variable of `s` when it is a loop or a one-loop Reduce of extent `n`.
std::optional<std::string> rowLoopVar(const StmtRef& s, const ExprRef& n) {
  if (s && s->kind == Stmt::Kind::For && s->extent == n) return s->var;
  if (s && s->kind == Stmt::Kind::Reduce && s->vars.size() == 1 && s->extents[0] == n)
    return s->vars[0];
  return std::nullopt;
}

std::optional<int64_t> strideAlong(const ExprRef& index, const std::string& v);

// What cacheRows keeps of the Reduce `r`'s value: all of it when it computes a transcendental
// function or loads one of `memory` (rows held in registers: cacheRowsIn); else a load that is
// not contiguous along the row (a layer norm over a transposed input), so that the passes after
// the first read the row contiguously; else null.
ExprRef cachedPart(const Stmt& r, const std::set<std::string>& memory) {
  if (anyNode(r.value, isTranscendental)) return r.value;
  for (const std::string& b : loadedBuffers(r.value))
    if (memory.count(b)) return r.value;
  ExprRef strided;
  std::set<const Expr*> seen;
  std::function<void(const ExprRef&)> find = [&](const ExprRef& e) {
    if (!e || strided || !seen.insert(e.get()).second) return;
    if (e->kind == Expr::Kind::Load) {
      std::optional<int64_t> st = strideAlong(e->args[0], r.vars[0]);
      if (st && *st != 0 && *st != 1) strided = e;
    }
    for (const ExprRef& a : e->args) find(a);
  };
  find(r.value);
  return strided;
}

// cacheRows on one block: each Reduce that qualifies, with the later loops and reductions.
StmtRef cacheRowsInBlock(StmtRef blk, int64_t maxElements, FreshNames& names,
                         const std::vector<Symbol>& symbols, const std::set<std::string>& memory,
                         std::set<std::string>* made = nullptr) {
  std::vector<StmtRef>& body = blk->body;
  struct Row {
    std::string name;
    DType type;
    int64_t size;
  };
  std::vector<Row> rows;
  for (size_t a = 0; a < body.size(); ++a) {
    const StmtRef r = body[a];  // copies: body[a] is replaced below
    if (!r || r->kind != Stmt::Kind::Reduce || r->vars.size() != 1) continue;
    const ExprRef n = r->extents[0];
    // A row of symbolic length is held at its largest.
    const std::optional<int64_t> size = upperBound(n, symbols);
    if (!size || *size < 2 || *size > maxElements) continue;
    const ExprRef part = cachedPart(*r, memory);
    if (!part) continue;
    std::set<std::string> reads = loadedBuffers(part);
    if (reads.count(r->buffer)) continue;
    std::string row;
    for (size_t b = a + 1; b < body.size(); ++b) {
      const StmtRef later = body[b];
      if (std::optional<std::string> v = rowLoopVar(later, n)) {
        ExprRef there = substitute(part, r->vars[0], var(*v));
        if (!writesAny(later, reads) && mentions(later, there)) {
          if (row.empty()) row = names.fresh("row");
          body[b] = replaceIn(later, there, load(row, there->type, var(*v)));
        }
      }
      if (writesAny(later, reads)) break;
    }
    if (row.empty()) continue;
    const StmtRef reduce = replaceIn(r, part, load(row, part->type, var(r->vars[0])));
    body[a] = block(
        {forLoop(r->vars[0], n, LoopKind::Serial, store(row, var(r->vars[0]), part)), reduce});
    rows.push_back({row, part->type, *size});
  }
  StmtRef out = blk;
  for (const Row& row : rows) {
    out = alloc(row.name, row.type, row.size, MemoryScope::Local, out);
    if (made) made->insert(row.name);
  }
  return out;
}

// The statements one execution of `s` runs (loops with non-constant extents count once, or
// with `symbols`, at their largest).
int64_t work(const StmtRef& s, const std::vector<Symbol>* symbols = nullptr) {
  if (!s) return 0;
  auto count = [symbols](const ExprRef& e) -> int64_t {
    if (e->kind == Expr::Kind::Const) return e->i;
    std::optional<int64_t> hi = symbols ? upperBound(e, *symbols) : std::nullopt;
    return hi ? *hi : 1;
  };
  switch (s->kind) {
    case Stmt::Kind::Store: return 1;
    case Stmt::Kind::Reduce: {
      int64_t n = 1;
      for (const ExprRef& e : s->extents) n *= count(e);
      return n;
    }
    case Stmt::Kind::For: return count(s->extent) * work(s->body[0], symbols);
    default: break;
  }
  int64_t n = 0;
  for (const StmtRef& b : s->body) n += work(b, symbols);
  return n;
}

// `scratch`: the scratch buffers declared around `s`. A loop that writes one stays serial: its
// iterations would share it (an accumulator updated by every iteration).
// work() as an expression of the kernel's symbols.
ExprRef workExpr(const StmtRef& s) {
  if (!s) return intConst(0);
  switch (s->kind) {
    case Stmt::Kind::Store: return intConst(1);
    case Stmt::Kind::Reduce: {
      ExprRef n = intConst(1);
      for (const ExprRef& e : s->extents) n = binary(BinaryOp::Mul, n, e);
      return n;
    }
    case Stmt::Kind::For: return binary(BinaryOp::Mul, s->extent, workExpr(s->body[0]));
    default: break;
  }
  ExprRef n = intConst(0);
  for (const StmtRef& b : s->body) n = binary(BinaryOp::Add, n, workExpr(b));
  return n;
}

// A loop whose work crosses the threshold only at some sizes of the kernel's symbols runs in
// parallel when this run's sizes make it: `if (work >= threshold)` (work an expression of the
// symbols) chooses between the parallel loop and the serial one.
StmtRef parallelizeTop(const StmtRef& s, int64_t threshold, std::set<std::string>& scratch,
                       const std::vector<Symbol>& symbols) {
  if (!s) return s;
  auto out = std::make_shared<Stmt>(*s);
  if (s->kind == Stmt::Kind::For) {
    if (s->loop != LoopKind::Serial || writesAny(s, scratch)) return out;
    if (work(s) >= threshold) {
      out->loop = LoopKind::Parallel;
    } else if (!symbols.empty() && work(s, &symbols) >= threshold) {
      out->loop = LoopKind::Parallel;
      return ifThen(binary(BinaryOp::Ge, workExpr(s), intConst(threshold)), out, s);
    }
    return out;
  }
  bool declares = s->kind == Stmt::Kind::Alloc && scratch.insert(s->buffer).second;
  for (StmtRef& b : out->body) b = parallelizeTop(b, threshold, scratch, symbols);
  if (declares) scratch.erase(s->buffer);
  return out;
}

bool onlyStores(const StmtRef& s) {
  if (!s) return true;
  if (s->kind == Stmt::Kind::Store) return true;
  if (s->kind != Stmt::Kind::Block) return false;
  for (const StmtRef& b : s->body)
    if (!onlyStores(b)) return false;
  return true;
}

// The constant stride of `index` along loop variable `v`, when `index` is affine in it.
std::optional<int64_t> strideAlong(const ExprRef& index, const std::string& v) {
  switch (index->kind) {
    case Expr::Kind::Const: return 0;
    case Expr::Kind::Var: return index->name == v ? 1 : 0;
    case Expr::Kind::Binary: {
      std::optional<int64_t> a = strideAlong(index->args[0], v);
      std::optional<int64_t> b = strideAlong(index->args[1], v);
      if (!a || !b) return std::nullopt;
      switch (index->binary) {
        case BinaryOp::Add: return *a + *b;
        case BinaryOp::Sub: return *a - *b;
        case BinaryOp::Mul:
          if (*a == 0 && *b == 0) return 0;
          if (*b == 0 && index->args[1]->kind == Expr::Kind::Const) return *a * index->args[1]->i;
          if (*a == 0 && index->args[0]->kind == Expr::Kind::Const) return *b * index->args[0]->i;
          return std::nullopt;
        default: break;
      }
      break;
    }
    default: break;
  }
  bool uses =
      anyNode(index, [&](const Expr& x) { return x.kind == Expr::Kind::Var && x.name == v; });
  return uses ? std::nullopt : std::optional<int64_t>(0);
}

bool readsContiguously(const ExprRef& value, const std::string& v) {
  return anyNode(value, [&](const Expr& x) {
    return x.kind == Expr::Kind::Load && strideAlong(x.args[0], v) == std::optional<int64_t>(1);
  });
}

// The Reduce `r` over its outer loops (all but the innermost) around `inner`.
StmtRef outerLoops(const Stmt& r, StmtRef inner) {
  for (size_t i = r.vars.size() - 1; i-- > 0;)
    inner = forLoop(r.vars[i], r.extents[i], LoopKind::Serial, inner);
  return inner;
}

// The Reduce `r` as L vector lanes over its innermost loop (a tail loop for n % L), then the
// lanes combined in order. A symbolic extent n gets both loops, with extents n / L and n % L.
StmtRef splitReduce(const StmtRef& r, int64_t L, FreshNames& names) {
  const std::string& v = r->vars.back();
  const ExprRef n = r->extents.back();
  const bool symbolic = n->kind != Expr::Kind::Const;
  const DType t = r->value->type;
  std::string lanes = names.fresh("lanes");
  auto update = [&](const ExprRef& lane, const ExprRef& j) {
    return store(lanes, lane,
                 reduceCombine(r->reduce, load(lanes, t, lane), substitute(r->value, v, j)));
  };
  const ExprRef whole = binary(BinaryOp::Div, n, intConst(L));
  const ExprRef tail = binary(BinaryOp::Rem, n, intConst(L));
  std::vector<StmtRef> accumulate;
  if (symbolic || n->i / L > 0) {
    std::string jo = names.fresh("j"), l = names.fresh("l");
    ExprRef j = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(jo), intConst(L)), var(l));
    accumulate.push_back(forLoop(jo, whole, LoopKind::Serial,
                                 forLoop(l, intConst(L), LoopKind::Vectorized, update(var(l), j))));
  }
  if (symbolic || n->i % L > 0) {
    std::string tv = names.fresh("t");
    ExprRef start = binary(BinaryOp::Mul, whole, intConst(L));
    accumulate.push_back(forLoop(tv, tail, LoopKind::Serial,
                                 update(var(tv), binary(BinaryOp::Add, start, var(tv)))));
  }
  std::string init = names.fresh("l"), merge = names.fresh("l");
  ExprRef acc = load(r->buffer, t, r->index);
  return alloc(lanes, t, L, MemoryScope::Local,
               block({forLoop(init, intConst(L), LoopKind::Vectorized,
                              store(lanes, var(init), reduceIdentity(r->reduce, t))),
                      outerLoops(*r, block(std::move(accumulate))),
                      forLoop(merge, intConst(L), LoopKind::Serial,
                              store(r->buffer, r->index,
                                    reduceCombine(r->reduce, acc, load(lanes, t, var(merge)))))}));
}

// Where a comparison of `v` with a constant inside `s` changes value, within (0, n): `v < c` and
// `v >= c` at c, `v <= c` and `v > c` at c + 1 (and the mirrored forms `c > v`, ...).
void comparisonPoints(const StmtRef& s, const std::string& v, int64_t n, std::set<int64_t>& out,
                      std::set<const Expr*>& seen) {
  if (!s) return;
  auto scan = [&](const Expr& x) {
    if (x.kind != Expr::Kind::Binary || x.args.size() != 2) return;
    const Expr& a = *x.args[0];
    const Expr& b = *x.args[1];
    bool lhs = a.kind == Expr::Kind::Var && a.name == v && b.kind == Expr::Kind::Const;
    bool rhs = b.kind == Expr::Kind::Var && b.name == v && a.kind == Expr::Kind::Const;
    if (!lhs && !rhs) return;
    int64_t c = lhs ? b.i : a.i, at = 0;
    switch (x.binary) {
      case BinaryOp::Lt:
      case BinaryOp::Ge: at = lhs ? c : c + 1; break;
      case BinaryOp::Le:
      case BinaryOp::Gt: at = lhs ? c + 1 : c; break;
      default: return;
    }
    if (at > 0 && at < n) out.insert(at);
  };
  for (const ExprRef& e : {s->index, s->value, s->cond})
    if (e) visit(e, scan, seen);
  for (const StmtRef& b : s->body) comparisonPoints(b, v, n, out, seen);
}

// Whether `s` declares a loop variable or a buffer (a copy of it would declare them twice).
bool declares(const StmtRef& s) {
  if (!s) return false;
  if (s->kind == Stmt::Kind::For || s->kind == Stmt::Kind::Alloc || s->kind == Stmt::Kind::Reduce ||
      s->kind == Stmt::Kind::Call)
    return true;
  for (const StmtRef& b : s->body)
    if (declares(b)) return true;
  return false;
}

// The loop `s` as consecutive loops over the ranges between `points`; the first keeps its
// variable, the others get fresh ones offset by their start.
StmtRef splitLoop(const StmtRef& s, const std::set<int64_t>& points, FreshNames& names) {
  std::vector<int64_t> ends(points.begin(), points.end());
  ends.push_back(s->extent->i);
  std::vector<StmtRef> pieces;
  int64_t lo = 0;
  for (int64_t hi : ends) {
    std::string v = lo == 0 ? s->var : names.fresh(s->var + "_");
    ExprRef at = lo == 0 ? var(v) : binary(BinaryOp::Add, var(v), intConst(lo));
    StmtRef body = lo == 0 ? s->body[0] : replaceIn(s->body[0], var(s->var), at);
    pieces.push_back(forLoop(v, intConst(hi - lo), s->loop, body));
    lo = hi;
  }
  return block(std::move(pieces));
}

// acc[i] = op(acc[i], x), x reading no `acc`: the update's kind and x.
std::optional<std::pair<ReduceKind, ExprRef>> rowUpdate(const Stmt& st, const std::string& acc) {
  if (st.kind != Stmt::Kind::Store || st.buffer != acc || st.value->kind != Expr::Kind::Binary)
    return std::nullopt;
  const ExprRef& v = st.value;
  std::optional<ReduceKind> kind;
  if (v->binary == BinaryOp::Add) kind = ReduceKind::Sum;
  if (v->binary == BinaryOp::Max) kind = ReduceKind::Max;
  if (v->binary == BinaryOp::Min) kind = ReduceKind::Min;
  const ExprRef self = load(acc, v->type, st.index);
  const ExprRef x = v->args[0] == self ? v->args[1] : v->args[1] == self ? v->args[0] : nullptr;
  if (!kind || !x || loadedBuffers(x).count(acc) || loadedBuffers(st.index).count(acc))
    return std::nullopt;
  return std::make_pair(*kind, x);
}

// The one kind of update `s` makes to `acc` when every store in it is such an update or a store
// of an output of `k` that reads no `acc` (loops and blocks around them, nothing else), else
// nullopt. The lowering stores an output element once, so those stores split like the loop.
std::optional<ReduceKind> onlyRowUpdates(const StmtRef& s, const std::string& acc,
                                         const Kernel& k) {
  std::optional<ReduceKind> kind;
  bool ok = true;
  std::function<void(const StmtRef&)> walk = [&](const StmtRef& n) {
    if (!n || !ok) return;
    const Buffer* out = n->kind == Stmt::Kind::Store ? k.find(n->buffer) : nullptr;
    if (out && out->role == BufferRole::Output) {
      ok = !loadedBuffers(n->value).count(acc) && !loadedBuffers(n->index).count(acc);
      return;
    }
    if (n->kind == Stmt::Kind::Store) {
      auto u = rowUpdate(*n, acc);
      if (!u || (kind && *kind != u->first)) ok = false;
      else kind = u->first;
      return;
    }
    if (n->kind != Stmt::Kind::For && n->kind != Stmt::Kind::Block) ok = false;
    for (const StmtRef& b : n->body) walk(b);
  };
  walk(s);
  return ok ? kind : std::nullopt;
}

// The largest count in [2, 8] that divides n and leaves each part at least `threshold` of the
// nest's `work`, or 0.
int64_t rowParts(int64_t n, int64_t work, int64_t threshold) {
  for (int64_t p = 8; p >= 2; --p)
    if (n % p == 0 && work / p >= threshold) return p;
  return 0;
}

// `nest` (updating row `acc` of `size` elements of type t over its loop) as `parts` loops over
// consecutive chunks, each into its own row of temp `rows`, in one parallel loop, then the rows
// combined into acc in order.
StmtRef splitRowNest(const StmtRef& nest, const std::string& acc, DType t, int64_t size,
                     ReduceKind kind, int64_t parts, const std::string& rows, FreshNames& names) {
  const int64_t chunk = nest->extent->i / parts;
  const std::string tv = names.fresh("p"), jv = names.fresh(nest->var), iv = names.fresh("c");
  const ExprRef base = binary(BinaryOp::Mul, var(tv), intConst(size));
  StmtRef body = replaceInStmt(
      nest->body[0],
      {{var(nest->var).get(),
        binary(BinaryOp::Add, binary(BinaryOp::Mul, var(tv), intConst(chunk)), var(jv))}});
  body = rewrite(body, [&](StmtRef st) {
    if (auto u = rowUpdate(*st, acc)) {
      st->buffer = rows;
      st->index = binary(BinaryOp::Add, base, st->index);
      st->value = reduceCombine(kind, load(rows, t, st->index), u->second);
    }
    return st;
  });
  StmtRef init =
      forLoop(iv, intConst(size), LoopKind::Serial,
              store(rows, binary(BinaryOp::Add, base, var(iv)), reduceIdentity(kind, t)));
  StmtRef split = forLoop(tv, intConst(parts), LoopKind::Parallel,
                          block({init, forLoop(jv, intConst(chunk), LoopKind::Serial, body)}));
  const std::string tc = names.fresh("p"), ic = names.fresh("c");
  ExprRef part =
      load(rows, t, binary(BinaryOp::Add, binary(BinaryOp::Mul, var(tc), intConst(size)), var(ic)));
  StmtRef combine =
      forLoop(tc, intConst(parts), LoopKind::Serial,
              forLoop(ic, intConst(size), LoopKind::Serial,
                      store(acc, var(ic), reduceCombine(kind, load(acc, t, var(ic)), part))));
  return block({split, combine});
}
}  // namespace

Kernel partitionLoops(const Kernel& k, int64_t maxPieces) {
  FreshNames names(k);
  std::vector<std::string> notes;
  Kernel out = rewriteKernel(k, [&](StmtRef s) {
    if (s->kind != Stmt::Kind::For || s->loop != LoopKind::Serial ||
        s->extent->kind != Expr::Kind::Const || declares(s->body[0]))
      return s;
    std::set<int64_t> points;
    std::set<const Expr*> seen;
    comparisonPoints(s->body[0], s->var, s->extent->i, points, seen);
    if (points.empty() || static_cast<int64_t>(points.size()) + 1 > maxPieces) return s;
    std::string at;
    for (int64_t p : points) at += (at.empty() ? "" : ", ") + std::to_string(p);
    notes.push_back("loop " + s->var + " split at " + at + " into " +
                    std::to_string(points.size() + 1) +
                    " loops: its comparisons with constants (a concatenate's selects) have one "
                    "value in each, so each loop reads only the operand they choose there");
    return splitLoop(s, points, names);
  });
  if (notes.empty()) return out;
  out = simplifyIndices(out);
  out.notes.insert(out.notes.end(), notes.begin(), notes.end());
  return out;
}

Kernel cacheRows(const Kernel& k, int64_t maxElements) {
  FreshNames names(k);
  return rewriteKernel(k, [&](StmtRef s) {
    return s->kind == Stmt::Kind::Block ? cacheRowsInBlock(s, maxElements, names, k.symbols, {})
                                        : s;
  });
}

StmtRef cacheRowsIn(const StmtRef& s, int64_t maxElements, const std::set<std::string>& memory,
                    FreshNames& names, std::set<std::string>& made) {
  return rewrite(s, [&](StmtRef n) {
    // No symbols: a row of symbolic length has no bound, so it is not cached.
    return n->kind == Stmt::Kind::Block ? cacheRowsInBlock(n, maxElements, names, {}, memory, &made)
                                        : n;
  });
}

Kernel splitRowReductions(const Kernel& k, int64_t threshold, bool reassociate) {
  if (k.kind == "opaque") return k;
  FreshNames names(k);
  std::vector<Buffer> temps;
  Kernel out = rewriteKernel(k, [&](StmtRef s) {
    if (s->kind != Stmt::Kind::Alloc || s->scope != MemoryScope::Local) return s;
    StmtRef blk = s->body[0];
    if (!blk || blk->kind != Stmt::Kind::Block) return s;
    for (StmtRef& nest : blk->body) {
      if (nest->kind != Stmt::Kind::For || nest->loop != LoopKind::Serial ||
          nest->extent->kind != Expr::Kind::Const)
        continue;
      const int64_t parts = rowParts(nest->extent->i, work(nest), threshold);
      std::optional<ReduceKind> kind = onlyRowUpdates(nest->body[0], s->buffer, k);
      if (!parts || !kind || (!reassociate && reduceDependsOnOrder(*kind, s->type))) continue;
      Buffer rows;
      rows.name = names.fresh(s->buffer + "_rows");
      rows.type = s->type;
      rows.shape = {parts, s->size};
      rows.role = BufferRole::Temp;
      nest = splitRowNest(nest, s->buffer, s->type, s->size, *kind, parts, rows.name, names);
      temps.push_back(std::move(rows));
    }
    return s;
  });
  if (temps.empty()) return k;
  // Temps go after the outputs and temps, before the internal buffers.
  auto at = std::find_if(out.buffers.begin(), out.buffers.end(),
                         [](const Buffer& b) { return b.role == BufferRole::Internal; });
  out.buffers.insert(at, temps.begin(), temps.end());
  out.notes.push_back(std::to_string(temps.size()) +
                      " row reduction(s) split over threads into partial rows (a reduction "
                      "over outer axes whose row of results is too short to run in parallel)");
  return simplifyIndices(out);
}

Kernel parallelizeOuter(const Kernel& k, int64_t threshold, int threads) {
  Kernel out = k;
  std::set<std::string> scratch;
  const std::vector<Symbol> none;
  if (k.kind != "opaque")
    out.body = parallelizeTop(k.body, threshold, scratch, threads > 1 ? k.symbols : none);
  return out;
}

Kernel vectorizeInner(const Kernel& k) {
  return rewriteKernel(k, [](StmtRef s) {
    if (s->kind == Stmt::Kind::For && s->loop == LoopKind::Serial && onlyStores(s->body[0]))
      s->loop = LoopKind::Vectorized;
    return s;
  });
}

Kernel splitReductions(const Kernel& k, int64_t lanes, bool reassociate) {
  FreshNames names(k);
  return rewriteKernel(k, [&](StmtRef s) {
    if (s->kind != Stmt::Kind::Reduce) return s;
    const std::optional<int64_t> n = upperBound(s->extents.back(), k.symbols);
    if (!n || *n < 2 * lanes) return s;
    if (!reassociate && reduceDependsOnOrder(s->reduce, s->value->type)) return s;
    if (!readsContiguously(s->value, s->vars.back())) return s;
    return splitReduce(s, lanes, names);
  });
}

Kernel lowerReductions(const Kernel& k) {
  return rewriteKernel(k, [](StmtRef s) {
    if (s->kind != Stmt::Kind::Reduce) return s;
    ExprRef acc = load(s->buffer, s->value->type, s->index);
    StmtRef loops = store(s->buffer, s->index, reduceCombine(s->reduce, acc, s->value));
    for (size_t i = s->vars.size(); i-- > 0;)
      loops = forLoop(s->vars[i], s->extents[i], LoopKind::Serial, loops);
    return loops;
  });
}

}  // namespace kiln::kernel
