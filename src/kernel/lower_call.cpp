// Lowering of contraction, attention and opaque kernels: the library call of the anchor op, the
// head of its epilogue folded into post-ops, the rest as loop nests (see lower.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "kernel/lower_opaque.h"
#include "kernel/lowerer.h"

namespace kiln::kernel {

PostOp::Kind postOpKind(fusion::PostOpKind k) {
  switch (k) {
    case fusion::PostOpKind::Add: return PostOp::Kind::Add;
    case fusion::PostOpKind::Mul: return PostOp::Kind::Mul;
    case fusion::PostOpKind::Clamp: return PostOp::Kind::Clamp;
    case fusion::PostOpKind::Sigmoid: return PostOp::Kind::Sigmoid;
    case fusion::PostOpKind::Tanh: return PostOp::Kind::Tanh;
    case fusion::PostOpKind::Gelu: return PostOp::Kind::Gelu;
    case fusion::PostOpKind::GeluTanh: return PostOp::Kind::GeluTanh;
    case fusion::PostOpKind::Swish: return PostOp::Kind::Swish;
  }
  return PostOp::Kind::Add;
}

}  // namespace kiln::kernel

namespace kiln::kernel::lowering {

const Value* Lowerer::transcribePostOps(const fusion::PostOpChain& chain, const Node* anchor,
                                        std::vector<PostOp>& ops, std::string& why) {
  for (const fusion::PostOpStep& step : chain.steps) {
    PostOp p;
    p.kind = postOpKind(step.kind);
    p.lo = step.lo;
    p.hi = step.hi;
    if (step.operand) {
      p.operand = bufferFor(step.operand, BufferRole::Input).name;
      // Its largest shape where it is symbolic: the target reads its extents from the buffer.
      p.operandShape = bufferFor(step.operand, BufferRole::Input).shape;
      p.operandDims = step.operandDims;
    }
    ops.push_back(std::move(p));
  }
  why = chain.stop;
  return chain.result ? chain.result : anchor->result(0);
}

StatusOr<StmtRef> Lowerer::lowerCall() {
  const Node* a = k_.anchor;
  std::vector<std::string> args;
  for (const Value* v : a->operands()) args.push_back(bufferFor(v, BufferRole::Input).name);
  std::vector<PostOp> postOps;
  std::string why;
  const Value* last = transcribePostOps(k_.postOps, a, postOps, why);
  for (size_t r = 0; r < a->numResults(); ++r) {
    const Value* v = r == 0 ? last : a->result(r);
    BufferRole role = isStored(v) ? BufferRole::Output : BufferRole::Temp;
    const Buffer& b = bufferFor(v, role);
    args.push_back(b.name);
    // The rest of the epilogue reads the call's result from its buffer.
    std::string bname = b.name;
    std::vector<ExprRef> extents = b.extents();
    DType dt = v->type().dtype();
    overrides_[v] = [bname, extents, dt](const Index& idx) {
      return cast(load(bname, dt, flatIndex(idx, extents)), computeType(dt));
    };
  }
  for (const PostOp& p : postOps)
    if (!p.operand.empty()) args.push_back(p.operand);
  StmtRef c = call(a->op(), a->attrs(), args, std::move(postOps));
  c->origin = a->origin();
  c->loc = a->loc();
  if (k_.kind == fusion::KernelKind::Opaque) {  // loops instead of the call (lower_opaque.h)
    const auto mid = args.begin() + static_cast<std::ptrdiff_t>(a->numOperands());
    std::vector<std::string> ins(args.begin(), mid);
    std::vector<std::string> outs(mid, mid + static_cast<std::ptrdiff_t>(a->numResults()));
    KILN_ASSIGN_OR_RETURN(std::optional<StmtRef> loops, lowerOpaqueOp(*a, ins, outs, sortRows_));
    if (loops) c = *loops;
  }
  std::vector<const Value*> rest;
  for (const Value* v : k_.outputs)
    if (v != last && v->def() != a) rest.push_back(v);
  if (rest.empty()) return c;
  c->note = why;
  KILN_ASSIGN_OR_RETURN(StmtRef after, storeAll(rest));
  return block({c, after});
}

StatusOr<StmtRef> Lowerer::lowerCustom() {
  const std::set<const Value*> internal(k_.internal.begin(), k_.internal.end());
  // A value between steps is Internal wherever it appears; the others are the kernel's inputs
  // and outputs.
  auto buffer = [&](const Value* v, BufferRole role) {
    return bufferFor(v, internal.count(v) ? BufferRole::Internal : role).name;
  };
  std::vector<StmtRef> calls;
  for (const fusion::CustomStep& step : k_.steps) {
    const Node* a = step.anchor;
    if (a->numResults() != 1)
      return Status::error("custom kernel step " + name(a->result(0)) + " (" +
                           std::string(opName(a->op())) + ") has " +
                           std::to_string(a->numResults()) + " results, not one");
    std::vector<std::string> args;
    for (const Value* v : a->operands()) args.push_back(buffer(v, BufferRole::Input));
    std::vector<PostOp> postOps;
    std::string why;
    const Value* last = transcribePostOps(step.postOps, a, postOps, why);
    if (!internal.count(last) && !isStored(last))
      return Status::error("custom kernel step " + name(a->result(0)) + " (" +
                           std::string(opName(a->op())) + ") writes " + name(last) +
                           ", which is neither stored nor passed to the next step");
    args.push_back(buffer(last, BufferRole::Output));
    for (const PostOp& p : postOps)
      if (!p.operand.empty()) args.push_back(p.operand);
    calls.push_back(call(a->op(), a->attrs(), args, std::move(postOps)));
    calls.back()->origin = a->origin();
    calls.back()->loc = a->loc();
  }
  return block(std::move(calls));
}
}  // namespace kiln::kernel::lowering
