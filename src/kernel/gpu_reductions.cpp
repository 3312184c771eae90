// reductionsPerOutput: the row of accumulators of a reduction that keeps the innermost dim, as a
// Reduce per output element. See gpu_schedule.h.
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "kernel/gpu_schedule.h"
#include "kernel/lanes.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

using detail::rewrite;
using detail::unwrap;

// for v in [0, n): body, with a constant extent.
bool isLoopOver(const StmtRef& s, int64_t n) {
  return s && s->kind == Stmt::Kind::For && s->extent->kind == Expr::Kind::Const &&
         s->extent->i == n && s->loop == LoopKind::Serial;
}

std::optional<ReduceKind> kindOf(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return ReduceKind::Sum;
    case BinaryOp::Mul: return ReduceKind::Prod;
    case BinaryOp::Max: return ReduceKind::Max;
    case BinaryOp::Min: return ReduceKind::Min;
    case BinaryOp::And: return ReduceKind::And;
    case BinaryOp::Or: return ReduceKind::Or;
    default: return std::nullopt;
  }
}

// The update acc[c] = combine(acc[c], v), or select(valid, combine(acc[c], v), acc[c]) (a padded
// window): its kind, and the value each element contributes (the identity outside the window).
struct Update {
  ReduceKind kind = ReduceKind::Sum;
  ExprRef value;
};

std::optional<Update> updateOf(const ExprRef& e, const ExprRef& cur) {
  auto combine = [&](const ExprRef& x) -> std::optional<Update> {
    if (x->kind != Expr::Kind::Binary || x->args[0] != cur) return std::nullopt;
    std::optional<ReduceKind> kind = kindOf(x->binary);
    if (!kind) return std::nullopt;
    return Update{*kind, x->args[1]};
  };
  if (e->kind == Expr::Kind::Select && e->args[2] == cur) {
    std::optional<Update> u = combine(e->args[1]);
    if (u) u->value = select(e->args[0], u->value, reduceIdentity(u->kind, cur->type));
    return u;
  }
  return combine(e);
}

bool loadsOnlyAt(const StmtRef& s, const std::string& buffer, const ExprRef& index);

bool exprLoadsOnlyAt(const ExprRef& e, const std::string& buffer, const ExprRef& index) {
  if (!e) return true;
  if (e->kind == Expr::Kind::Load && e->name == buffer && e->args[0] != index) return false;
  for (const ExprRef& a : e->args)
    if (!exprLoadsOnlyAt(a, buffer, index)) return false;
  return true;
}

bool loadsOnlyAt(const StmtRef& s, const std::string& buffer, const ExprRef& index) {
  if (!s) return true;
  for (const ExprRef& e : {s->index, s->value, s->cond, s->extent})
    if (!exprLoadsOnlyAt(e, buffer, index)) return false;
  for (const ExprRef& e : s->extents)
    if (!exprLoadsOnlyAt(e, buffer, index)) return false;
  if (s->kind == Stmt::Kind::Store && s->buffer == buffer) return false;
  for (const StmtRef& b : s->body)
    if (!loadsOnlyAt(b, buffer, index)) return false;
  return true;
}

// `s` with the variable `from` renamed to `to` and loads of acc[to] made acc[0].
StmtRef renameAndScalarize(const StmtRef& s, const std::string& from, const std::string& to,
                           const std::string& acc, DType t) {
  const ExprRef fromVar = var(from), toVar = var(to), atC = load(acc, t, toVar);
  StmtRef renamed = detail::replaceInStmt(s, {{fromVar.get(), toVar}});
  return detail::replaceInStmt(renamed, {{atC.get(), load(acc, t, intConst(0))}});
}

// A row of accumulators: alloc acc[C] { for c0: acc[c0] = id; for r...: for c: acc[c] =
// combine(acc[c], v); for c1: out }.
struct AccRow {
  std::string acc;
  DType type = DType::F32;
  int64_t channels = 0;
  ExprRef identity;
  std::vector<std::string> vars;  // the reduced loops r...
  std::vector<ExprRef> extents;
  std::string c;  // the update's channel variable
  StmtRef update;
  Update u;
  StmtRef out;  // for c1: ...
};

std::optional<AccRow> accRowOf(const StmtRef& s) {
  if (s->kind != Stmt::Kind::Alloc || s->scope != MemoryScope::Local) return std::nullopt;
  const StmtRef b = s->body[0];
  if (!b || b->kind != Stmt::Kind::Block || b->body.size() != 3) return std::nullopt;
  AccRow row;
  row.acc = s->buffer;
  row.type = s->type;
  row.channels = s->size;
  const StmtRef init = b->body[0];
  row.out = b->body[2];
  if (!isLoopOver(init, row.channels) || !isLoopOver(row.out, row.channels)) return std::nullopt;
  StmtRef cur = unwrap(b->body[1]);
  while (cur && cur->kind == Stmt::Kind::For && !isLoopOver(cur, row.channels)) {
    if (cur->loop != LoopKind::Serial || cur->extent->kind != Expr::Kind::Const)
      return std::nullopt;
    row.vars.push_back(cur->var);
    row.extents.push_back(cur->extent);
    cur = unwrap(cur->body[0]);
  }
  if (row.vars.empty() || !isLoopOver(cur, row.channels)) return std::nullopt;
  row.c = cur->var;
  row.update = unwrap(cur->body[0]);
  const StmtRef zero = unwrap(init->body[0]);
  const ExprRef atC = load(row.acc, row.type, var(row.c));
  if (!row.update || row.update->kind != Stmt::Kind::Store || row.update->buffer != row.acc ||
      row.update->index != var(row.c) || !zero || zero->kind != Stmt::Kind::Store ||
      zero->buffer != row.acc || zero->index != var(init->var))
    return std::nullopt;
  std::optional<Update> u = updateOf(row.update->value, atC);
  if (!u || zero->value != reduceIdentity(u->kind, row.type) ||
      detail::loadedBuffers(u->value).count(row.acc) ||
      !loadsOnlyAt(row.out->body[0], row.acc, var(row.out->var)))
    return std::nullopt;
  row.identity = zero->value;
  row.u = *u;
  return row;
}

