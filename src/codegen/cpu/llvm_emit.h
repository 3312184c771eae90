// Internal to src/codegen/cpu: the kernel IR -> LLVM IR emitter, used by cpu_compiler.cpp.
// Only forward declarations of LLVM types appear here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::codegen::cpu {

// The runtime function compiled code calls for a Parallel loop; the object loader resolves the
// symbol kKilnParallelFor to it. pool is the ThreadPool* given to the kernel entry; fn(ctx, begin,
// end) runs iterations [begin, end) of the loop.
inline constexpr const char* kKilnParallelFor = "kiln_cpu_parallel_for";
extern "C" void kiln_cpu_parallel_for(void* pool, int64_t n,
                                      void (*fn)(void* ctx, int64_t begin, int64_t end), void* ctx);

// The C type of a kernel entry: entry(buffers, pool, handler, context).
using KernelEntry = void (*)(void* const* buffers, void* pool, void* handler, void* context);

struct EmitOptions {
  bool vectorize = true;  // attach llvm.loop.vectorize.enable to Vectorized loops
  // f32 exp (also in sigmoid) and erf (also in gelu) as vectorizable arithmetic (llvm_math.h)
  // instead of double-precision libm calls rounded once; false gives the interpreter's bits.
  bool approximateMath = true;
  std::string cpu;       // "target-cpu" attribute of every function
  std::string features;  // "target-features" attribute of every function
  // "prefer-vector-width" of every function, in bits; 0 keeps LLVM's choice for `cpu`.
  int preferVectorBits = 0;
};

// Emits one entry function per kernel into `m` (named prefix + kernel name, sanitized), with
// the functions its Parallel loops are outlined into. Returns the entry names, in order, or a
// user error for constructs the CPU cannot run (GPU loops, Shared memory, barriers) and for
// malformed kernels (unknown buffers or variables, mismatched types).
StatusOr<std::vector<std::string>> emitKernels(llvm::Module& m,
                                               const std::vector<const kernel::Kernel*>& kernels,
                                               const std::string& prefix,
                                               const EmitOptions& options);

}  // namespace kiln::codegen::cpu
