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

// The nest `s` when its two innermost loops (`a`, then the vectorized `v`) hold one store that
// moves by one element with v and a load that moves by one element with a and by
// kStridedLoad or more with v, both loops at least two blocks long; else null.
StmtRef blocked(const StmtRef& s, int64_t block, FreshNames& names) {
  std::vector<StmtRef> loops;
  const StmtRef cur = detail::perfectNest(s, loops);
  if (loops.size() < 2 || !cur || cur->kind != Stmt::Kind::Store) return nullptr;
  const StmtRef a = loops[loops.size() - 2], v = loops.back();
  for (const StmtRef& l : {a, v})
    if (l->extent->kind != Expr::Kind::Const || l->extent->i < 2 * block) return nullptr;
  if (v->loop != LoopKind::Vectorized || a->loop == LoopKind::Vectorized) return nullptr;
  const ExprRef av = var(a->var), vv = var(v->var);
  if (coefficientOf(cur->index, vv) != std::optional<int64_t>(1)) return nullptr;
  std::vector<ExprRef> loads;
  detail::loadsIn(cur->value, loads);
  bool strided = false;
  for (const ExprRef& l : loads) {
    if (l->name == cur->buffer) return nullptr;  // reads what it writes: keep the order
    std::optional<int64_t> alongV = coefficientOf(l->args[0], vv);
    strided = strided || (alongV && std::abs(*alongV) >= kStridedLoad &&
                          coefficientOf(l->args[0], av) == std::optional<int64_t>(1));
  }
  if (!strided) return nullptr;
  const int64_t na = a->extent->i, nv = v->extent->i;
  const std::string ao = names.fresh(a->var + "b"), vo = names.fresh(v->var + "b");
  const std::string ai = names.fresh(a->var + "i"), vi = names.fresh(v->var + "i");
  StmtRef body = detail::replaceInStmt(cur, {{av.get(), add(mulc(var(ao), block), var(ai))},
                                             {vv.get(), add(mulc(var(vo), block), var(vi))}});
  body = forLoop(vi, blockExtent(vo, nv, block), LoopKind::Vectorized, body);
  body = forLoop(ai, blockExtent(ao, na, block), LoopKind::Serial, body);
  body = forLoop(vo, intConst((nv + block - 1) / block), LoopKind::Serial, body);
  body = forLoop(ao, intConst((na + block - 1) / block), a->loop, body);
  // The loops around `a` stay as they were.
  for (size_t i = loops.size() - 2; i-- > 0;) {
    StmtRef outer = std::make_shared<Stmt>(*loops[i]);
    outer->body = {body};
    body = outer;
  }
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
