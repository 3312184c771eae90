// lower-precision: a model computed in f16 or bf16 (CompileOptions::precision, --precision).
#pragma once

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// Every f32 value of every function becomes `low` (f16 or bf16): results of nodes take the type,
// f32 constants are rounded to it (nearest even), each f32 parameter is converted to it where it
// is used and each f32 output converted back to f32 where it is returned, so the signature and
// what callers pass and receive stay f32. Values of other types are left alone. Sums, products,
// softmax and normalisation statistics still accumulate in f32: the interpreter and the kernel
// IR compute f16 and bf16 in f32 and round each stored value (docs/gpu.md states the tolerances).
// Returns whether anything changed.
StatusOr<bool> lowerPrecision(Module& m, DType low);

}  // namespace kiln
