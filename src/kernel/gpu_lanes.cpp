// vectorizeLanes (gpu_schedule.h): the innermost loop of a nest of stores split into lanes.
#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "kernel/gpu_schedule.h"
#include "kernel/lanes.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

using detail::unwrap;

// A loop of the nest; its extent may be symbolic, but the innermost's must be a constant.
bool splittable(const StmtRef& s) {
  return s && s->kind == Stmt::Kind::For &&
         (s->loop == LoopKind::Serial || s->loop == LoopKind::Parallel);
}

// The lanes loop `inner` splits into (1: it does not).
int64_t lanesFor(const Kernel& k, const Stmt& inner, int64_t bytes) {
  std::vector<const Stmt*> stores;
  if (!storesOnly(inner.body[0], stores) || stores.empty()) return 1;
  const ExprRef i = var(inner.var);
  std::map<std::string, ExprRef> storedAt;
  size_t widest = 1;
  for (const Stmt* st : stores) {
    const Buffer* b = k.find(st->buffer);
    if (!b || b->view || coefficientOf(st->index, i) != std::optional<int64_t>(1)) return 1;
    auto [it, fresh] = storedAt.emplace(st->buffer, st->index);
    if (!fresh && it->second != st->index) return 1;
    widest = std::max(widest, dtypeSize(b->type));
  }
  std::vector<ExprRef> loads;
  for (const Stmt* st : stores) {
    detail::loadsIn(st->value, loads);
    detail::loadsIn(st->index, loads);
  }
  for (const ExprRef& l : loads) {
    auto it = storedAt.find(l->name);
    if (it != storedAt.end() && it->second != l->args[0]) return 1;
  }
  const int64_t extent = inner.extent->i;
  auto fits = [&](int64_t lanes) {
    if (extent % lanes != 0) return false;
    std::unordered_map<const Expr*, ExprRef> zero{{i.get(), intConst(0)}}, memo;
    for (const Stmt* st : stores)
      if (knownMultiple(detail::replaceAll(st->index, zero, memo)) % lanes != 0) return false;
    return true;
  };
  int64_t lanes = bytes / static_cast<int64_t>(widest);
  while (lanes > 1 && !fits(lanes)) lanes /= 2;
  return lanes;
}

// The nest `s` with its innermost loop split, or s.
StmtRef split(const Kernel& k, const StmtRef& s, int64_t bytes, FreshNames& names, int64_t* lanes) {
  if (!splittable(s)) return s;
  if (StmtRef inner = unwrap(s->body[0]); splittable(inner)) {
    StmtRef body = split(k, inner, bytes, names, lanes);
    if (body == inner) return s;
    auto out = std::make_shared<Stmt>(*s);
    out->body[0] = body;
    return out;
  }
  if (s->extent->kind != Expr::Kind::Const || s->extent->i <= 0) return s;
  *lanes = lanesFor(k, *s, bytes);
  if (*lanes == 1) return s;
  const std::string io = names.fresh(s->var + "o"), iv = names.fresh(s->var + "v");
  const ExprRef i = var(s->var);
  std::unordered_map<const Expr*, ExprRef> replace{
      {i.get(), binary(BinaryOp::Add, binary(BinaryOp::Mul, var(io), intConst(*lanes)), var(iv))}};
  StmtRef body = detail::replaceInStmt(s->body[0], replace);
  return forLoop(io, intConst(s->extent->i / *lanes), s->loop,
                 forLoop(iv, intConst(*lanes), LoopKind::Vectorized, body));
}

}  // namespace

Kernel vectorizeLanes(const Kernel& k, int64_t bytes) {
  if (k.kind == "opaque") return k;  // its loops keep the order its lowering chose
  FreshNames names(k);
  Kernel out = k;
  int64_t most = 1;
  // Only nests at the top of the kernel (through blocks and scratch declarations) launch.
  out.body = detail::mapTopLevel(k.body, [&](const StmtRef& s) -> StmtRef {
    int64_t lanes = 1;
    StmtRef r = split(k, s, bytes, names, &lanes);
    most = std::max(most, lanes);
    return r;
  });
  if (most > 1)
    out.notes.push_back("loops: up to " + std::to_string(most) +
                        " consecutive elements per thread, loaded and stored " +
                        std::to_string(bytes) + " bytes at a time where aligned");
  return out;
}

}  // namespace kiln::kernel
