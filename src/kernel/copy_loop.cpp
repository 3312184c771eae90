#include "kernel/copy_loop.h"

namespace kiln::kernel {

bool usesVar(const ExprRef& e, const std::string& v) {
  if (!e) return false;
  if (e->kind == Expr::Kind::Var) return e->name == v;
  for (const ExprRef& a : e->args)
    if (usesVar(a, v)) return true;
  return false;
}

ExprRef startOfUnitStride(const ExprRef& index, const std::string& v) {
  if (index->kind == Expr::Kind::Var && index->name == v) return intConst(0);
  if (index->kind != Expr::Kind::Binary || index->binary != BinaryOp::Add) return nullptr;
  const ExprRef& a = index->args[0];
  const ExprRef& b = index->args[1];
  if (!usesVar(a, v)) {
    ExprRef rest = startOfUnitStride(b, v);
    return rest ? binary(BinaryOp::Add, a, rest) : nullptr;
  }
  if (!usesVar(b, v)) {
    ExprRef rest = startOfUnitStride(a, v);
    return rest ? binary(BinaryOp::Add, rest, b) : nullptr;
  }
  return nullptr;
}

std::optional<CopyLoop> matchCopyLoop(const Stmt& loop) {
  if (loop.kind != Stmt::Kind::For) return std::nullopt;
  if (loop.loop != LoopKind::Serial && loop.loop != LoopKind::Vectorized &&
      loop.loop != LoopKind::Unrolled)
    return std::nullopt;
  const Stmt* body = loop.body.empty() ? nullptr : loop.body[0].get();
  while (body && body->kind == Stmt::Kind::Block && body->body.size() == 1)
    body = body->body[0].get();
  if (!body || body->kind != Stmt::Kind::Store) return std::nullopt;
  const std::string& v = loop.var;
  CopyLoop c;
  c.store = body;
  c.dst = body->buffer;
  c.type = body->value->type;
  c.dstStart = startOfUnitStride(body->index, v);
  if (!c.dstStart) return std::nullopt;
  const Expr* load = body->value.get();
  if (load->kind == Expr::Kind::Select) {
    const ExprRef& cond = load->args[0];
    const ExprRef& a = load->args[1];
    const ExprRef& b = load->args[2];
    if (usesVar(cond, v)) return std::nullopt;
    c.cond = cond;
    if (a->kind == Expr::Kind::Load && b->kind == Expr::Kind::Const) {
      load = a.get();
      c.fill = b;
      c.fillWhen = false;
    } else if (b->kind == Expr::Kind::Load && a->kind == Expr::Kind::Const) {
      load = b.get();
      c.fill = a;
      c.fillWhen = true;
    } else {
      return std::nullopt;
    }
  }
  if (load->kind != Expr::Kind::Load || load->type != c.type) return std::nullopt;
  c.src = load->name;
  // Within one buffer the loop may read what it wrote; a block move would not.
  if (c.src == c.dst) return std::nullopt;
  c.srcStart = startOfUnitStride(load->args[0], v);
  if (!c.srcStart) return std::nullopt;
  return c;
}

}  // namespace kiln::kernel
