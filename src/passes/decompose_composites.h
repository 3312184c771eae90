// decompose-composites: rewrites composite ops into core ops.
#pragma once

#include <functional>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Replaces every softmax, log_softmax, layer_norm, batch_norm_inference, gelu, attention, lstm
// and gru node of every function by the core ops that compute it (reduce, broadcast_in_dim,
// elementwise arithmetic, dot_general, iota/reverse/compare for the causal mask, select, convert),
// inserted where the composite stood. Returns whether anything changed.
//
// Needs: each composite node passes verifyNode (it is checked first; an invalid node is an error
// naming it). Symbolic dimensions are fine: extents that the arithmetic needs at run time (the
// element count of a layer_norm, attention's default scale 1/sqrt(D), the causal offset Sk - Sq)
// are computed by ops, not read from the types.
// Leaves true: no composite op remains; the module verifies; each replacement has the composite's
// result type, value name, location and origin. f16/bf16 composites compute in f32 between a
// convert in and a convert out, as the reference kernels do, so results agree to rounding.
// Does not: simplify or share the ops it creates (two softmaxes over one input stay two chains),
// remove nodes that were already unused (run dce), or decompose selectively.
StatusOr<bool> decomposeComposites(Module& m);

// split-attention: replaces every attention node by dot_general (q k^T), the scale, mask and
// causal mask as above, a softmax composite over the keys, and dot_general (p v): the form for
// a backend with fast matrix products but no fused attention kernel (the CPU backend). f16/bf16
// attention computes in f32 between converts, as in decomposeComposites, unless `storeLow`
// (split-attention-stored-low, the CUDA target): then q, k, v, the scores and the probabilities
// stay f16/bf16 in memory, for a backend whose products accumulate in f32 and whose softmax
// computes in f32 registers, as torch's f16 attention does: half the bytes between the kernels.
// Returns whether anything changed.
StatusOr<bool> splitAttention(Module& m, bool storeLow = false);

// decompose-recurrences: unrolls every lstm and gru node (passes/unroll_recurrence.h) that `keep`
// does not keep, for targets without a whole-sequence recurrence kernel. Returns whether anything
// changed.
StatusOr<bool> decomposeRecurrences(Module& m,
                                    const std::function<bool(const Node&)>& keep = nullptr);

}  // namespace kiln
