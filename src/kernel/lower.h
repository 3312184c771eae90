// Lowering: a kernel of the fusion plan into kernel IR.
//
//   - loop kernels: one loop nest per stored output shape; each stored value is computed at its
//     index by inlining its producers (elementwise ops apply at the same index, injective ops
//     rewrite the index: broadcast, reshape, transpose, slice, pad, concatenate, reverse, iota);
//   - reduction kernels: a loop nest over the rows (the kept dims) with a local accumulator per
//     row; softmax, log_softmax and layer_norm make two or three passes over the row; the fused
//     producers are recomputed in each pass and the epilogue runs in the last;
//   - contraction, attention and opaque kernels: a library call of the anchor op (the runtime
//     runs it), then the epilogue as a loop nest over its result.
// The outermost loop of a nest is parallel, the innermost (of a loop kernel) vectorized.
//
// Needs: static shapes (specialise first). Ops without a loop lowering (gather, dynamic_slice,
// resize, ...) must be the anchor of an opaque kernel (fusion::patternOf makes them so).
#pragma once

#include "fusion/fusion.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

StatusOr<Kernel> lowerKernel(const Function& f, const fusion::Kernel& k);

// Every kernel of a plan, in the plan's order.
StatusOr<std::vector<Kernel>> lowerPlan(const Function& f, const fusion::FusionPlan& plan);

}  // namespace kiln::kernel