// -> for c: alloc acc[1] { acc[0] = id; reduce acc[0] over r... of v; out }.
StmtRef perOutput(const AccRow& row) {
  StmtRef rest = renameAndScalarize(row.out->body[0], row.out->var, row.c, row.acc, row.type);
  StmtRef body = block(
      {store(row.acc, intConst(0), row.identity),
       reduceInto(row.acc, intConst(0), row.u.kind, row.vars, row.extents, row.u.value), rest});
  return forLoop(row.c, intConst(row.channels), LoopKind::Serial,
                 alloc(row.acc, row.type, 1, MemoryScope::Local, body));
}

// The lanes a row splits into: `bytes` over the widest element its output stores and its loads
// along the row move, halved until each store and each such load is a consecutive, aligned group
// of that many (laneBase) and the groups number at least kMinLaneThreads; 1 when none fits.
int64_t rowLanes(const Kernel& k, const AccRow& row, int64_t bytes) {
  std::vector<const Stmt*> stores;
  if (!storesOnly(row.out->body[0], stores) || stores.empty()) return 1;
  std::vector<std::pair<ExprRef, std::string>> groups;  // each index, and its lane variable
  size_t widest = 1;
  int64_t outputs = 0;
  for (const Stmt* st : stores) {
    const Buffer* b = k.find(st->buffer);
    if (!b || b->view) return 1;
    groups.emplace_back(st->index, row.out->var);
    widest = std::max(widest, dtypeSize(b->type));
    outputs = std::max(outputs, b->elements());
  }
  std::vector<ExprRef> loads;
  detail::loadsIn(row.u.value, loads);
  const size_t before = groups.size();
  for (const ExprRef& l : loads)
    if (coefficientOf(l->args[0], var(row.c)) == std::optional<int64_t>(1)) {
      groups.emplace_back(l->args[0], row.c);
      widest = std::max(widest, dtypeSize(l->type));
    }
  if (groups.size() == before) return 1;  // no load moves along the row: lanes gain nothing
  auto fits = [&](int64_t n) {
    if (row.channels % n != 0 || outputs / n < kMinLaneThreads) return false;
    for (const auto& [index, lane] : groups)
      if (!laneBase(index, lane, n)) return false;
    return true;
  };
  int64_t lanes = bytes / static_cast<int64_t>(widest);
  while (lanes > 1 && !fits(lanes)) lanes /= 2;
  return lanes;
}

// -> for co: alloc acc[L] { vectorized for lv: acc[lv] = id; for r...: vectorized for lv:
// acc[lv] = combine(acc[lv], v); vectorized for lv: out }, with c = co * L + lv.
StmtRef laneGroups(const AccRow& row, int64_t lanes, FreshNames& names) {
  const std::string co = names.fresh(row.c + "o"), lv = names.fresh(row.c + "v");
  const ExprRef lane = var(lv);
  const ExprRef channel =
      binary(BinaryOp::Add, binary(BinaryOp::Mul, var(co), intConst(lanes)), lane);
  // `body` at c = co * L + lv, its accumulator acc[lv], in a vectorized loop over lv.
  auto inLanes = [&](const StmtRef& body, const std::string& from) {
    StmtRef s = detail::replaceInStmt(
        body, {{load(row.acc, row.type, var(from)).get(), load(row.acc, row.type, lane)}});
    s = detail::replaceInStmt(s, {{var(from).get(), channel}});
    return forLoop(lv, intConst(lanes), LoopKind::Vectorized, s);
  };
  StmtRef update = inLanes(store(row.acc, lane, row.update->value), row.c);
  for (size_t r = row.vars.size(); r-- > 0;)
    update = forLoop(row.vars[r], row.extents[r], LoopKind::Serial, update);
  StmtRef body =
      block({forLoop(lv, intConst(lanes), LoopKind::Vectorized, store(row.acc, lane, row.identity)),
             update, inLanes(row.out->body[0], row.out->var)});
  return forLoop(co, intConst(row.channels / lanes), LoopKind::Serial,
                 alloc(row.acc, row.type, lanes, MemoryScope::Local, body));
}

}  // namespace

Kernel reductionsPerOutput(const Kernel& k, int64_t bytes) {
  Kernel out = k;
  FreshNames names(k);
  int64_t most = 1;
  out.body = rewrite(k.body, [&](StmtRef s) {
    std::optional<AccRow> row = accRowOf(s);
    if (!row) return s;
    const int64_t lanes = rowLanes(k, *row, bytes);
    most = std::max(most, lanes);
    return lanes > 1 ? laneGroups(*row, lanes, names) : perOutput(*row);
  });
  if (most > 1)
    out.notes.push_back("reductions: up to " + std::to_string(most) +
                        " outputs per thread, each step's loads " + std::to_string(bytes) +
                        " bytes at a time where aligned");
  return out;
}

}  // namespace kiln::kernel
