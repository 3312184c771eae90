// tileTransposes (gpu_schedule.h): a nest that stores along one dim and loads along another
// moves through a tile in shared memory.
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "kernel/gpu_schedule.h"
#include "kernel/lanes.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

constexpr int64_t kTileElements = 1024;  // 4 elements a thread per phase at 256 threads
constexpr int64_t kMinLoadRun = 8;       // shorter runs along the load's dim coalesce well enough

// A transpose nest: perfectly nested loops over one store whose index moves by one element
// with the innermost loop `s`, and a load (`tiled`) that moves by one element with another loop
// `a` and by more than one with `s`.
struct Transpose {
  std::vector<StmtRef> loops;
  const Stmt* store = nullptr;
  ExprRef tiled;
  size_t a = 0, s = 0;  // positions in loops
};

std::optional<Transpose> transposeOf(const Kernel& k, const StmtRef& nest) {
  Transpose t;
  const StmtRef cur = detail::perfectNest(nest, t.loops);
  for (const StmtRef& l : t.loops)
    if ((l->loop != LoopKind::Serial && l->loop != LoopKind::Parallel) ||
        l->extent->kind != Expr::Kind::Const || l->extent->i <= 0)
      return std::nullopt;
  if (t.loops.size() < 2 || !cur || cur->kind != Stmt::Kind::Store) return std::nullopt;
  const Buffer* out = k.find(cur->buffer);
  if (!out || out->view) return std::nullopt;
  t.store = cur.get();
  t.s = t.loops.size() - 1;
  const ExprRef sv = var(t.loops[t.s]->var);
  if (coefficientOf(cur->index, sv) != std::optional<int64_t>(1)) return std::nullopt;
  std::vector<ExprRef> loads;
  detail::loadsIn(cur->value, loads);
  for (const ExprRef& l : loads) {
    const Buffer* in = k.find(l->name);
    std::optional<int64_t> alongS = coefficientOf(l->args[0], sv);
    if (!in || in->view || l->name == cur->buffer || !alongS || *alongS == 0 || *alongS == 1)
      continue;
    for (size_t a = 0; a < t.s; ++a) {
      if (t.loops[a]->extent->i < kMinLoadRun ||
          coefficientOf(l->args[0], var(t.loops[a]->var)) != std::optional<int64_t>(1))
        continue;
      if (!t.tiled || dtypeSize(l->type) > dtypeSize(t.tiled->type)) {
        t.tiled = l;
        t.a = a;
      }
    }
  }
  if (!t.tiled) return std::nullopt;
  return t;
}

ExprRef add(ExprRef x, ExprRef y) { return binary(BinaryOp::Add, std::move(x), std::move(y)); }
ExprRef mul(ExprRef x, int64_t c) { return binary(BinaryOp::Mul, std::move(x), intConst(c)); }
ExprRef div(ExprRef x, int64_t c) { return binary(BinaryOp::Div, std::move(x), intConst(c)); }
ExprRef rem(ExprRef x, int64_t c) { return binary(BinaryOp::Rem, std::move(x), intConst(c)); }
ExprRef lt(ExprRef x, int64_t c) { return binary(BinaryOp::Lt, std::move(x), intConst(c)); }
ExprRef both(ExprRef x, ExprRef y) {
  if (!x) return y;
  return y ? binary(BinaryOp::And, std::move(x), std::move(y)) : x;
}

// One launch: a block per tile of ta x ts elements of dims a and s (and per index of the other
// loops); each thread loads tile elements in the load's order, then, after a barrier, stores
// them in the store's order. The tile's rows are padded by one element (no bank conflicts).
StmtRef tiled(const Transpose& t, int64_t threads, FreshNames& names) {
  const int64_t ea = t.loops[t.a]->extent->i, es = t.loops[t.s]->extent->i;
  const int64_t ts = std::min<int64_t>(es, 32);
  const int64_t ta = std::min(ea, std::max<int64_t>(32, kTileElements / ts / 32 * 32));
  const int64_t na = (ea + ta - 1) / ta, ns = (es + ts - 1) / ts, elems = ta * ts;
  const int64_t rounds = (elems + threads - 1) / threads, row = ta + 1;
  const std::string bv = names.fresh("blk"), tv = names.fresh("thr"), rv = names.fresh("e");
  const std::string tile = names.fresh("tile");
  // The block index over the other loops (outermost first), then the tiles of a and of s.
  std::unordered_map<const Expr*, ExprRef> outer;
  std::vector<ExprRef> keep;
  int64_t blocks = na * ns;
  for (size_t i = t.loops.size(); i-- > 0;) {
    if (i == t.a || i == t.s) continue;
    const int64_t n = t.loops[i]->extent->i;
    keep.push_back(var(t.loops[i]->var));
    outer[keep.back().get()] = rem(div(var(bv), blocks), n);
    blocks *= n;
  }
  const ExprRef a0 = mul(rem(div(var(bv), ns), na), ta), s0 = mul(rem(var(bv), ns), ts);
  const ExprRef idx = add(mul(var(rv), threads), var(tv));
  // The body at tile element (ia, is), guarded where a tile or a round overhangs.
  auto phase = [&](const ExprRef& ia, const ExprRef& is, const StmtRef& body) {
    std::unordered_map<const Expr*, ExprRef> at = outer;
    const ExprRef av = var(t.loops[t.a]->var), sv = var(t.loops[t.s]->var);
    at[av.get()] = add(a0, ia);
    at[sv.get()] = add(s0, is);
    StmtRef s = detail::replaceInStmt(body, at);
    ExprRef guard = elems % threads ? lt(idx, elems) : nullptr;
    if (ea % ta) guard = both(guard, lt(add(a0, ia), ea));
    if (es % ts) guard = both(guard, lt(add(s0, is), es));
    if (guard) s = ifThen(guard, s);
    return forLoop(rv, intConst(rounds), LoopKind::Serial, s);
  };
  const DType type = t.tiled->type;
  const StmtRef fill = store(tile, add(mul(div(idx, ta), row), rem(idx, ta)), t.tiled);
  std::unordered_map<const Expr*, ExprRef> fromTile{
      {t.tiled.get(), load(tile, type, add(mul(rem(idx, ts), row), div(idx, ts)))}};
  auto out = std::make_shared<Stmt>(*t.store);
  out->value = detail::replaceInStmt(std::make_shared<Stmt>(*t.store), fromTile)->value;
  StmtRef body = block(
      {phase(rem(idx, ta), div(idx, ta), fill), barrier(), phase(div(idx, ts), rem(idx, ts), out)});
  return forLoop(bv, intConst(blocks), LoopKind::GpuBlock,
                 forLoop(tv, intConst(threads), LoopKind::GpuThread,
                         alloc(tile, type, ts * row, MemoryScope::Shared, body)));
}

}  // namespace

Kernel tileTransposes(const Kernel& k, int64_t threadsPerBlock) {
  if (k.kind == "opaque") return k;
  FreshNames names(k);
  Kernel out = k;
  int taken = 0;
  out.body = detail::mapTopLevel(k.body, [&](const StmtRef& s) -> StmtRef {
    std::optional<Transpose> t = transposeOf(k, s);
    if (!t) return s;
    ++taken;
    return tiled(*t, threadsPerBlock, names);
  });
  if (taken)
    out.notes.push_back("transpose: " + std::to_string(taken) +
                        " nest(s) through a tile in shared memory (the store and a load move "
                        "along different dims)");
  return out;
}

}  // namespace kiln::kernel
