// The targets this build has (runtime::registerBuiltinTargets). The one place that knows which
// target components were built: KILN_HAVE_CPU is set by CMake when the CPU target is.
#include <mutex>

#include "runtime/target.h"
#ifdef KILN_HAVE_CPU
#include "codegen/cpu/cpu_target.h"
#endif

namespace kiln::runtime {

void registerBuiltinTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef KILN_HAVE_CPU
    registerTarget(codegen::cpu::makeCpuTarget());
#endif
  });
}

}  // namespace kiln::runtime
