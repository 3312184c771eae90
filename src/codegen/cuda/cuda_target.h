// The cuda target (runtime/target.h): kernels printed as CUDA C++, compiled by NVRTC and run
// through the CUDA driver, for NVIDIA GPUs. Compiling needs no GPU; running needs one.
#pragma once

#include <memory>

#include "runtime/target.h"

namespace kiln::codegen::cuda {

std::unique_ptr<runtime::Target> makeCudaTarget();

}  // namespace kiln::codegen::cuda
