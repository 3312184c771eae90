// CUDA C++ -> cubin through NVRTC (no GPU needed).
#pragma once

#include <string>

#include "support/status.h"

namespace kiln::codegen::cuda {

struct CompiledModule {
  std::string cubin;  // for `arch`
  std::string arch;   // "sm_90"
  std::string log;    // NVRTC's warnings
};

// Compiles `source` (named `name` in messages) for the real architecture `arch` ("sm_90"); an
// error carries NVRTC's log.
StatusOr<CompiledModule> compileCuda(const std::string& source, const std::string& name,
                                     const std::string& arch);

// "NVRTC 13.0".
std::string nvrtcVersionString();

}  // namespace kiln::codegen::cuda
