// GPU schedule passes: the kernel IR a GPU target launches (the cuda target's schedule,
// codegen/cuda/cuda_target.cpp). Like the passes of schedule.h, each is a rule over kernel IR.
#pragma once

#include <cstdint>

#include "kernel/kernel_ir.h"

namespace kiln::kernel {

// Each top-level statement of `k` becomes one launch:
//   gpu_block for b in [0, B) { gpu_thread for t in [0, T) { if (b * T + t < n) { ... } } }
// The loops at the top of a nest, perfectly nested, whose iterations may run in any order (the
// rule of parallelizeOuter: they write no scratch buffer declared outside them; in an opaque
// kernel, the loops its lowering made parallel) are flattened into one index g = b * T + t over
// their n iterations, each loop variable recovered from g; the guard is there only when B * T
// overhangs n. A nest without such a loop runs on one thread. Scratch buffers declared around
// the launches become the kernel's temp buffers (device memory, which its launches share, in
// order). T = min(threadsPerBlock, n). Reduce statements must be lowered first.
Kernel mapToGpu(const Kernel& k, int64_t threadsPerBlock);

// The launches of a kernel mapToGpu scheduled: its top-level statements.
std::vector<StmtRef> gpuLaunches(const Kernel& k);

}  // namespace kiln::kernel
