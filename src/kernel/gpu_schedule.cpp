// GPU schedule passes. See gpu_schedule.h.
#include "kernel/gpu_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "kernel/lanes.h"
#include "kernel/schedule.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

using detail::rewrite;
using detail::unwrap;
using detail::writesAny;

// The top-level statements of a kernel body, through blocks and the scratch buffers declared
// around them (which become temps).
struct TopLevel {
  std::vector<StmtRef> stmts;
  std::vector<Buffer> temps;
  std::set<std::string> scratch;
};

bool hasLoop(const StmtRef& s) {
  if (!s) return false;
  if (s->kind == Stmt::Kind::For) return true;
  if (s->kind != Stmt::Kind::Block && s->kind != Stmt::Kind::Alloc) return false;
  for (const StmtRef& b : s->body)
    if (hasLoop(b)) return true;
  return false;
}

// A scratch buffer declared around loops becomes a temp, each loop a launch; around statements
// without loops (a whole-tensor reduction into an accumulator), it stays one launch's own.
void collect(const StmtRef& s, TopLevel& out) {
  if (!s) return;
  if (s->kind == Stmt::Kind::Block) {
    for (const StmtRef& b : s->body) collect(b, out);
    return;
  }
  if (s->kind == Stmt::Kind::Alloc && s->scope == MemoryScope::Local && hasLoop(s->body[0])) {
    Buffer b;
    b.name = s->buffer;
    b.type = s->type;
    b.shape = {s->size};
    b.role = BufferRole::Temp;
    out.temps.push_back(std::move(b));
    out.scratch.insert(s->buffer);
    collect(s->body[0], out);
    return;
  }
  out.stmts.push_back(s);
}

// Extents may be expressions of the kernel's symbols: the grid and the loops' trip counts are
// then expressions too (evaluated at launch), and the choices made from sizes (threads per block,
// a row per warp or block) are made at the largest sizes the symbols' ranges allow.
struct Sizes {
  const std::vector<Symbol>& symbols;
  // The largest value of extent `e` (0 when it has none).
  int64_t max(const ExprRef& e) const {
    if (e->kind == Expr::Kind::Const) return e->i;
    return upperBound(e, symbols).value_or(0);
  }
};

// ceil(n / d) for a constant d > 0 (binary folds constants and d = 1).
ExprRef ceilDiv(const ExprRef& n, int64_t d) {
  return binary(BinaryOp::Div, binary(BinaryOp::Add, n, intConst(d - 1)), intConst(d));
}

// Whether d divides n at every size (a symbolic n by its known power-of-two multiple).
bool divides(int64_t d, const ExprRef& n) {
  return (n->kind == Expr::Kind::Const ? n->i : knownMultiple(n)) % d == 0;
}

bool mappable(const StmtRef& s, bool opaque, const std::set<std::string>& scratch,
              const Sizes& sizes) {
  if (!s || s->kind != Stmt::Kind::For) return false;
  if (sizes.max(s->extent) <= 0) return false;
  // An opaque kernel's lowering orders its loops: only those it made parallel or vectorized
  // (both run their iterations in any order) map.
  bool kindOk = opaque ? s->loop == LoopKind::Parallel || s->loop == LoopKind::Vectorized
                       : s->loop == LoopKind::Serial || s->loop == LoopKind::Parallel;
  return kindOk && !writesAny(s, scratch);
}

// The loops at the top of a nest that map to the grid, and what they wrap.
struct Chain {
  std::vector<StmtRef> loops;
  StmtRef body;
  ExprRef n = intConst(1);  // their iterations
  int64_t nMax = 1;         // the most there can be
};

Chain chainOf(const StmtRef& s, bool opaque, const std::set<std::string>& scratch,
              const Sizes& sizes) {
  Chain c;
  c.body = s;
  for (StmtRef cur = s; mappable(cur, opaque, scratch, sizes); cur = unwrap(cur->body[0])) {
    c.loops.push_back(cur);
    c.body = cur->body[0];
    c.n = binary(BinaryOp::Mul, c.n, cur->extent);
    c.nMax *= sizes.max(cur->extent);
  }
  return c;
}

