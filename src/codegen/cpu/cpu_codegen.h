// The CPU code generator: kernel IR -> LLVM IR -> an ELF object for the host CPU, which Kiln's
// own loader links into the process (object_loader.h).
//
// CpuCompiler turns kernel::Kernels into CompiledKernels: native functions optimized by LLVM's
// -O3 pipeline for the host (AVX2 / AVX-512 where present). Each compile or compileAll makes one
// LLVM module and one object. Compiled code stays alive as long as any CompiledKernel from it
// does, even after the CpuCompiler is gone.
//
// What each kernel IR construct becomes, the threading model and the numerics are described in
// docs/codegen.md. In short:
//  - values compute with IEEE semantics (no fast-math); f16/bf16 compute in f32 and round to
//    nearest even when stored or cast; math functions of f32 run in double (as the reference
//    interpreter does) and round once;
//  - the outermost Parallel loop of a nest runs its iterations on a ThreadPool; inner Parallel
//    loops run serially;
//  - a Call statement calls back into the runtime through a CallHandler. The Call statements of
//    a kernel are numbered 0, 1, 2, ... in program order (a pre-order walk of the statement tree,
//    so a Call inside a loop has one number for all its iterations);
//  - GPU loops, Shared allocations and Barriers are rejected: they are not CPU kernels.
//
// No LLVM type appears in this header; the LLVM code lives in llvm_emit.cpp and cpu_compiler.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cpu/thread_pool.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

struct CodegenOptions {
  int optLevel = 3;       // 0..3: LLVM's default pipeline of that level
  bool vectorize = true;  // loop and SLP vectorizers (and the hints of Vectorized loops)
  // f32 exp, sigmoid and erf as vectorizable approximations (llvm_math.h) rather than libm in
  // double rounded once (the interpreter's bits).
  bool approximateMath = true;
};

// Runs library call number `callIndex` (see above) of a kernel. buffers[j] is the data pointer
// of the call's j-th argument (Stmt::args, in order). context is run()'s context. It may be
// called from several pool threads at once when the Call sits in a Parallel loop; it must not
// throw (compiled code has no unwind tables).
using CallHandler = void (*)(void* context, int32_t callIndex, void** buffers);

// A compiled kernel. run() is thread-safe: many threads may run one kernel at once.
class CompiledKernel {
 public:
  // buffers[i] is the data pointer of kernel.buffers[i], in order, laid out as the kernel IR
  // says (row-major; bool as one byte 0/1; f16/bf16 as their 16-bit patterns).
  virtual void run(void* const* buffers, ThreadPool& pool, CallHandler handler,
                   void* context) const = 0;
  // The symbol of the kernel's entry function (in lastLlvmIr() and the object).
  virtual const std::string& symbol() const = 0;
  virtual ~CompiledKernel() = default;
};

// A kernel whose whole body is one library call (a contraction kernel without loop epilogue)
// as a CompiledKernel that calls the handler directly: no LLVM function, no object code. Its
// symbol() is empty. Null for any other kernel. LLVM spent about 3 ms on each such function (a
// third of resnet18's code generation).
std::unique_ptr<CompiledKernel> callOnlyKernel(const kernel::Kernel& k);

// The exact target this machine's code is generated for: LLVM's host CPU name and its full
// feature string, without creating a compiler. Object code (CpuCompiler::lastObject) only loads
// where this is the same.
std::string hostTarget();
// The host CPU the code is tuned for and its notable features: "haswell (+avx2 +fma +f16c)".
std::string hostCpu();

class CpuCompiler {
 public:
  static StatusOr<std::unique_ptr<CpuCompiler>> create(const CodegenOptions& options = {});
  ~CpuCompiler();
  CpuCompiler(const CpuCompiler&) = delete;
  CpuCompiler& operator=(const CpuCompiler&) = delete;

  // Compiles one kernel. Not thread-safe: one compile at a time per CpuCompiler.
  StatusOr<std::unique_ptr<CompiledKernel>> compile(const kernel::Kernel& k);
  // Compiles kernels as one LLVM module (one optimization pipeline and one object), in order.
  StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
  compileAll(const std::vector<const kernel::Kernel*>& kernels);

  // The optimized LLVM IR text of the last successful compile or compileAll.
  std::string lastLlvmIr() const;
  // The object file (ELF, for this compiler's target) of the last successful compile or
  // compileAll: what linkObject (object_loader.h) takes back, in this process or another on the
  // same target.
  std::string lastObject() const;
  // LLVM's warnings on the last successful compile, one per line: "warning: loop not
  // vectorized: ..." when a Vectorized loop stayed scalar (a libm call in its body, say).
  std::string lastDiagnostics() const;

 private:
  struct Impl;
  explicit CpuCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen::cpu
