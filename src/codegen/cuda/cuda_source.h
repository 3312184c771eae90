// Kernel IR -> CUDA C++: the source the cuda target compiles with NVRTC (nvrtc.h). Printing needs
// no CUDA toolkit, so every build can show it (`kiln-opt --emit-cuda`) and test it.
//
// Each launch of a scheduled kernel (kernel/gpu_schedule.h: a gpu_block loop over a gpu_thread
// loop) is one `extern "C" __global__` function named <kernel>_<n>, whose parameters are the
// kernel's buffers in order (inputs const); a launch that would print the same function as an
// earlier one (up to the names of the function, its buffers and its scratch) launches that one.
// Values follow the CPU code generator's registers: f16 and bf16 compute in float, bool buffers
// hold a byte, and the numerics are the reference interpreter's (NaN-propagating max/min,
// saturating float -> int, defined integer division by zero and shifts past the width), except that
// f32 math functions run in float, not double.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cuda {

// One launch of a kernel: its function and its grid and block sizes (one dimension each). A
// kernel with symbols (sizes known when it runs) takes their values after its buffers, as i64 in
// the kernel's order, and its grid may be an expression of them (gridExtent, evaluated at launch;
// `grid` is then its largest value).
struct Launch {
  std::string function;
  int64_t grid = 1, block = 1;
  kernel::ExprRef gridExtent;          // null: the grid is `grid` at every size
  const kernel::Stmt* call = nullptr;  // a library call the target runs instead (no function)
};

struct CudaSource {
  std::string source;                         // one translation unit for all kernels
  std::vector<std::vector<Launch>> launches;  // per kernel, in order
};

// The source of `kernels`, each scheduled by mapToGpu; an error names the kernel and the
// statement it cannot print.
StatusOr<CudaSource> emitCuda(const std::vector<kernel::Kernel>& kernels);

}  // namespace kiln::codegen::cuda