// `body` with each of `vars` (loops of `extents`, the last innermost) recovered from the flat
// index f over them: var i = f / (product of the extents after i) % extent i.
StmtRef unflatten(const StmtRef& body, const ExprRef& f, const std::vector<std::string>& vars,
                  const std::vector<ExprRef>& extents) {
  std::unordered_map<const Expr*, ExprRef> replace;
  std::vector<ExprRef> keep;  // the replaced variables stay interned while `replace` names them
  ExprRef stride = intConst(1);
  for (size_t i = vars.size(); i-- > 0;) {
    ExprRef q = binary(BinaryOp::Div, f, stride);
    if (i > 0) q = binary(BinaryOp::Rem, q, extents[i]);
    keep.push_back(var(vars[i]));
    replace[keep.back().get()] = q;
    stride = binary(BinaryOp::Mul, stride, extents[i]);
  }
  return detail::replaceInStmt(body, replace);
}

// c.body with each loop variable of the chain recovered from the flat index g.
StmtRef substituteChain(const Chain& c, const ExprRef& g) {
  std::vector<std::string> vars;
  std::vector<ExprRef> extents;
  for (const StmtRef& l : c.loops) {
    vars.push_back(l->var);
    extents.push_back(l->extent);
  }
  return unflatten(c.body, g, vars, extents);
}

StmtRef threadPerIteration(const Chain& c, int64_t threadsPerBlock, FreshNames& names) {
  const int64_t threads = std::min(threadsPerBlock, c.nMax);
  const ExprRef blocks = ceilDiv(c.n, threads);
  const std::string bv = names.fresh("blk"), tv = names.fresh("thr");
  ExprRef g = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(bv), intConst(threads)), var(tv));
  StmtRef body = substituteChain(c, g);
  if (!divides(threads, c.n)) body = ifThen(binary(BinaryOp::Lt, g, c.n), body);
  return forLoop(bv, blocks, LoopKind::GpuBlock,
                 forLoop(tv, intConst(threads), LoopKind::GpuThread, body));
}

ExprRef reduceLength(const Stmt& s) {
  ExprRef n = intConst(1);
  for (const ExprRef& e : s.extents) n = binary(BinaryOp::Mul, n, e);
  return n;
}

// The most elements a Reduce of `s` or below it combines.
int64_t longestReduce(const StmtRef& s, const Sizes& sizes) {
  if (!s) return 0;
  int64_t most = s->kind == Stmt::Kind::Reduce ? sizes.max(reduceLength(*s)) : 0;
  for (const StmtRef& b : s->body) most = std::max(most, longestReduce(b, sizes));
  return most;
}

// The buffers the expressions of `s` and the statements below it read.
std::set<std::string> loadsOf(const StmtRef& s) {
  std::set<std::string> out;
  if (!s) return out;
  for (const ExprRef& e : {s->index, s->value, s->cond, s->extent})
    if (e) out.merge(detail::loadedBuffers(e));
  for (const StmtRef& b : s->body) out.merge(loadsOf(b));
  return out;
}

// The stores of a loop body made only of stores (and blocks), or nullopt.
std::optional<std::set<std::string>> storeTargets(const StmtRef& s) {
  if (!s) return std::set<std::string>{};
  if (s->kind == Stmt::Kind::Store) return std::set<std::string>{s->buffer};
  if (s->kind != Stmt::Kind::Block) return std::nullopt;
  std::set<std::string> out;
  for (const StmtRef& b : s->body) {
    std::optional<std::set<std::string>> t = storeTargets(b);
    if (!t) return std::nullopt;
    out.insert(t->begin(), t->end());
  }
  return out;
}

