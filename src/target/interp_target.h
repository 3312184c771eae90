// The `interp` target: the reference interpreter (src/interp) behind the Target interface, so
// that an Executable, the compile cache and artifacts work in every build, with or without a
// code-generating target. Its program runs the graph after the passes op by op; the driver's
// kernels and buffer plan are kept for explain's sake but not run.
#pragma once

#include <memory>

#include "runtime/target.h"

namespace kiln::target {

std::unique_ptr<runtime::Target> makeInterpTarget();

}  // namespace kiln::target
