// A test helper: one Executable run from two host threads at once.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime {

// Runs `exe` 20 times on each of two host threads at once, thread t on inputs[t]. Returns each
// thread's first output of its last run; `errors[t]` is thread t's first error ("" when none).
inline std::vector<Tensor> runOnTwoHostThreads(const Executable& exe,
                                               const std::vector<std::vector<Tensor>>& inputs,
                                               std::vector<std::string>& errors) {
  std::vector<Tensor> got(2);
  errors.assign(2, "");
  auto work = [&](size_t t) {
    for (int rep = 0; rep < 20; ++rep) {
      auto r = exe.run(inputs[t]);
      if (!r) {
        errors[t] = r.status().str();
        return;
      }
      got[t] = (*r)[0];
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  return got;
}

}  // namespace kiln::runtime
