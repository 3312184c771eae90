// `kiln bench --roofline`: the machine's ceilings measured in the same run (copy bandwidth, the
// f32 matrix-product rate of the library, and a fused memory-bound Kiln kernel against the copy
// bandwidth), and how close each class of the program's kernels comes to them.
#pragma once

#include <string>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::cli {

struct Ceilings {
  int threads = 1;
  double copyGBs = 0;    // memcpy of 256 MiB, split over `threads` threads, best of 5
  double matmulGFs = 0;  // a 2048^3 f32 dot_general through Kiln (oneDNN), best of 3
  double fusedGBs = 0;   // gelu(x*w+b)+r over 64M f32 elements as one Kiln kernel, best of 3
};

StatusOr<Ceilings> measureCeilings(int threads);

// kernelMs: per run, each kernel's time (Executable::run's kernelMs). Text lines, or a JSON
// object when `json`.
std::string rooflineReport(const runtime::Executable& exe,
                           const std::vector<std::vector<double>>& kernelMs, const Ceilings& c,
                           bool json);

}  // namespace kiln::cli
