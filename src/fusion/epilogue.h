// The epilogue policy: which leading ops of a library call's epilogue the library applies as it
// writes its result (oneDNN post-ops on the CPU; cuBLASLt and cuDNN epilogues on the GPU). The
// planner decides it once per kernel (planPostOps, recorded in Kernel::postOps with the reason
// the chain stops) from the target's EpiloguePolicy; the lowering only transcribes the chain,
// and the rest of the epilogue is a loop nest over the call's result.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::fusion {

struct Kernel;

// Swish: x * sigmoid(x) (SiLU).
enum class PostOpKind : uint8_t { Add, Mul, Clamp, Sigmoid, Tanh, Gelu, GeluTanh, Swish };

// One post-op: add/mul read `operand` from memory (dim j of it is the result's dim
// operandDims[j], broadcast along the others); clamp keeps [lo, hi] (infinite when open).
struct PostOpStep {
  PostOpKind kind = PostOpKind::Add;
  const Value* operand = nullptr;
  std::vector<int64_t> operandDims;
  double lo = 0, hi = 0;
};

// The chain of a kernel: its steps in order, the value the call then writes (the anchor's
// result when there are none), and why the chain stops there ("" when nothing follows).
struct PostOpChain {
  std::vector<PostOpStep> steps;
  const Value* result = nullptr;
  std::string stop;
};

// A target's library epilogues. The default is the CPU's (oneDNN): f32 matrix products and
// convolutions take adds and muls of an input, clamps by constants (relu), sigmoid, tanh, gelu,
// swish.
struct EpiloguePolicy {
  bool postOps = true;  // false: every epilogue op stays a loop nest (--no-post-ops)
  std::vector<OpCode> anchors = {OpCode::DotGeneral, OpCode::Convolution};
  std::vector<DType> types = {DType::F32};
  // Why the library should not take post-op `kind` after `anchor` ("" when it may): a post-op
  // that would cost the call its fastest kernel.
  std::function<std::string(const Node& anchor, PostOpKind kind)> refuses;
};

// The post-op chain of contraction kernel `k` under `policy`; `name` spells values in reasons.
PostOpChain planPostOps(const Kernel& k, const EpiloguePolicy& policy,
                        const std::function<std::string(const Value*)>& name);

const char* postOpKindName(PostOpKind k);  // "add", "clamp", "gelu_tanh", ...

// SiLU x * sigmoid(x) (either operand order) when x's two uses are that sigmoid and that mul
// and the sigmoid's only use is the mul; else both null.
struct Silu {
  const Node* sigmoid = nullptr;
  const Node* mul = nullptr;
};
Silu siluOf(const Value* x);

}  // namespace kiln::fusion
