// blockTransposes (schedule.h): a nest that stores along its innermost loop and loads along an
// outer one runs in square blocks, so that the cache lines a block loads serve all its rows.
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "kernel/lanes.h"
#include "kernel/schedule.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

// A load at least this many elements apart along the store's loop reads a cache line (64 bytes)
// per element there.
constexpr int64_t kStridedLoad = 16;

ExprRef add(ExprRef x, ExprRef y) { return binary(BinaryOp::Add, std::move(x), std::move(y)); }
ExprRef mulc(ExprRef x, int64_t c) { return binary(BinaryOp::Mul, std::move(x), intConst(c)); }

// The extent of block `outer` of `block` elements along a loop of `n`: the last block is short.
ExprRef blockExtent(const std::string& outer, int64_t n, int64_t block) {
  if (n % block == 0) return intConst(block);
  return binary(BinaryOp::Min, intConst(block),
                binary(BinaryOp::Sub, intConst(n), mulc(var(outer), block)));
}

// The nest `s` when its innermost loop `v` (vectorized) holds one store that moves by one element
// with v and a load that moves by kStridedLoad or more with v and by one element with a loop `a`
// around it (the innermost such), both loops at least two blocks long, as
//   for ao { <the loops between a and v> { for vo { for ai { vectorized for vi }}}}
// with ao in a's place; else null. The nest only stores what it does not load, so its
// iterations may run in any order.
StmtRef blocked(const StmtRef& s, int64_t block, FreshNames& names) {
  std::vector<StmtRef> loops;
  const StmtRef cur = detail::perfectNest(s, loops);
  if (loops.size() < 2 || !cur || cur->kind != Stmt::Kind::Store) return nullptr;
  const StmtRef v = loops.back();
  if (v->loop != LoopKind::Vectorized || v->extent->kind != Expr::Kind::Const ||
      v->extent->i < 2 * block)
    return nullptr;
  const ExprRef vv = var(v->var);
  if (coefficientOf(cur->index, vv) != std::optional<int64_t>(1)) return nullptr;
  std::vector<ExprRef> loads;
  detail::loadsIn(cur->value, loads);
  for (const ExprRef& l : loads)
    if (l->name == cur->buffer) return nullptr;  // reads what it writes: keep the order
  auto transposes = [&](const StmtRef& a) {
    if (a->loop == LoopKind::Vectorized || a->extent->kind != Expr::Kind::Const ||
        a->extent->i < 2 * block)
      return false;
    for (const ExprRef& l : loads) {
      std::optional<int64_t> alongV = coefficientOf(l->args[0], vv);
      if (alongV && std::abs(*alongV) >= kStridedLoad &&
          coefficientOf(l->args[0], var(a->var)) == std::optional<int64_t>(1))
        return true;
    }
    return false;
  };
  size_t ia = loops.size() - 1;
  while (ia-- > 0 && !transposes(loops[ia])) {}
  if (ia >= loops.size()) return nullptr;
  for (size_t i = ia + 1; i + 1 < loops.size(); ++i)
    if (loops[i]->extent->kind != Expr::Kind::Const) return nullptr;  // they move out of a's
  const StmtRef a = loops[ia];
  const ExprRef av = var(a->var);
  const int64_t na = a->extent->i, nv = v->extent->i;
  const std::string ao = names.fresh(a->var + "b"), vo = names.fresh(v->var + "b");
  const std::string ai = names.fresh(a->var + "i"), vi = names.fresh(v->var + "i");
  StmtRef body = detail::replaceInStmt(cur, {{av.get(), add(mulc(var(ao), block), var(ai))},
                                             {vv.get(), add(mulc(var(vo), block), var(vi))}});
  body = forLoop(vi, blockExtent(vo, nv, block), LoopKind::Vectorized, body);
  body = forLoop(ai, blockExtent(ao, na, block), LoopKind::Serial, body);
  body = forLoop(vo, intConst((nv + block - 1) / block), LoopKind::Serial, body);
  // The loops between a and v, then a's blocks in its place, then the loops around it, as they
  // were.
  auto wrap = [&](const StmtRef& loop) {
    StmtRef outer = std::make_shared<Stmt>(*loop);
    outer->body = {body};
    body = outer;
  };
  for (size_t i = loops.size() - 1; i-- > ia + 1;) wrap(loops[i]);
  body = forLoop(ao, intConst((na + block - 1) / block), a->loop, body);
  for (size_t i = ia; i-- > 0;) wrap(loops[i]);
  return body;
}

}  // namespace

Kernel blockTransposes(const Kernel& k, int64_t block) {
  if (k.kind == "opaque") return k;
  FreshNames names(k);
  Kernel out = k;
  int count = 0;
  out.body = detail::mapTopLevel(k.body, [&](const StmtRef& s) {
    StmtRef b = blocked(s, block, names);
    count += b != nullptr;
    return b ? b : s;
  });
  if (count)
    out.notes.push_back("transposes in blocks of " + std::to_string(block) + "x" +
                        std::to_string(block) + ": " + std::to_string(count) + " nest" +
                        (count == 1 ? "" : "s") + " (blockTransposes)");
  return out;
}

}  // namespace kiln::kernel