// Whether every access of local buffer `buf` (of `size` elements) in `s` is at the variable of
// a loop or a one-loop Reduce over the row (`size` long) around it: cacheRows' rows, whose element
// i only iteration i of each pass over the row stores or loads.
bool rowIndexedOnly(const StmtRef& s, const std::string& buf, int64_t size,
                    std::set<std::string>& rowVars) {
  if (!s) return true;
  auto isRowVar = [&](const ExprRef& i) {
    return i && i->kind == Expr::Kind::Var && rowVars.count(i->name);
  };
  std::optional<std::string> own;
  if (s->kind == Stmt::Kind::For && s->extent->kind == Expr::Kind::Const && s->extent->i == size)
    own = s->var;
  if (s->kind == Stmt::Kind::Reduce && s->vars.size() == 1 &&
      s->extents[0]->kind == Expr::Kind::Const && s->extents[0]->i == size)
    own = s->vars[0];
  if (own) rowVars.insert(*own);
  bool ok = s->kind != Stmt::Kind::Call && !(s->kind == Stmt::Kind::Reduce && s->buffer == buf) &&
            (s->kind != Stmt::Kind::Store || s->buffer != buf || isRowVar(s->index));
  std::vector<ExprRef> loads;
  for (const ExprRef& e : {s->index, s->value, s->cond, s->fromIndex})
    if (e) detail::loadsIn(e, loads);
  for (const ExprRef& l : loads)
    if (l->name == buf && !isRowVar(l->args[0])) ok = false;
  for (const StmtRef& b : s->body) ok = ok && rowIndexedOnly(b, buf, size, rowVars);
  if (own) rowVars.erase(*own);
  return ok;
}

// A row's body split over the threads of its block (mapToGpu's row per block), or over the 32
// lanes of a warp (`warp`: the row per warp, which combines by shuffles and needs no barrier),
// or over a group of `lanes` consecutive lanes of one (a short row: several rows to a warp).
class BlockRow {
 public:
  // `vector`: in a warp's row, the consecutive elements each lane takes at a time (1: one);
  // `lanes`: the lanes of a warp's row.
  BlockRow(std::string thr, int64_t threads, bool reassociate, FreshNames& names,
           const Sizes& sizes, bool warp = false, int64_t vector = 1, int64_t lanes = 32)
      : thr_(std::move(thr)), threads_(warp ? lanes : threads), reassociate_(reassociate),
        warp_(warp), vector_(vector), names_(names), sizes_(sizes) {}

  // Local buffers that must split over the threads (cacheRowsIn's rows), or the row fails.
  void splitEach(std::set<std::string> buffers) { split_ = std::move(buffers); }

  std::optional<StmtRef> rewrite(const StmtRef& s) {
    switch (s->kind) {
      case Stmt::Kind::Block: {
        std::vector<StmtRef> out;
        for (const StmtRef& b : s->body) {
          if (readsWritten(b)) {
            if (warp_) return std::nullopt;  // a warp's rows take no barrier
            out.push_back(barrier());
          }
          std::optional<StmtRef> r = rewrite(b);
          if (!r) return std::nullopt;
          out.push_back(*r);
        }
        return block(std::move(out));
      }
      case Stmt::Kind::Alloc: {
        if (s->scope != MemoryScope::Local) return std::nullopt;
        locals_.insert(s->buffer);
        std::set<std::string> vars;
        const bool row = rowIndexedOnly(s->body[0], s->buffer, s->size, vars);
        if (row) rows_[s->buffer] = s->type;
        else if (split_.count(s->buffer)) return std::nullopt;
        std::optional<StmtRef> body = rewrite(s->body[0]);
        if (!body) return std::nullopt;
        // A row keeps only the thread's elements: ceil(size / T) (strided's split).
        const int64_t size = row ? (s->size + threads_ - 1) / threads_ : s->size;
        return alloc(s->buffer, s->type, size, s->scope, *body);
      }
      case Stmt::Kind::Store:
        if (locals_.count(s->buffer)) return s;  // each thread keeps its own copy
        written_.insert(s->buffer);
        return ifThen(isFirst(), s);
      case Stmt::Kind::Reduce: return reduce(*s);
      case Stmt::Kind::For: return loop(s);
      default: return std::nullopt;
    }
  }

 private:
  // The thread's place in the row: its lane in a warp's row.
  ExprRef thread() const {
    return warp_ ? binary(BinaryOp::Rem, var(thr_), intConst(threads_)) : var(thr_);
  }
  ExprRef isFirst() const { return binary(BinaryOp::Eq, thread(), intConst(0)); }

  bool readsWritten(const StmtRef& s) {
    if (written_.empty()) return false;
    for (const std::string& b : loadsOf(s))
      if (written_.count(b)) {
        written_.clear();
        return true;
      }
    return false;
  }

