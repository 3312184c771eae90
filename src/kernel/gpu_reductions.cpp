// reductionsPerOutput: the row of accumulators of a reduction that keeps the innermost dim, as a
// Reduce per output element. See gpu_schedule.h.
#include <optional>
#include <unordered_map>

#include "kernel/gpu_schedule.h"
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

// alloc acc[C] { for c0: acc[c0] = id; for r...: for c: acc[c] = combine(acc[c], v);
// for c1: out } -> for c: alloc acc[1] { acc[0] = id; reduce acc[0] over r... of v; out }.
std::optional<StmtRef> perOutput(const StmtRef& s) {
  if (s->kind != Stmt::Kind::Alloc || s->scope != MemoryScope::Local) return std::nullopt;
  const StmtRef b = s->body[0];
  if (!b || b->kind != Stmt::Kind::Block || b->body.size() != 3) return std::nullopt;
  const int64_t channels = s->size;
  const std::string& acc = s->buffer;
  const DType t = s->type;
  const StmtRef init = b->body[0], out = b->body[2];
  if (!isLoopOver(init, channels) || !isLoopOver(out, channels)) return std::nullopt;
  std::vector<std::string> vars;
  std::vector<ExprRef> extents;
  StmtRef cur = unwrap(b->body[1]);
  while (cur && cur->kind == Stmt::Kind::For && !isLoopOver(cur, channels)) {
    if (cur->loop != LoopKind::Serial || cur->extent->kind != Expr::Kind::Const)
      return std::nullopt;
    vars.push_back(cur->var);
    extents.push_back(cur->extent);
    cur = unwrap(cur->body[0]);
  }
  if (vars.empty() || !isLoopOver(cur, channels)) return std::nullopt;
  const std::string c = cur->var;
  const StmtRef update = unwrap(cur->body[0]);
  const StmtRef zero = unwrap(init->body[0]);
  const ExprRef atC = load(acc, t, var(c));
  if (!update || update->kind != Stmt::Kind::Store || update->buffer != acc ||
      update->index != var(c) || !zero || zero->kind != Stmt::Kind::Store || zero->buffer != acc ||
      zero->index != var(init->var))
    return std::nullopt;
  std::optional<Update> u = updateOf(update->value, atC);
  if (!u || zero->value != reduceIdentity(u->kind, t) ||
      detail::loadedBuffers(u->value).count(acc) || !loadsOnlyAt(out->body[0], acc, var(out->var)))
    return std::nullopt;
  StmtRef rest = renameAndScalarize(out->body[0], out->var, c, acc, t);
  StmtRef body = block({store(acc, intConst(0), zero->value),
                        reduceInto(acc, intConst(0), u->kind, vars, extents, u->value), rest});
  return forLoop(c, intConst(channels), LoopKind::Serial,
                 alloc(acc, t, 1, MemoryScope::Local, body));
}

}  // namespace

Kernel reductionsPerOutput(const Kernel& k) {
  Kernel out = k;
  out.body = rewrite(k.body, [](StmtRef s) {
    std::optional<StmtRef> r = perOutput(s);
    return r ? *r : s;
  });
  return out;
}

}  // namespace kiln::kernel
