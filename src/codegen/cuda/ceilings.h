// The cuda target's ceilings for `kiln bench --roofline`: the device's copy bandwidth and each
// kernel's library calls timed alone, measured now (runtime::DeviceCeilings).
#pragma once

#include <memory>
#include <vector>

#include "codegen/cuda/driver.h"
#include "codegen/cuda/library_call.h"
#include "runtime/target.h"

namespace kiln::codegen::cuda {

// calls: per kernel, per launch, its library call (null for a launch of Kiln's code);
// copyBytes: per kernel, the bytes a copy of its size moves (0: none asked).
StatusOr<runtime::DeviceCeilings>
measureCeilings(const Driver& driver, const std::vector<std::vector<const LibraryCall*>>& calls,
                const std::vector<int64_t>& copyBytes, int repeat);

}  // namespace kiln::codegen::cuda
