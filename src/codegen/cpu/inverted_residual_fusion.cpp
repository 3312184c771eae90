// The inverted-residual block as a custom fusion of the CPU target (inverted_residual.h): the
// planner's predicate is InvertedResidualKernel::create itself, run on the plan's nodes and
// post-op chains, so code generation takes every block the plan forms.
#include <array>
#include <optional>
#include <span>

#include "codegen/cpu/inverted_residual.h"
#include "fusion/fusion.h"
#include "kernel/lower.h"

namespace kiln::codegen::cpu {
namespace {

using fusion::CustomVerdict;

// The plan's post-op chain of `k` as the call's post-ops will be (the lowering transcribes the
// chain: kernel/lower_call.cpp); nullopt when an operand's type is not static.
std::optional<std::vector<kernel::PostOp>> callPostOps(const fusion::Kernel& k) {
  std::vector<kernel::PostOp> ops;
  for (const fusion::PostOpStep& step : k.postOps.steps) {
    kernel::PostOp p;
    p.kind = kernel::postOpKind(step.kind);
    p.lo = step.lo;
    p.hi = step.hi;
    if (step.operand) {
      if (!step.operand->type().isStatic()) return std::nullopt;
      p.operandShape = step.operand->type().staticDims();
      p.operandDims = step.operandDims;
    }
    ops.push_back(std::move(p));
  }
  return ops;
}

// The value kernel `k`'s call writes: its anchor's result after the post-ops.
const Value* callResult(const fusion::Kernel& k) {
  return k.postOps.result ? k.postOps.result : k.anchor->result();
}

// Why the chain's kernels are not three calls in a row, each reading the one before's result
// only as its input ("" when they are): a kernel that runs loops after its call, or a layer that
// reads the previous result as its weights or a post-op operand.
std::string notCallsInARow(std::span<const fusion::Kernel* const> chain,
                           const fusion::ValueNamer& name) {
  for (size_t i = 0; i < chain.size(); ++i) {
    const fusion::Kernel& k = *chain[i];
    if (k.outputs != std::vector<const Value*>{callResult(k)})
      return "the kernel of " + name(k.anchor->result()) +
             " stores more than its call's result (loops after the call's post-ops)";
    if (i == 0) continue;
    const Value* prev = callResult(*chain[i - 1]);
    bool asInputOnly = k.anchor->operand(0) == prev && k.anchor->operand(1) != prev;
    for (const fusion::PostOpStep& s : k.postOps.steps) asInputOnly &= s.operand != prev;
    if (!asInputOnly)
      return name(k.anchor->result()) + " reads " + name(prev) + " other than as its input";
  }
  return "";
}

CustomVerdict match(std::span<const fusion::Kernel* const> chain, const fusion::ValueNamer& name) {
  // The pattern: three convolution calls, the middle one grouped (a depthwise candidate).
  for (const fusion::Kernel* k : chain)
    if (k->kind != fusion::KernelKind::Contraction || k->anchor->op() != OpCode::Convolution)
      return {};
  if (chain[1]->anchor->attrInt("feature_group_count") <= 1) return {};
  std::string notInARow = notCallsInARow(chain, name);
  if (!notInARow.empty()) return {CustomVerdict::Kind::Decline, notInARow};
  // Kiln's block kernel is made for fixed sizes.
  for (const fusion::Kernel* k : chain)
    if (!k->anchor->operand(0)->type().isStatic())
      return {CustomVerdict::Kind::Decline, name(k->anchor->operand(0)) +
                                                " has sizes known only when it runs (" +
                                                k->anchor->operand(0)->type().str() + ")"};
  std::array<std::vector<kernel::PostOp>, 3> ops;
  for (size_t i = 0; i < 3; ++i) {
    auto p = callPostOps(*chain[i]);
    if (!p) return {CustomVerdict::Kind::Decline, "a post-op operand has a symbolic type"};
    ops[i] = std::move(*p);
  }
  auto k = InvertedResidualKernel::create({chain[0]->anchor, &ops[0]}, {chain[1]->anchor, &ops[1]},
                                          {chain[2]->anchor, &ops[2]});
  if (!k) return {CustomVerdict::Kind::Decline, k.status().message()};
  return {
      CustomVerdict::Kind::Claim,
      "1x1, 3x3 depthwise and 1x1 f32 convolutions on nhwc/hwio with bias and clamp post-ops, " +
          std::to_string((*k)->weightBytes()) + " bytes of 1x1 weights (at most " +
          std::to_string(InvertedResidualKernel::maxWeightBytes()) +
          "), AVX-512 present: " + (*k)->describe()};
}

}  // namespace

fusion::CustomFusion invertedResidualFusion() { return {"inverted-residual block", 3, match}; }

}  // namespace kiln::codegen::cpu
