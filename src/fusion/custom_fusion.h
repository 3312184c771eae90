// Custom fusions: a target's own kernel for a group of library calls, planned as one kernel (as
// XLA registers custom fusions). The CPU registers the inverted-residual block (three
// convolutions run row by row, codegen/cpu/inverted_residual.h); other targets register none.
//
// After the planner has formed its kernels and their post-op chains, each fusion of
// FusionOptions::custom is shown every chain of `length` kernels in which each kernel stores one
// value and the next is the first kernel to read it. The fusion passes (not its pattern),
// declines with its reason, or claims the chain with its reason. The planner then declines a
// claimed chain whose values between the steps are read outside it or are function outputs:
// those must be stored, and a custom kernel's values between steps have no memory. A chain that
// stays claimed becomes one kernel of KernelKind::Custom: its steps are the kernels' library
// calls with their post-ops, and the values between them are internal (Kernel::internal; the
// lowering gives them buffers of role Internal, which the buffer plan gives no memory). Each
// claim and each decline is the Decision of the chain's edges, with its reason (`kiln explain`).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fusion/epilogue.h"
#include "ir/ir.h"

namespace kiln::fusion {

struct Kernel;
struct FusionPlan;

// One step of a custom kernel: the library call of `anchor` with its post-op chain.
struct CustomStep {
  const Node* anchor = nullptr;
  PostOpChain postOps;
};

// What a custom fusion says of a chain of kernels.
struct CustomVerdict {
  enum class Kind : uint8_t {
    Pass,     // not its pattern: no decision is recorded
    Decline,  // its pattern, but it cannot take this chain: the reason is recorded
    Claim,    // one kernel: the reason is recorded
  };
  Kind kind = Kind::Pass;
  std::string reason;
};

using ValueNamer = std::function<std::string(const Value*)>;

struct CustomFusion {
  std::string name;   // "inverted-residual block": the decisions' how is "custom: " + name
  size_t length = 0;  // kernels in a chain
  // The verdict on `chain` (`length` kernels, each reading the previous one's stored value).
  // It must decide from the kernels' nodes, types and post-op chains alone, and claim only what
  // the target's code generation then takes: a claimed kernel is never split again.
  std::function<CustomVerdict(std::span<const Kernel* const> chain, const ValueNamer& name)> match;
};

// Applies `fusions` to `plan` (kernels formed and in order, post-op chains planned, decisions
// recorded): claimed chains become custom kernels at the place of their last kernel, the plan's
// ids, kernelsOf and decisions follow.
void planCustomFusions(const std::vector<CustomFusion>& fusions, const ValueNamer& name,
                       FusionPlan& plan);

// The lines `kiln explain` prints under a custom kernel: each step's call and post-ops, and why.
std::string explainCustomKernel(const Kernel& k, const ValueNamer& name);

}  // namespace kiln::fusion
