// The CPU's estimate of each kernel's time on one thread and on all of a run's threads: what the
// concurrency plan weighs (runtime/concurrency.h).
#pragma once

#include <vector>

#include "fusion/fusion.h"
#include "kernel/kernel_ir.h"
#include "runtime/concurrency.h"

namespace kiln::codegen::cpu {

// `kernels` lowered from `plan` (one per plan kernel), for runs on `threads`.
runtime::KernelCosts estimateKernelCosts(const fusion::FusionPlan& plan,
                                         const std::vector<kernel::Kernel>& kernels, int threads);

}  // namespace kiln::codegen::cpu
