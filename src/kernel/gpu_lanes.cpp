// vectorizeLanes (gpu_schedule.h): the innermost loop of a nest of stores split into lanes; and
// wideAccesses: the groups of those lanes' accesses moved as wide copies.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
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

// The lanes loop `s` (over stores only) with its aligned groups through local arrays and wide
// copies, or s when it has none.
StmtRef widen(const Kernel& k, const StmtRef& s, FreshNames& names) {
  std::vector<const Stmt*> stores;
  if (!storesOnly(s->body[0], stores)) return s;
  const int64_t n = s->extent->i;
  // Loads in the stores' values, grouped unless an earlier store of the loop writes their
  // buffer (a group is read before the loop).
  std::vector<ExprRef> loads;
  std::set<const Expr*> ungrouped;
  std::set<std::string> written;
  for (const Stmt* st : stores) {
    std::vector<ExprRef> mine;
    detail::loadsIn(st->value, mine);
    for (const ExprRef& l : mine) {
      if (written.count(l->name)) ungrouped.insert(l.get());
      if (std::find(loads.begin(), loads.end(), l) == loads.end()) loads.push_back(l);
    }
    written.insert(st->buffer);
  }
  std::vector<StmtRef> before, after;
  std::vector<std::pair<std::string, DType>> arrays;
  std::unordered_map<const Expr*, ExprRef> replace, memo;
  for (const ExprRef& l : loads) {
    ExprRef base = laneBase(l->args[0], s->var, n);
    if (!base || ungrouped.count(l.get()) || !k.find(l->name)) continue;
    const std::string a = names.fresh("ld");
    arrays.emplace_back(a, l->type);
    before.push_back(wideCopy(a, intConst(0), l->name, base, n));
    replace[l.get()] = load(a, l->type, var(s->var));
  }
  std::vector<StmtRef> body;
  for (const Stmt* st : stores) {
    ExprRef value = detail::replaceAll(st->value, replace, memo);
    ExprRef base = laneBase(st->index, s->var, n);
    if (!base || !k.find(st->buffer)) {
      body.push_back(store(st->buffer, st->index, value));
      continue;
    }
    const std::string a = names.fresh("st");
    arrays.emplace_back(a, value->type);
    body.push_back(store(a, var(s->var), value));
    after.push_back(wideCopy(st->buffer, base, a, intConst(0), n));
  }
  if (arrays.empty()) return s;
  before.push_back(forLoop(s->var, s->extent, LoopKind::Vectorized, block(std::move(body))));
  before.insert(before.end(), after.begin(), after.end());
  StmtRef out = block(std::move(before));
  for (auto it = arrays.rbegin(); it != arrays.rend(); ++it)
    out = alloc(it->first, it->second, n, MemoryScope::Local, out);
  return out;
}

StmtRef wideIn(const Kernel& k, const StmtRef& s, FreshNames& names) {
  if (!s) return s;
  if (s->kind == Stmt::Kind::For && s->loop == LoopKind::Vectorized &&
      s->extent->kind == Expr::Kind::Const && s->extent->i > 1 && s->extent->i <= kMaxLanes)
    return widen(k, s, names);
  std::shared_ptr<Stmt> out;
  for (size_t i = 0; i < s->body.size(); ++i) {
    StmtRef b = wideIn(k, s->body[i], names);
    if (b == s->body[i]) continue;
    if (!out) out = std::make_shared<Stmt>(*s);
    out->body[i] = b;
  }
  return out ? out : s;
}

}  // namespace

Kernel wideAccesses(const Kernel& k) {
  FreshNames names(k);
  Kernel out = k;
  out.body = wideIn(k, k.body, names);
  return out;
}

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
