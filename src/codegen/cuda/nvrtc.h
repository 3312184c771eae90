// CUDA C++ -> cubin through NVRTC (no GPU needed).
#pragma once

#include <string>

#include "support/status.h"

namespace kiln::codegen::cuda {

struct CompiledModule {
  std::string cubin;    // for `arch`
  std::string arch;     // "sm_90"
  std::string log;      // NVRTC's warnings
  int cudaVersion = 0;  // of the NVRTC that compiled it, as the driver counts: 13000 for 13.0
};

// Whether a driver supporting CUDA `driverVersion` (cuDriverGetVersion's count) loads code of
// `code`'s toolkit: a cubin needs a driver at least as new; the error says both versions.
Status checkDriverFor(const CompiledModule& code, int driverVersion);

// Compiles `source` (named `name` in messages) for the real architecture `arch` ("sm_90"); an
// error carries NVRTC's log.
StatusOr<CompiledModule> compileCuda(const std::string& source, const std::string& name,
                                     const std::string& arch);

// "NVRTC 13.0".
std::string nvrtcVersionString();

}  // namespace kiln::codegen::cuda
