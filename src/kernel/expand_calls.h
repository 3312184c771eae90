// Kiln's own loops for library calls: every Call of dot_general or convolution becomes serial
// loops over its result computing what the library would, so that a target can run a call a
// library refuses (the GPU target's fallback) or run without libraries at all (the CPU target
// with CompileOptions::libraryCalls = false, `--no-library-calls`).
//
// Per result element, as the lowering writes a reduction (lower_reduce.cpp): a local
// accumulator, zeroed, a Reduce<sum> of the products over the contracted dims into it, then one
// store of the value rounded to the result's type with the call's post-ops applied in order
// (applyPostOp, post_op_loops.h), each rounded to the result's type as the graph's ops would.
//
//   serial for o0 in [0, 4) {
//     serial for o1 in [0, 16) {
//       local %acc0: f64[1] {
//         %acc0[0] = 0.0
//         %acc0[0] = reduce<sum>(r0 in [0, 8)) f64(%x[o0 * 8 + r0]) * f64(%w[r0 * 16 + o1])
//         %y[o0 * 16 + o1] = max(f32(%acc0[0]) + %b[o1], 0.0)
//
// The numerics are the reference interpreter's (interp/eval_contractions.cpp): products and sums
// of f32 in f64, of f16/bf16 in f32, of f64 in f64 and of integers in their own type (wrapping),
// rounded once; the contracted dims are summed in the interpreter's order (dot_general: the
// contracting dims in the order the attributes list them; convolution: input features, then the
// window's taps in row-major order), which the Reduce keeps unless a schedule reassociates it.
// Convolutions take every attribute of the op: strides, low/high padding (negative too), lhs and
// rhs dilation, feature and batch group counts, dimension_numbers. A tap in the padding or in
// a hole of the lhs dilation contributes nothing: its product is selected away, and its loads
// read a clamped index, so every load stays in bounds (code generators evaluate both arms).
//
// Reads only the Call's op, attrs, args and postOps and the kernel's buffers (never Stmt::node),
// so it works on kernel IR that parseKernels read. Calls of other ops stay as they are.
#pragma once

#include <functional>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// `k` with every dot_general and convolution Call, anywhere in its body, that `which` selects
// (all of them without it) replaced by its loops. An error names the kernel, the call and why:
// attributes that do not fit the operands' shapes, a result buffer of another shape than the op's,
// operands of different or bool types, post-op operands that are not buffers of the kernel,
// post-ops on an integer result.
StatusOr<Kernel> expandCalls(const Kernel& k,
                             const std::function<bool(const Stmt&)>& which = nullptr);

}  // namespace kiln::kernel