  // for q in [0, ceil(n / T)): body at f = q * T + thread, guarded when T does not divide n.
  // With V = vector_ > 1 and T * V dividing n, each lane takes V consecutive elements at a time
  // (for q: vectorized for v in [0, V): body at f = q * T * V + thread * V + v), which
  // wideAccesses turns into one wide load or store per lane and access.
  StmtRef strided(const ExprRef& n, const std::vector<ExprRef>& extents,
                  const std::vector<std::string>& vars, StmtRef body) {
    if (vector_ > 1 && n->kind == Expr::Kind::Const && n->i % (threads_ * vector_) == 0) {
      const std::string q = names_.fresh("q"), v = names_.fresh("v");
      const int64_t step = threads_ * vector_;
      ExprRef f = binary(BinaryOp::Add,
                         binary(BinaryOp::Add, binary(BinaryOp::Mul, var(q), intConst(step)),
                                binary(BinaryOp::Mul, thread(), intConst(vector_))),
                         var(v));
      ExprRef mine =
          binary(BinaryOp::Add, binary(BinaryOp::Mul, var(q), intConst(vector_)), var(v));
      const StmtRef own = ownElements(body, vars, mine);
      return forLoop(
          q, intConst(n->i / step), own == body ? LoopKind::Serial : LoopKind::Unrolled,
          forLoop(v, intConst(vector_), LoopKind::Vectorized, unflatten(own, f, vars, extents)));
    }
    const std::string q = names_.fresh("q");
    ExprRef f = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(q), intConst(threads_)), thread());
    const StmtRef own = ownElements(body, vars, var(q));
    // A row's elements stay in registers only where their indices are constants: unrolled.
    const LoopKind kind = own == body ? LoopKind::Serial : LoopKind::Unrolled;
    body = unflatten(own, f, vars, extents);
    if (!divides(threads_, n)) body = ifThen(binary(BinaryOp::Lt, f, n), body);
    return forLoop(q, ceilDiv(n, threads_), kind, body);
  }

  std::optional<StmtRef> loop(const StmtRef& s) {
    if (sizes_.max(s->extent) <= 0) return std::nullopt;
    std::optional<std::set<std::string>> targets = storeTargets(s->body[0]);
    if (!targets) return std::nullopt;
    for (const std::string& t : *targets) {
      if (rows_.count(t)) continue;    // each thread stores its own elements of a row
      if (locals_.count(t)) return s;  // every thread fills its own copy whole
      written_.insert(t);
    }
    return strided(s->extent, {s->extent}, {s->var}, s->body[0]);
  }

  // `body` (one pass over a row along vars[0]) with its accesses to local rows at element
  // vars[0] moved to the thread's own element `mine` of them.
  StmtRef ownElements(const StmtRef& body, const std::vector<std::string>& vars,
                      const ExprRef& mine) const {
    if (rows_.empty() || vars.size() != 1) return body;
    std::set<std::string> rows;
    for (const auto& [name, type] : rows_) rows.insert(name);
    const std::set<std::string> loads = loadsOf(body);
    if (!writesAny(body, rows) && std::none_of(rows.begin(), rows.end(), [&](const std::string& r) {
          return loads.count(r);
        }))
      return body;
    const ExprRef at = var(vars[0]);
    std::unordered_map<const Expr*, ExprRef> replace;
    std::vector<ExprRef> keep;  // the replaced loads stay interned while `replace` names them
    for (const auto& [name, type] : rows_) {
      keep.push_back(load(name, type, at));
      replace[keep.back().get()] = load(name, type, mine);
    }
    StmtRef out = detail::replaceInStmt(body, replace);
    return detail::rewrite(out, [&](StmtRef n) {
      if (n->kind == Stmt::Kind::Store && rows_.count(n->buffer) && n->index == at) n->index = mine;
      return n;
    });
  }

  // Each thread combines a strided part, then a tree in shared memory; every thread (its copy
  // of a local accumulator) or thread 0 (memory) combines the total into the accumulator.
  std::optional<StmtRef> reduce(const Stmt& s) {
    const DType t = s.value->type;
    const ExprRef n = reduceLength(s);
    if (sizes_.max(n) <= 0 || (!reassociate_ && reduceDependsOnOrder(s.reduce, t)))
      return std::nullopt;
    const std::string part = names_.fresh("part");
    ExprRef partValue = load(part, t, intConst(0));
    StmtRef accumulate = store(part, intConst(0), reduceCombine(s.reduce, partValue, s.value));
    if (warp_) return warpReduce(s, part, strided(n, s.extents, s.vars, accumulate));
    if (warpOp(s.reduce, t)) return warpTree(s, part, strided(n, s.extents, s.vars, accumulate));
    const std::string tree = names_.fresh("tree");
    std::vector<StmtRef> treeSteps = {store(tree, thread(), partValue), barrier()};
    for (int64_t step = threads_ / 2; step >= 1; step /= 2) {
      ExprRef other = load(tree, t, binary(BinaryOp::Add, thread(), intConst(step)));
      ExprRef mine = load(tree, t, thread());
      treeSteps.push_back(ifThen(binary(BinaryOp::Lt, thread(), intConst(step)),
                                 store(tree, thread(), reduceCombine(s.reduce, mine, other))));
      treeSteps.push_back(barrier());
    }
    ExprRef acc = load(s.buffer, t, s.index);
    StmtRef total =
        store(s.buffer, s.index, reduceCombine(s.reduce, acc, load(tree, t, intConst(0))));
    if (!locals_.count(s.buffer)) {
      written_.insert(s.buffer);
      total = ifThen(isFirst(), total);
    }
    treeSteps.push_back(total);
    StmtRef body = block({store(part, intConst(0), reduceIdentity(s.reduce, t)),
                          strided(n, s.extents, s.vars, accumulate),
                          alloc(tree, t, threads_, MemoryScope::Shared, block(treeSteps))});
    return alloc(part, t, 1, MemoryScope::Local, body);
  }

  // The lanes' parts combined by shuffles into a local total that every lane holds (so that
  // every lane runs the shuffles), then into the accumulator: by every lane for a local one,
  // by lane 0 for one in memory.
  std::optional<StmtRef> warpReduce(const Stmt& s, const std::string& part, StmtRef strided) {
    const DType t = s.value->type;
    std::optional<UnaryOp> op = warpOp(s.reduce, t);
    if (!op) return std::nullopt;
    const std::string total = names_.fresh("total");
    ExprRef acc = load(s.buffer, t, s.index);
    StmtRef combine =
        store(s.buffer, s.index, reduceCombine(s.reduce, acc, load(total, t, intConst(0))));
    if (!locals_.count(s.buffer)) combine = ifThen(isFirst(), combine);
    StmtRef shuffled =
        block({store(total, intConst(0), warpCombine(*op, load(part, t, intConst(0)), threads_)),
               combine});
    StmtRef body = block({store(part, intConst(0), reduceIdentity(s.reduce, t)), strided,
                          alloc(total, t, 1, MemoryScope::Local, shuffled)});
    return alloc(part, t, 1, MemoryScope::Local, body);
  }

  // The shuffle that combines a reduction's values across a warp, where there is one.
  static std::optional<UnaryOp> warpOp(ReduceKind k, DType t) {
    if (t != DType::F32 && t != DType::F64) return std::nullopt;
    if (k == ReduceKind::Sum) return UnaryOp::WarpSum;
    if (k == ReduceKind::Max || k == ReduceKind::SelectMax) return UnaryOp::WarpMax;
    if (k == ReduceKind::Min) return UnaryOp::WarpMin;
    return std::nullopt;
  }

  // A block's parts combined in two rounds of shuffles instead of a tree of log2(T) barriers:
  // each warp's total goes to shared memory (lane 0), then every warp combines those T / 32
  // totals by shuffles, so every thread holds the row's total after two barriers.
  StmtRef warpTree(const Stmt& s, const std::string& part, StmtRef strided) {
    const DType t = s.value->type;
    const UnaryOp op = *warpOp(s.reduce, t);
    const int64_t warps = threads_ / 32;
    const std::string total = names_.fresh("total"), tree = names_.fresh("tree");
    const ExprRef lane = binary(BinaryOp::Rem, thread(), intConst(32));
    const ExprRef own = load(total, t, intConst(0));
    // Lanes past the warps' count read the last total and combine the identity instead.
    ExprRef other = select(binary(BinaryOp::Lt, lane, intConst(warps)),
                           load(tree, t, binary(BinaryOp::Min, lane, intConst(warps - 1))),
                           reduceIdentity(s.reduce, t));
    ExprRef acc = load(s.buffer, t, s.index);
    StmtRef combine = store(s.buffer, s.index, reduceCombine(s.reduce, acc, own));
    if (!locals_.count(s.buffer)) {
      written_.insert(s.buffer);
      combine = ifThen(isFirst(), combine);
    }
    StmtRef rounds =
        block({store(total, intConst(0), unary(op, load(part, t, intConst(0)))),
               ifThen(binary(BinaryOp::Eq, lane, intConst(0)),
                      store(tree, binary(BinaryOp::Div, thread(), intConst(32)), own)),
               barrier(), store(total, intConst(0), unary(op, other)), combine, barrier()});
    StmtRef body = block({store(part, intConst(0), reduceIdentity(s.reduce, t)), strided,
                          alloc(total, t, 1, MemoryScope::Local,
                                alloc(tree, t, warps, MemoryScope::Shared, rounds))});
    return alloc(part, t, 1, MemoryScope::Local, body);
  }

  std::string thr_;
  int64_t threads_;
  bool reassociate_;
  bool warp_;
  int64_t vector_;
  FreshNames& names_;
  const Sizes& sizes_;
  std::set<std::string> locals_;       // per-thread buffers declared in the row
  std::map<std::string, DType> rows_;  // those of them a thread keeps only its elements of
  std::set<std::string> split_;
  std::set<std::string> written_;  // memory written since the last barrier
};

