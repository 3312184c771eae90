// The targets this build has (runtime::registerBuiltinTargets): the interpreter always, and the
// optional components that were built. The one place that knows which: KILN_HAVE_CPU is set by
// CMake when the CPU target is.
#include <mutex>

#include "runtime/target.h"
#include "target/interp_target.h"
#ifdef KILN_HAVE_CPU
#include "codegen/cpu/cpu_target.h"
#endif

namespace kiln::runtime {

void registerBuiltinTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTarget(target::makeInterpTarget());
#ifdef KILN_HAVE_CPU
    registerTarget(codegen::cpu::makeCpuTarget());
#endif
  });
}

}  // namespace kiln::runtime
