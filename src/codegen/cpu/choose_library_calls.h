// Choosing how each library call of a kernel runs on the CPU: the first step of the CPU target's
// schedule (CpuTarget::schedule), so that the decision and its reason are in the kernel IR and in
// the kernel's notes (`kiln explain` prints them), not found out when the program runs.
//
// First each convolution call gets the blocked layout it computes in, if any (Stmt::layout,
// onednn.h blockedConvolutionLayout). Then for each dot_general and convolution Call, oneDNN is
// asked what it would make of it (probeOneDnnKernel on the call's node, call_node.h: primitive
// descriptors only). oneDNN's kernel creation itself
// tries the formulations it has (the IR layout, a blocked layout, unit dims on their own
// strides, a deconvolution for a transposed convolution) and refuses a reference
// implementation (onednn_internal.h, slowImplementation). Then, in order:
//   1. oneDNN takes the call with its post-ops: the call stays; the note names the kernel.
//   2. oneDNN takes it only without its post-ops: the note says so; the program runs the
//      post-ops as a loop nest after the call (kernel/post_op_loops.h). The program splits them
//      (cpu_program.cpp).
//   3. Otherwise the call becomes Kiln's own loops (kernel/expand_calls.h), never the
//      interpreter's kernel at run time nor a library's reference code.
// Calls of other ops are left as they are, and so are the calls of custom kernels (the CPU schedule
// skips them: an inverted-residual block takes its calls' bias, clamp and residual whatever oneDNN
// would do with them).
//
// Does not: pick between fast implementations (oneDNN's own order, and the choices of
// onednn_convolution.cpp, stand), or move a formulation into the graph (im2col + matmul is the
// graph pass convolution-to-matmul, for speed, not for slow paths).
#pragma once

#include <optional>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "kernel/kernel_ir.h"
#include "runtime/target.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Per library call of a kernel (kernel::callsOf order), what oneDNN's kernel for it computes in a
// blocked layout (ProbedKernel::blockable, layout); nullopt where it computes on the IR's layout
// or takes its post-ops separately.
using CallBlocking = std::vector<std::optional<ProbedKernel>>;

// `k` with each library call in the formulation it will run in, and one note per call
// (Kernel::notes) saying which and, where it is not oneDNN with every post-op, why. `blocking`:
// the kernel's calls' blocked buffers, for storeBlockedValues.
Status chooseLibraryCalls(kernel::Kernel& k, const runtime::CompileOptions& options,
                          CallBlocking& blocking);

// Values stored in a library kernel's blocked layout, set as Buffer::layout on each of their
// buffers: a value written by a kernel that is one library call, read only by such kernels, each
// listing the value's buffer among its blockable ones (`blocking`, per kernel) with the same
// layout, and not a function output. Between two blocked convolutions such a value then needs no
// reorders. Kernels whose calls did not change since chooseLibraryCalls (later schedule passes
// rewrite loops, not calls).
void storeBlockedValues(std::vector<kernel::Kernel>& kernels,
                        const std::vector<CallBlocking>& blocking);

}  // namespace kiln::codegen::cpu
