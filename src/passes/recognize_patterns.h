// recognize-patterns: turns the op chains exporters write for GELU, LayerNorm, softmax and
// attention back into composite ops.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Replaces, in every function:
//  - gelu: 0.5 * x * (1 + erf(x / sqrt(2))) (or x * 0.7071...) -> gelu(x); and
//    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> gelu(x) {approximate = tanh}.
//    The factors may come in any order and grouping (x * 0.5, 0.5 * x, (x * 0.5) * (...), ...);
//    x^3 may be pow(x, 3) or x * x * x.
//  - layer_norm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale] [+ bias], means over
//    a suffix of the dims written as a sum reduction times 1/n or divided by n (with or without
//    a keepdims reshape), and the same with * rsqrt(...); the variance may also be written
//    mean(x * x) - mean(x)^2 (ONNX's function body of LayerNormalization). The deviation x - mean
//    must be one value in both places (cse first). Without a scale, the scale is ones.
//  - softmax: exp(y) / sum(exp(y)) over one axis -> softmax(x) when y = x - max(x) over that axis,
//    else softmax(y). Both are softmax mathematically; the composite computes the stable form, so
//    an unstable exp(x)/sum(exp(x)) only changes where it overflowed.
//  - attention: dot_general(softmax(scale * dot_general(q, k^T) [+ mask | select(mask, ., -inf)]),
//    v) over leading batch dims -> attention(q, k, v [, mask]) {scale}, with scales on the scores
//    or on q and k multiplied together; a mask that depends on no input and is exactly the
//    bottom-right-aligned causal pattern (0/-inf, or true/false) becomes causal = true.
// Returns whether anything changed.
//
// Needs: a verified module; run cse (and constant-fold) first so shared values are one value.
// Constants are compared with a tolerance of a few ulps of the dtype (constantTolerance).
// Leaves true: the module verifies; each composite replaces the chain's final value (its users,
// name); chain nodes left unused are erased.
// Does not: match when a constant differs (0.45 * x * (1 + erf(...)) stays), when an inner value
// of the chain is also used outside it in a way the composite would not produce (the chain is
// then kept for those users and the composite added; the result is still correct), or match
// half-matched forms (sqrt(var) + eps is not layer norm). Batch norm folding is fold-batch-norm.
StatusOr<bool> recognizePatterns(Module& m);

}  // namespace kiln
