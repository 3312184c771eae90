// fold-batch-norm: folds inference batch normalisation (and other per-channel affine maps) into the
// weights of the convolution or dot_general before it; the others' constant factor into one
// vector.
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Rewrites, when y = convolution(x, W) or dot_general(x, W) with W a constant, optionally
// followed by + broadcast_in_dim(b) with b a constant vector along the output feature dim:
//   batch_norm_inference(y, scale, offset, mean, var) with constant parameters along that dim
//     -> contraction(x, W * k) + broadcast(offset + (b - mean) * k), k = scale / sqrt(var + eps)
//   y * broadcast_in_dim(c) with c a constant vector along that dim (a decomposed or folded
//   batch norm leaves this)
//     -> contraction(x, W * c) + broadcast(b * c)
// A batch norm left (f32, constant parameters, no contraction to fold into: one after a
// concatenation) becomes (x - mean) * k + offset with k = scale / sqrt(var + eps) a constant, so
// that no square root or division runs at each element.
// The scaled weights are computed in double and rounded once to the weight dtype, so results move
// by rounding only. Returns whether anything changed.
//
// Needs: a verified module; float dtypes.
// Leaves true: the module verifies; the folded contraction has the original's attributes and
// result type; the old weights are erased when nothing else uses them.
// Does not: fold when the contraction or the bias add has other users (the original would have to
// stay, duplicating the weights); fold non-constant parameters; fold a batch norm that comes
// before the contraction (that needs the padding to be zero-aware).
StatusOr<bool> foldBatchNorm(Module& m);

}  // namespace kiln
