// `kiln bench --roofline`: the machine's ceilings measured in the same run (copy bandwidth, the
// matrix-product rate of the library, and a fused memory-bound Kiln kernel against the copy
// bandwidth), and how close each class of the program's kernels comes to them; on a device,
// also each library call against the same call made alone.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::cli {

struct Ceilings {
  std::string where;            // "1 thread", or the device: "cuda"
  double copyGBs = 0;           // host: memcpy of 256 MiB over the threads; device: its own copy
  double copyOneThreadGBs = 0;  // host: the same on one thread (a lane of a concurrent stage)
  std::string matmul;           // "f32 2048^3"
  double matmulGFs = 0;         // that dot_general through Kiln (oneDNN, cuBLASLt), best of 3
  double fusedGBs = 0;          // gelu(x*w+b)+r over 64M elements as one Kiln kernel, best of 3
  // Device targets: per kernel of the program, its library calls timed alone (-1: none) bare
  // and with their epilogues, the same calls of the program timed in its run's memory without
  // the kernel's loops (-1: none), and for a memory-bound kernel a copy that moves as many bytes
  // (-1: none).
  std::vector<double> aloneMs, aloneEpilogueMs, aloneColdMs, callsMs, copyMs;
  // Host: per kernel, its time when run again at once after its run in a program run (its data
  // hot in the caches of the threads that ran it; -1: not run again), and then on one thread
  // (-1: not run so, or the run has one), measureHotKernels.
  std::vector<double> hotMs, hotOneThreadMs;
};

// The ceilings of the machine `exe` runs on, measured now: the host's for a target that runs
// there, the device's otherwise; the product and the fused kernel are compiled with `base`
// (the same target, precision and threads).
StatusOr<Ceilings> measureCeilings(const runtime::Executable& exe, runtime::CompileOptions base);

// Each memory-bound kernel of `exe` run a second time at once, `repeat` runs of `inputs`
// (Executable::runAgain): the medians go to c.hotMs and c.hotOneThreadMs. Nothing on a target
// that cannot.
Status measureHotKernels(const runtime::Executable& exe, std::span<const Tensor> inputs,
                         std::vector<Tensor>& outputs, int repeat, Ceilings& c);

// kernelMs: per run, each kernel's time (Executable::run's kernelMs). Text lines, or a JSON
// object when `json`.
std::string rooflineReport(const runtime::Executable& exe,
                           const std::vector<std::vector<double>>& kernelMs, const Ceilings& c,
                           bool json);

}  // namespace kiln::cli
