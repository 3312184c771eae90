// Concurrent kernels: where a run executes independent kernels at once, each on one thread,
// instead of one after another each on every thread.
//
// Small kernels split poorly over threads (a 7x7 or 14x14 convolution of an inception module
// runs about as long on two threads as on one), while the branches of such a module are
// independent: given one thread each they use every thread with no split at all. The plan walks
// the kernel order and cuts it into windows: a window grows while each new kernel depends on only
// some of the groups of kernels in it (or on none); a kernel that depends on all of them (the
// join of the branches) starts the next window. A window of two or more independent groups
// becomes a concurrent stage when its groups split into `threads` lanes (longest first, each to
// the least loaded lane) whose longest lane, estimated at one thread, takes clearly less than the
// window's kernels one after another on every thread (kRequiredGain), as the target estimates
// them (the CPU: codegen/cpu/kernel_costs.h). Everything else runs as before.
//
// Dependencies are over memory: a kernel depends on an earlier one in its window when one writes
// a value the other reads or writes (a slice of a concatenation written in place counts as its
// concatenation; two writes of different slices of it do not conflict). The buffer plan keeps
// every buffer a stage touches live over the whole stage (planBuffers' `concurrent`), so lanes
// never share memory, and writes nothing in place there.
#pragma once

#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "runtime/buffer_plan.h"

namespace kiln::runtime {

struct ConcurrentStage {
  int first = 0, last = 0;              // the kernels [first, last] of the kernel order
  std::vector<std::vector<int>> lanes;  // each lane's kernels, in kernel order
  std::vector<double> laneCost;         // estimated seconds at one thread
  int groups = 0;                       // independent groups of kernels in the window
  std::string reason;
};

struct ConcurrencyPlan {
  std::vector<ConcurrentStage> stages;  // in kernel order, disjoint
  // The stage kernel i belongs to, or -1.
  std::vector<int> stageOf;
  std::vector<KernelRange> ranges() const;
};

// Each kernel's estimated seconds on one thread and on all `threads` (the target's estimate).
struct KernelCosts {
  std::vector<double> oneThread, allThreads;
};

// `threads` lanes at most; no stage with fewer than 2 threads or costs for other kernels.
ConcurrencyPlan planConcurrency(const std::vector<kernel::Kernel>& kernels, const KernelCosts& cost,
                                int threads);

// A line per stage for `kiln explain` ("" when there is none).
std::string describeConcurrency(const ConcurrencyPlan& plan,
                                const std::vector<kernel::Kernel>& kernels, int threads);

}  // namespace kiln::runtime
