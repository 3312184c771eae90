// An Executable: a function compiled for concrete shapes, ready to run many times.
//
// compile() runs the whole stack: the default pipeline (unless optLevel 0), fusion planning,
// lowering to kernel IR, code generation for the backend, and buffer assignment. run() is
// thread-safe: each call has its own arena and outputs, and kernels share only read-only state.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusion/fusion.h"
#include "ir/ir.h"
#include "ir/tensor.h"
#include "kernel/kernel_ir.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"
#include "runtime/buffer_plan.h"
#include "support/status.h"

namespace kiln::runtime {

struct CompileOptions {
  std::string backend = "cpu";  // "cpu": LLVM-generated kernels on Kiln's thread pool
  int threads = 0;              // <= 0: the hardware's thread count
  int optLevel = 1;             // 1: the default graph pipeline first; 0: none
  bool fuse = true;             // false: one kernel per op
  bool postOps = true;          // false: no library post-ops (kernel::LowerOptions::postOps)
  SymbolBindings dims;          // sizes of symbolic dimensions (every symbol must be bound)
  // The pass manager's instrumentation (--verify-each, --dump-dir, --time-passes,
  // --print-after). With a dump directory, the kernel IR (kernels.txt) and the optimised LLVM IR
  // (kernels.ll) are written there too.
  PassManagerOptions instrumentation;
};

// Wall time of each compile phase, in milliseconds.
struct CompileTimes {
  double passes = 0, fusion = 0, lowering = 0, codegen = 0, buffers = 0;
  double total() const { return passes + fusion + lowering + codegen + buffers; }
};

class Executable {
 public:
  static StatusOr<std::unique_ptr<Executable>> compile(std::unique_ptr<Module> module,
                                                       const CompileOptions& options);
  ~Executable();

  // One tensor per parameter, in order, of the types the executable was compiled for. Returns
  // one tensor per function output.
  StatusOr<std::vector<Tensor>> run(std::span<const Tensor> inputs) const;

  const Function& function() const;
  const fusion::FusionPlan& plan() const;
  const std::vector<kernel::Kernel>& kernels() const;
  const BufferPlan& buffers() const;
  const CompileTimes& times() const;
  int threads() const;
  // What runs the library calls: "oneDNN: 20 convolution, 1 dot_general; reference: 1 gather".
  std::string libraryCalls() const;
  // A line per library call: its kernel, op and implementation ("k1_contraction: convolution:
  // oneDNN convolution (..., post-ops add+clamp)"), or why the reference kernel runs it.
  std::string libraryCallDetails() const;
  // The per-pass timing table when instrumentation.timePasses was set, else "".
  const std::string& passTimings() const;
  std::string hostCpu() const;
  // How many distinct kernels were compiled (kernels identical up to names share code).
  int uniqueKernels() const;

 public:
  struct Impl;

 private:
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
