// Post-ops as loops. See post_op_loops.h.
#include "kernel/post_op_loops.h"

#include <cmath>
#include <set>

namespace kiln::kernel {

ExprRef applyPostOp(const PostOp& p, ExprRef x, const std::vector<ExprRef>& idx,
                    const Buffer* operand) {
  auto c = [&](double v) { return floatConst(v, x->type); };
  switch (p.kind) {
    case PostOp::Kind::Add:
    case PostOp::Kind::Mul: {
      // Dim j of the operand is the result's dim operandDims[j], broadcast when of extent 1.
      std::vector<ExprRef> at;
      for (size_t j = 0; j < p.operandShape.size(); ++j)
        at.push_back(p.operandShape[j] == 1 ? intConst(0)
                                            : idx[static_cast<size_t>(p.operandDims[j])]);
      ExprRef y = cast(load(p.operand, operand->type, flatIndex(at, operand->extents())), x->type);
      return binary(p.kind == PostOp::Kind::Add ? BinaryOp::Add : BinaryOp::Mul, x, y);
    }
    case PostOp::Kind::Clamp:
      if (!std::isinf(p.lo)) x = binary(BinaryOp::Max, x, c(p.lo));
      if (!std::isinf(p.hi)) x = binary(BinaryOp::Min, x, c(p.hi));
      return x;
    case PostOp::Kind::Sigmoid: return unary(UnaryOp::Sigmoid, x);
    case PostOp::Kind::Tanh: return unary(UnaryOp::Tanh, x);
    case PostOp::Kind::Gelu: return gelu(x, false);
    case PostOp::Kind::GeluTanh: return gelu(x, true);
    case PostOp::Kind::Swish: return binary(BinaryOp::Mul, x, unary(UnaryOp::Sigmoid, x));
  }
  return x;
}

StatusOr<PostOpLoops> postOpsAsLoops(const Kernel& k, const Stmt& call, size_t keep) {
  size_t operands = 0, kept = 0;
  for (size_t i = 0; i < call.postOps.size(); ++i) {
    operands += !call.postOps[i].operand.empty();
    if (i < keep) kept += !call.postOps[i].operand.empty();
  }
  if (call.kind != Stmt::Kind::Call || call.args.size() <= operands || keep > call.postOps.size())
    return Status::error("kernel " + k.name + ": post-ops of a statement that is no call");
  auto bare = std::make_shared<Stmt>(call);
  bare->postOps.resize(keep);
  bare->args.resize(call.args.size() - operands + kept);
  const Buffer* result = k.find(call.args[call.args.size() - operands - 1]);
  if (!result || !isFloat(result->type))
    return Status::error("kernel " + k.name + ": call " + call.callee() +
                         " has post-ops but no float result buffer");
  FreshNames names(k);
  const ShapeNest nest = shapeNest(result->extents(), names, "p");
  const std::vector<ExprRef>& idx = nest.idx;
  ExprRef flat = flatIndex(idx, result->extents());
  const DType compute = DType::F32;  // f16 and bf16 results too: post-ops compute in f32
  ExprRef x = cast(load(result->name, result->type, flat), compute);
  for (size_t i = keep; i < call.postOps.size(); ++i) {
    const PostOp& p = call.postOps[i];
    const Buffer* operand = p.operand.empty() ? nullptr : k.find(p.operand);
    if (!p.operand.empty() && !operand)
      return Status::error("kernel " + k.name + ": post-op operand %" + p.operand + " of call " +
                           call.callee() + " is no buffer of the kernel");
    if (operand && operand->shape != p.operandShape)
      return Status::error("kernel " + k.name + ": post-op operand %" + p.operand + " of call " +
                           call.callee() + " does not have the post-op's shape");
    x = applyPostOp(p, x, idx, operand);
  }
  return PostOpLoops{bare, nest.wrap(store(result->name, flat, cast(x, result->type)))};
}

}  // namespace kiln::kernel