void loadIndices(const ExprRef& e, std::vector<ExprRef>& out) {
  if (!e) return;
  if (e->kind == Expr::Kind::Load) out.push_back(e->args[0]);
  for (const ExprRef& a : e->args) loadIndices(a, out);
}

void reducesOf(const StmtRef& s, std::vector<const Stmt*>& out) {
  if (!s) return;
  if (s->kind == Stmt::Kind::Reduce) out.push_back(s.get());
  for (const StmtRef& b : s->body) reducesOf(b, out);
}

// Whether a thread per output reads coalesced where a row per block would not: every load of
// the nest's reductions that moves with the chain's innermost loop moves by one element, and none
// moves by one element along its reduction's innermost loop.
bool threadPerOutputCoalesces(const Chain& c) {
  if (c.loops.empty()) return false;
  std::vector<const Stmt*> reduces;
  reducesOf(c.body, reduces);
  if (reduces.empty()) return false;
  const ExprRef inner = var(c.loops.back()->var);
  bool moves = false;
  for (const Stmt* r : reduces) {
    std::vector<ExprRef> indices;
    loadIndices(r->value, indices);
    const ExprRef own = var(r->vars.back());
    for (const ExprRef& i : indices) {
      std::optional<int64_t> t = coefficientOf(i, inner);
      if (!t || (*t != 0 && *t != 1)) return false;
      moves = moves || *t == 1;
      std::optional<int64_t> along = coefficientOf(i, own);
      if (along && *along == 1) return false;
    }
  }
  return moves;
}

