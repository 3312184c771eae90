// Post-ops as loops: a library call whose library did not take its post-ops (the CPU's oneDNN
// refuses some operand broadcasts) becomes the call without them and a loop nest that applies
// them to its result in place, in order, as kernel IR. The plan's epilogue decision stands; only
// where it runs changes, and the target schedules the new nest.
#pragma once

#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

struct PostOpLoops {
  StmtRef call;   // the call with its first `keep` post-ops (and their operand arguments)
  StmtRef loops;  // serial loops over the call's result applying the post-ops
};

// Post-op `p` applied to `x` at the result's multi-index `idx` (of x's type; an add's or mul's
// operand is read from its buffer `operand`, laid out by its extents, and converted to x's type):
// the one definition of what each post-op computes, which postOpsAsLoops and expandCalls
// (expand_calls.h) share.
ExprRef applyPostOp(const PostOp& p, ExprRef x, const std::vector<ExprRef>& idx,
                    const Buffer* operand);

// The pieces for `call` (a Call with post-ops) of kernel `k`: the call keeps its first `keep`
// post-ops (those its library applies), the loops apply the others in f32 (a result of f16 or
// bf16 is converted both ways). An error when the call's result is no float buffer of `k`.
StatusOr<PostOpLoops> postOpsAsLoops(const Kernel& k, const Stmt& call, size_t keep = 0);

}  // namespace kiln::kernel
