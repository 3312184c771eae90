// Lowering: a kernel of the fusion plan into kernel IR.
//
//   - loop kernels: one loop nest per stored output shape; each stored value is computed at its
//     index by inlining its producers (elementwise ops apply at the same index, injective ops
//     rewrite the index: broadcast, reshape, transpose, slice, pad, concatenate, reverse, iota);
//   - reduction kernels: a loop nest over the rows (the kept dims) with a local accumulator per
//     row, filled by a Reduce statement (per run of the innermost dim, updated by a loop over
//     that run, when the reduction keeps that dim); softmax, log_softmax and layer_norm make two
//     or three passes over the row; the fused producers are recomputed in each pass and the
//     epilogue runs in the last;
//   - contraction and attention kernels: a library call of the anchor op (the runtime runs it)
//     with the leading part of the epilogue as post-ops of the call, as the plan decided
//     (fusion::Kernel::postOps), then the rest of the epilogue as a loop nest over its result;
//   - opaque kernels (scatter, resize, grid_sample, sort, top_k, cumsum): whole-buffer loop
//     nests of the anchor op (lower_opaque.h), scheduled there; a case that lowering leaves out
//     (sort and top_k rows past 4096 elements) stays a library call.
// Every other loop is serial and every reduction a Reduce: the target's schedule passes
// (kernel/schedule.h) choose parallel and vector loops and how reductions run.
//
// Needs: static shapes, or symbols with ranges (lowerPlan). The ops of lower_opaque.h have no
// lowering inside a loop or reduction kernel: they must be the anchor of an opaque kernel
// (fusion::patternOf makes them so).
#pragma once

#include "fusion/fusion.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

StatusOr<Kernel> lowerKernel(const Function& f, const fusion::Kernel& k,
                             const std::vector<Symbol>& symbols = {});

// The kernel IR's kind of a planned post-op.
PostOp::Kind postOpKind(fusion::PostOpKind k);

// Every kernel of a plan, in the plan's order.
// `symbols`: the ranges of the symbolic dims the kernels may keep (kernel IR's Symbol); a
// value with a symbolic dim outside them is an error, as is an op whose lowering needs static
// extents (the elementwise ops, broadcast, reshape, transpose and iota in loop kernels lower over
// symbols so far).
StatusOr<std::vector<Kernel>> lowerPlan(const Function& f, const fusion::FusionPlan& plan,
                                        const std::vector<Symbol>& symbols = {});

}  // namespace kiln::kernel