// c's body with its chain's variables at `at`, split over a row's threads by the BlockRow that
// `split` makes: first with the costly or loaded values of its rows kept for the later passes
// (cacheRowsIn, at most kRowRegisters a thread of `threads` a row: in registers, where each later
// pass recomputed or loaded them again, as softmax's exps and a layer norm's input), each such
// row split over the threads; else as it is. Rows of symbolic length are not kept: a thread's
// share of one has no constant count, so it would sit in local memory, the whole row per thread.
std::optional<StmtRef> splitRow(const Chain& c, const ExprRef& at, int64_t threads,
                                const std::set<std::string>& memory, FreshNames& names,
                                const std::function<BlockRow()>& split) {
  std::set<std::string> made;
  Chain cached = c;
  cached.body = cacheRowsIn(c.body, threads * kRowRegisters, memory, names, made);
  BlockRow row = split();
  row.splitEach(std::move(made));
  if (std::optional<StmtRef> body = row.rewrite(substituteChain(cached, at))) return body;
  return split().rewrite(substituteChain(c, at));
}

std::optional<StmtRef> rowPerBlock(const Chain& c, int64_t threadsPerBlock, bool reassociate,
                                   FreshNames& names, const Sizes& sizes,
                                   const std::set<std::string>& memory) {
  const int64_t longest = longestReduce(c.body, sizes);
  if (longest < kMinBlockRow) return std::nullopt;
  int64_t threads = 32;
  while (threads < longest && threads < threadsPerBlock) threads *= 2;
  const std::string bv = names.fresh("blk");
  const std::string thr = names.fresh("thr");
  std::optional<StmtRef> body = splitRow(c, var(bv), threads, memory, names, [&] {
    return BlockRow(thr, threads, reassociate, names, sizes);
  });
  if (!body) return std::nullopt;
  return forLoop(bv, c.n, LoopKind::GpuBlock,
                 forLoop(thr, intConst(threads), LoopKind::GpuThread, *body));
}

