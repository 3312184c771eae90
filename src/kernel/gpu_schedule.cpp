// GPU schedule passes. See gpu_schedule.h.
#include "kernel/gpu_schedule.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

using detail::replaceAll;
using detail::rewrite;
using detail::writesAny;

// The top-level statements of a kernel body, through blocks and the scratch buffers declared
// around them (which become temps).
struct TopLevel {
  std::vector<StmtRef> stmts;
  std::vector<Buffer> temps;
  std::set<std::string> scratch;
};

void collect(const StmtRef& s, TopLevel& out) {
  if (!s) return;
  if (s->kind == Stmt::Kind::Block) {
    for (const StmtRef& b : s->body) collect(b, out);
    return;
  }
  if (s->kind == Stmt::Kind::Alloc && s->scope == MemoryScope::Local) {
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

// The single statement `s` wraps (through one-statement blocks).
StmtRef unwrap(StmtRef s) {
  while (s && s->kind == Stmt::Kind::Block && s->body.size() == 1) s = s->body[0];
  return s;
}

bool mappable(const StmtRef& s, bool opaque, const std::set<std::string>& scratch) {
  if (!s || s->kind != Stmt::Kind::For) return false;
  if (s->extent->kind != Expr::Kind::Const || s->extent->i <= 0) return false;
  bool kindOk = opaque ? s->loop == LoopKind::Parallel
                       : s->loop == LoopKind::Serial || s->loop == LoopKind::Parallel;
  return kindOk && !writesAny(s, scratch);
}

StmtRef substituteVars(const StmtRef& s, const std::unordered_map<const Expr*, ExprRef>& replace) {
  std::unordered_map<const Expr*, ExprRef> memo;
  auto sub = [&](ExprRef& e) {
    if (e) e = replaceAll(e, replace, memo);
  };
  return rewrite(s, [&](StmtRef n) {
    sub(n->index);
    sub(n->value);
    sub(n->cond);
    sub(n->extent);
    for (ExprRef& e : n->extents) sub(e);
    return n;
  });
}

StmtRef launch(const StmtRef& s, bool opaque, const std::set<std::string>& scratch,
               int64_t threadsPerBlock, FreshNames& names) {
  std::vector<StmtRef> chain;
  StmtRef body = s;
  for (StmtRef cur = s; mappable(cur, opaque, scratch); cur = unwrap(cur->body[0])) {
    chain.push_back(cur);
    body = cur->body[0];
  }
  int64_t n = 1;
  for (const StmtRef& c : chain) n *= c->extent->i;
  const int64_t threads = std::min(threadsPerBlock, n);
  const int64_t blocks = (n + threads - 1) / threads;
  const std::string bv = names.fresh("blk"), tv = names.fresh("thr");
  ExprRef g = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(bv), intConst(threads)), var(tv));
  std::unordered_map<const Expr*, ExprRef> replace;
  std::vector<ExprRef> keep;  // the replaced variables stay interned while `replace` names them
  int64_t stride = n;
  for (size_t i = 0; i < chain.size(); ++i) {
    const int64_t extent = chain[i]->extent->i;
    stride /= extent;
    ExprRef q = binary(BinaryOp::Div, g, intConst(stride));
    if (i > 0) q = binary(BinaryOp::Rem, q, intConst(extent));
    keep.push_back(var(chain[i]->var));
    replace[keep.back().get()] = q;
  }
  body = substituteVars(body, replace);
  if (blocks * threads != n) body = ifThen(binary(BinaryOp::Lt, g, intConst(n)), body);
  return forLoop(bv, intConst(blocks), LoopKind::GpuBlock,
                 forLoop(tv, intConst(threads), LoopKind::GpuThread, body));
}

}  // namespace

Kernel mapToGpu(const Kernel& k, int64_t threadsPerBlock) {
  TopLevel top;
  collect(k.body, top);
  FreshNames names(k);
  Kernel out = k;
  for (Buffer& b : top.temps) out.buffers.push_back(std::move(b));
  std::vector<StmtRef> launches;
  for (const StmtRef& s : top.stmts) {
    if (s->kind == Stmt::Kind::Call) launches.push_back(s);  // the target runs it
    else launches.push_back(launch(s, k.kind == "opaque", top.scratch, threadsPerBlock, names));
  }
  out.body = block(std::move(launches));
  return out;
}

std::vector<StmtRef> gpuLaunches(const Kernel& k) {
  if (k.body && k.body->kind == Stmt::Kind::Block) return k.body->body;
  return {k.body};
}

}  // namespace kiln::kernel
