// The CPU target (runtime/target.h): LLVM-generated kernels and oneDNN library calls on Kiln's
// thread pool, for the host CPU. Its graph passes, programs (cpu_program.h) and artifacts.
#pragma once

#include <memory>

#include "runtime/target.h"

namespace kiln::codegen::cpu {

std::unique_ptr<runtime::Target> makeCpuTarget();

}  // namespace kiln::codegen::cpu