// The widest element (bytes) the loads and stores of `s` move in memory buffers of `k`.
size_t widestAccess(const Kernel& k, const StmtRef& s) {
  if (!s) return 0;
  size_t most = 0;
  std::vector<ExprRef> loads;
  for (const ExprRef& e : {s->index, s->value, s->cond})
    if (e) detail::loadsIn(e, loads);
  for (const ExprRef& l : loads)
    if (k.find(l->name)) most = std::max(most, dtypeSize(l->type));
  if (s->kind == Stmt::Kind::Store || s->kind == Stmt::Kind::Reduce)
    if (const Buffer* b = k.find(s->buffer)) most = std::max(most, dtypeSize(b->type));
  for (const StmtRef& b : s->body) most = std::max(most, widestAccess(k, b));
  return most;
}

// How a warp's rows split: `vector` consecutive elements a lane at a time, `lanes` lanes a row.
struct WarpRow {
  int64_t vector = 1, lanes = 32;
};

// The consecutive elements a lane of a warp's row takes at a time: `bytes` over the widest
// element the row moves, halved until 32 lanes of that many divide the row (1: none). A row
// shorter than 32 such groups takes as many lanes as it has groups (at least kMinRowLanes): one
// access a lane per pass, several rows to a warp, fewer warps in all (a softmax's 128 f16: 16
// lanes of 8), when the rows fill whole warps (a warp's lanes all run or all skip the shuffles).
WarpRow warpRowSplit(const Kernel& k, const Chain& c, int64_t longest, int64_t bytes) {
  WarpRow w;
  const size_t widest = widestAccess(k, c.body);
  if (widest == 0 || bytes <= 0) return w;
  const int64_t most = std::min<int64_t>(bytes / static_cast<int64_t>(widest), kMaxLanes);
  const int64_t lanes = most > 1 && longest % most == 0 ? longest / most : 0;
  const bool power = lanes > 0 && (lanes & (lanes - 1)) == 0;
  if (power && lanes >= kMinRowLanes && lanes < 32 && c.n->kind == Expr::Kind::Const &&
      c.n->i % (32 / lanes) == 0) {
    w.vector = most;
    w.lanes = lanes;
    return w;
  }
  for (int64_t v = most; v > 1; v /= 2)
    if (longest % (32 * v) == 0) {
      w.vector = v;
      return w;
    }
  return w;
}

