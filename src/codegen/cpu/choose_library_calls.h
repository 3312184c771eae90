// Choosing how each library call of a kernel runs on the CPU: the first step of the CPU target's
// schedule (CpuTarget::schedule), so that the decision and its reason are in the kernel IR and in
// the kernel's notes (`kiln explain` prints them), not found out when the program runs.
//
// For each dot_general and convolution Call with a graph node, oneDNN is asked what it would
// make of it (probeOneDnnKernel: primitive descriptors only). oneDNN's kernel creation itself
// tries the formulations it has (the IR layout, a blocked layout, unit dims on their own
// strides, a deconvolution for a transposed convolution) and refuses a reference
// implementation (onednn_internal.h, slowImplementation). Then, in order:
//   1. oneDNN takes the call with its post-ops: the call stays; the note names the kernel.
//   2. oneDNN takes it only without its post-ops: the note says so; the program runs the
//      post-ops as a loop nest after the call (kernel/post_op_loops.h). The program splits them
//      (cpu_program.cpp).
//   3. Otherwise the call becomes Kiln's own loops (kernel/expand_calls.h), never the
//      interpreter's kernel at run time nor a library's reference code.
// Calls without a node (parsed kernel IR) and of other ops are left as they are, and so are the
// calls of custom kernels (the CPU schedule skips them: an inverted-residual block takes its
// calls' bias, clamp and residual whatever oneDNN would do with them).
//
// Does not: pick between fast implementations (oneDNN's own order, and the choices of
// onednn_convolution.cpp, stand), or move a formulation into the graph (im2col + matmul is the
// graph pass convolution-to-matmul, for speed, not for slow paths).
#pragma once

#include "kernel/kernel_ir.h"
#include "runtime/target.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// `k` with each library call in the formulation it will run in, and one note per call
// (Kernel::notes) saying which and, where it is not oneDNN with every post-op, why.
Status chooseLibraryCalls(kernel::Kernel& k, const runtime::CompileOptions& options);

}  // namespace kiln::codegen::cpu
