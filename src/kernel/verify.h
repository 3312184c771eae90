// The kernel IR verifier: checks what every backend relies on, so that a lowering or schedule
// bug is reported at the kernel that has it, with the statement, rather than as wrong code:
//
//   - every load, store, call argument and post-op operand names a buffer of the kernel or of
//     an enclosing Alloc, and no name is declared twice (buffers, allocs, loop variables);
//   - every variable is the variable of an enclosing loop;
//   - indices and loop extents are i64, conditions (If, Select) bool;
//   - a store's value has its buffer's type, a load has its buffer's type;
//   - the operands of an arithmetic or comparison op have one type, and its result the type the
//     op gives (bool for comparisons and the is_* predicates);
//   - an Alloc has a positive size; a Call has its op's operands and results, their types the
//     op's type rule gives where its buffers are static; a buffer in a blocked layout is read and
//     written by calls only;
//   - launch structure: a kernel with GPU loops is a sequence of library calls and launches,
//     each `gpu_block for { gpu_thread for { ... } }` with a constant thread count of at most
//     1024; barriers and shared scratch are inside a launch;
//   - a Copy moves elements of one type between buffers in memory, both indices proven multiples
//     of its element count.
//
// It does not check bounds (an index within its buffer): the index simplifier's ranges could,
// later. The compile driver runs it on every kernel after lowering.
#pragma once

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// Ok, or the first violation: "kernel k3_loop: store to %y: value is f64, the buffer f32 (in
// `%y[i0] = ...`)".
Status verifyKernel(const Kernel& k);

}  // namespace kiln::kernel
