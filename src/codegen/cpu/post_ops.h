// The CPU's own implementation of library-call post-ops (kernel_ir.h, PostOp): applied in
// place to a call's f32 result when its library kernel cannot take them (the reference kernel
// ran, or oneDNN has no optimized implementation with those post-ops).
#pragma once

#include <cstdint>
#include <vector>

#include "kernel/kernel_ir.h"

namespace kiln::codegen::cpu {

// Applies `ops` in order to `result` (f32, dense row-major, of `shape`). `operands` holds the
// add/mul operands' data (f32, dense row-major, of each op's operandShape), one per add or mul
// in order.
void applyPostOps(const std::vector<kernel::PostOp>& ops, const std::vector<int64_t>& shape,
                  float* result, const void* const* operands);

}  // namespace kiln::codegen::cpu
