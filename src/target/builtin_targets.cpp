// The targets this build has (runtime::registerBuiltinTargets): the interpreter always, and the
// optional components that were built. The one place that knows which: KILN_HAVE_CPU is set by
// CMake when the CPU target is, KILN_HAVE_CUDA
// when the cuda target is.
#include <mutex>

#include "runtime/target.h"
#include "target/interp_target.h"
#ifdef KILN_HAVE_CPU
#include "codegen/cpu/cpu_target.h"
#endif
#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/cuda_target.h"
#endif

namespace kiln::runtime {

void registerBuiltinTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTarget(target::makeInterpTarget());
#ifdef KILN_HAVE_CPU
    registerTarget(codegen::cpu::makeCpuTarget());
#endif
#ifdef KILN_HAVE_CUDA
    registerTarget(codegen::cuda::makeCudaTarget());
#endif
  });
}

}  // namespace kiln::runtime
