// Strided slices in kernel IR. See buffer_views.h.
#include "kernel/buffer_views.h"

#include <unordered_map>

#include "kernel/schedule_util.h"
#include "kernel/simplify.h"

namespace kiln::kernel {
namespace {

using Strided = std::map<std::string, Buffer::View>;

Strided stridedBuffers(const Kernel& k) {
  Strided out;
  for (const Buffer& b : k.buffers)
    if (b.view && b.view->rowLength != b.view->pitch) out.emplace(b.name, *b.view);
  return out;
}

ExprRef mapLoads(const ExprRef& e, const Strided& strided,
                 std::unordered_map<const Expr*, ExprRef>& memo) {
  if (!e) return e;
  if (auto m = memo.find(e.get()); m != memo.end()) return m->second;
  ExprRef out = e;
  if (!e->args.empty()) {
    std::vector<ExprRef> args;
    bool changed = false;
    for (const ExprRef& a : e->args) {
      args.push_back(mapLoads(a, strided, memo));
      changed |= args.back() != a;
    }
    if (changed) out = withArgs(e, std::move(args));
  }
  if (out->kind == Expr::Kind::Load)
    if (auto v = strided.find(out->name); v != strided.end())
      out = load(out->name, out->type, viewIndex(v->second, out->args[0]));
  memo.emplace(e.get(), out);
  return out;
}

}  // namespace

ExprRef viewIndex(const Buffer::View& v, const ExprRef& i) {
  if (v.rowLength == v.pitch) return i;
  ExprRef row = binary(BinaryOp::Div, i, intConst(v.rowLength));
  ExprRef col = binary(BinaryOp::Rem, i, intConst(v.rowLength));
  return binary(BinaryOp::Add, binary(BinaryOp::Mul, row, intConst(v.pitch)), col);
}

StmtRef indexViews(const Kernel& k, const StmtRef& s) {
  const Strided strided = stridedBuffers(k);
  if (strided.empty() || !s) return s;
  std::unordered_map<const Expr*, ExprRef> memo;
  auto sub = [&](ExprRef& e) { e = mapLoads(e, strided, memo); };
  return detail::rewrite(s, [&](StmtRef n) {
    sub(n->index);
    sub(n->value);
    sub(n->cond);
    sub(n->extent);
    for (ExprRef& e : n->extents) sub(e);
    if (n->kind == Stmt::Kind::Store || n->kind == Stmt::Kind::Reduce)
      if (auto v = strided.find(n->buffer); v != strided.end())
        n->index = viewIndex(v->second, n->index);
    return n;
  });
}

StatusOr<Kernel> resultThroughTemp(const Kernel& k, const Stmt& call) {
  const size_t at = callOperands(call);
  const Buffer* out = at < call.args.size() ? k.find(call.args[at]) : nullptr;
  if (!out || !out->view)
    return Status::error("kernel " + k.name + ": the result of " + call.callee() +
                         " is not a strided slice");
  FreshNames names(k);
  Buffer temp;
  temp.name = names.fresh("dense");
  temp.type = out->type;
  temp.shape = out->shape;
  temp.role = BufferRole::Temp;
  auto dense = std::make_shared<Stmt>(call);
  dense->args[at] = temp.name;
  const ShapeNest nest = shapeNest(out->shape, names, "c");
  ExprRef flat = flatIndex(nest.idx, out->shape);
  StmtRef copy =
      nest.wrap(store(out->name, viewIndex(*out->view, flat), load(temp.name, out->type, flat)));
  Kernel r = replaceStmt(k, &call, block({dense, copy}));
  r.buffers.push_back(std::move(temp));
  return simplifyIndices(r);
}

Status applyViews(std::vector<Kernel>& kernels,
                  const std::map<const Value*, fusion::StoredView>& views) {
  if (views.empty()) return Status::ok();
  for (Kernel& k : kernels) {
    bool any = false;
    for (Buffer& b : k.buffers) {
      auto v = b.value ? views.find(b.value) : views.end();
      if (v == views.end()) continue;
      b.view = Buffer::View{v->second.of, v->second.offset, v->second.rowLength, v->second.pitch};
      any = true;
      if (k.kind == "custom")
        return Status::error("kernel " + k.name + " (custom) stores %" + b.name +
                             ", a slice of a concatenation written in place: a custom kernel "
                             "writes dense rows");
    }
    if (!any || stridedBuffers(k).empty()) continue;
    k.body = indexViews(k, k.body);
    k = simplifyIndices(k);
  }
  return Status::ok();
}

}  // namespace kiln::kernel
