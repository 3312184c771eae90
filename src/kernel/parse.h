// Reads kernel IR text, as printKernel writes it, back into kernels: printKernel(parse(text))
// is the text again, so kernel IR can be a test's input and a tool's output.
//
// The text does not spell the types of constants: a constant takes the type its context gives
// (the buffer it is stored to, the other operand of an arithmetic op or comparison, the branch
// of a select), else i64 for an integer and f32 for a float. A library call keeps its op and
// attributes; its graph node (Stmt::node) is null. Buffers hold no graph value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::kernel {

// Every kernel in `text` (kernels one after another; "//" starts a comment to the end of the
// line). Errors are "file:line:col: error: ...".
// The kernels are not verified (verifyKernel does that).
StatusOr<std::vector<Kernel>> parseKernels(std::string_view text, const std::string& filename);

}  // namespace kiln::kernel