// Rows of at most kMaxWarpRow elements run a row per warp, 8 rows to a block of 256 threads
// (a block per row would leave most of its threads idle and wait at a barrier per tree step);
// so do rows whose lanes take `vector` elements at a time, up to kWarpRowAccesses accesses a
// lane per pass (a layer norm's 768 f16: 3 loads of 16 bytes, no barrier).
std::optional<StmtRef> rowPerWarp(const Chain& c, int64_t threadsPerBlock, bool reassociate,
                                  FreshNames& taken, const Sizes& sizes, WarpRow split,
                                  const std::set<std::string>& memory) {
  const int64_t longest = longestReduce(c.body, sizes);
  const bool wide = split.vector > 1 && longest <= 32 * split.vector * kWarpRowAccesses;
  if (longest < kMinBlockRow || (longest > kMaxWarpRow && !wide) || threadsPerBlock < 32)
    return std::nullopt;
  FreshNames names = taken;  // the names of an attempt that fails stay free
  const int64_t rows = threadsPerBlock / split.lanes;
  const ExprRef blocks = ceilDiv(c.n, rows);
  const std::string bv = names.fresh("blk");
  const std::string thr = names.fresh("thr");
  ExprRef r = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(bv), intConst(rows)),
                     binary(BinaryOp::Div, var(thr), intConst(split.lanes)));
  std::optional<StmtRef> body = splitRow(c, r, split.lanes, memory, names, [&] {
    return BlockRow(thr, 32, reassociate, names, sizes, /*warp=*/true, split.vector, split.lanes);
  });
  if (!body) return std::nullopt;
  // A whole warp shares its row, so the guard keeps or skips all of its lanes together.
  if (!divides(rows, c.n)) body = ifThen(binary(BinaryOp::Lt, r, c.n), *body);
  taken = names;
  return forLoop(bv, blocks, LoopKind::GpuBlock,
                 forLoop(thr, intConst(threadsPerBlock), LoopKind::GpuThread, *body));
}

StmtRef launch(const Kernel& k, const StmtRef& s, const std::set<std::string>& scratch,
               int64_t threadsPerBlock, bool reassociate, FreshNames& names,
               std::vector<std::string>& notes, const Sizes& sizes, int64_t accessBytes) {
  const bool opaque = k.kind == "opaque";
  if (s->kind == Stmt::Kind::For && s->loop == LoopKind::GpuBlock) return s;  // tileTransposes
  Chain c = chainOf(s, opaque, scratch, sizes);
  if (opaque) return threadPerIteration(c, threadsPerBlock, names);
  const int64_t longest = longestReduce(c.body, sizes);
  if (threadPerOutputCoalesces(c) && c.nMax >= longest) {
    notes.push_back("reduction: a thread per output element (consecutive outputs are adjacent in "
                    "memory, the elements each reduces are not)");
    return threadPerIteration(c, threadsPerBlock, names);
  }
  // Rows of symbolic length are mapped for the longest they can be.
  const std::string rows = printExpr(c.n) + " rows of " + std::to_string(longest) + " elements";
  const WarpRow split = warpRowSplit(k, c, longest, accessBytes);
  std::set<std::string> memory = scratch;
  for (const Buffer& b : k.buffers) memory.insert(b.name);
  if (std::optional<StmtRef> r =
          rowPerWarp(c, threadsPerBlock, reassociate, names, sizes, split, memory)) {
    std::string how = split.lanes < 32 ? "reduction: " + std::to_string(split.lanes) +
                                             " lanes of a warp per row (" + rows
                                       : "reduction: a warp per row (" + rows;
    if (split.vector > 1)
      how += ", " + std::to_string(split.vector) + " consecutive elements a lane";
    notes.push_back(how + ")");
    return *r;
  }
  if (std::optional<StmtRef> r =
          rowPerBlock(c, threadsPerBlock, reassociate, names, sizes, memory)) {
    notes.push_back("reduction: a block per row (" + rows + ")");
    return *r;
  }
  return threadPerIteration(c, threadsPerBlock, names);
}

}  // namespace

Kernel mapToGpu(const Kernel& k, int64_t threadsPerBlock, bool reassociate, int64_t accessBytes) {
  TopLevel top;
  collect(k.body, top);
  FreshNames names(k);
  Kernel out = k;
  for (Buffer& b : top.temps) out.buffers.push_back(std::move(b));
  std::vector<StmtRef> launches;
  for (const StmtRef& s : top.stmts) {
    if (s->kind == Stmt::Kind::Call) launches.push_back(s);  // the target runs it
    else
      launches.push_back(launch(k, s, top.scratch, threadsPerBlock, reassociate, names, out.notes,
                                Sizes{k.symbols}, accessBytes));
  }
  out.body = block(std::move(launches));
  return out;
}

std::vector<StmtRef> gpuLaunches(const Kernel& k) {
  if (k.body && k.body->kind == Stmt::Kind::Block) return k.body->body;
  return {k.body};
}

}  // namespace kiln::kernel
