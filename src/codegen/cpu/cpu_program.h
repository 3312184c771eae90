// The CPU target's program: kernels compiled by LLVM (codegen/cpu/cpu_compiler.cpp), library
// calls through oneDNN (onednn.h) or Kiln's own kernels (inverted_residual.h), run on Kiln's
// thread pool over one arena per run. Internal to the CPU target: cpu_program.cpp builds and
// runs it, cpu_target.cpp writes and loads its artifacts.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cpu/inverted_residual.h"
#include "codegen/cpu/onednn.h"
#include "codegen/cpu/per_shape_calls.h"
#include "codegen/cpu/thread_pool.h"
#include "runtime/concurrency.h"
#include "runtime/target.h"

namespace kiln::codegen::cpu {

using runtime::BufferPlan;
using runtime::CompileOptions;
using runtime::CompileTimes;

// One library call: the oneDNN kernel prepared for its node, or null (the reference kernel runs).
struct LibraryCall {
  const kernel::Stmt* stmt = nullptr;
  std::shared_ptr<LibraryKernel> fast;  // shared by calls that would make the same kernel
  // The library did not take the call's post-ops: they run as a loop nest after the call
  // (kernel/post_op_loops.h), and the call no longer has them.
  bool separatePostOps = false;
  std::string why;         // why the reference kernel runs, or why the post-ops are separate
  bool oneThread = false;  // a small product kept to one thread of a larger pool
  std::string block;       // the inverted-residual block it runs in, if any (Impl::blocks)
  // A call of symbolic sizes: its kernels, made for each run's sizes (per_shape_calls.h).
  std::shared_ptr<PerShapeCall> perShape;
  // The call as a node of parameters (call_node.h) where the reference kernel runs it.
  std::shared_ptr<const CallNode> reference;
};

// A custom kernel the plan formed of an inverted-residual block (its three calls: a 1x1, a
// depthwise and a 1x1 convolution), run by Kiln's own kernel (codegen/cpu/inverted_residual.h).
// `args[j]`: the kernel buffer of each argument of layer j's call.
struct Block {
  std::unique_ptr<InvertedResidualKernel> kernel;
  std::array<std::vector<size_t>, 3> args;
};

// One compiler's object code: the entry symbols of the distinct kernels it holds.
struct ObjectUnit {
  std::string object;
  std::vector<std::string> symbols;
  std::vector<size_t> kernels;  // distinct-kernel index of each symbol
};

// Packed weights of an artifact by (kernel, call index in the kernel).
using PackedByCall = std::map<std::pair<size_t, size_t>, PackedWeights>;

class CpuProgram final : public runtime::Program {
 public:
  struct Impl {
    std::unique_ptr<Module> module;
    const Function* f = nullptr;
    CompileOptions options;
    fusion::FusionPlan plan;
    std::vector<kernel::Kernel> kernels;
    std::vector<std::vector<LibraryCall>> calls;  // per kernel, by call index
    std::map<size_t, Block> blocks;               // by the index of its custom kernel
    std::vector<std::unique_ptr<CpuCompiler>> compilers;
    // Per kernel (shared by identical kernels; null for a custom kernel, which runs its Block).
    std::vector<std::shared_ptr<CompiledKernel>> compiled;
    int uniqueKernels = 0;
    std::unique_ptr<ThreadPool> pool;
    runtime::ConcurrencyPlan concurrency;  // kernels that run at once
    BufferPlan buffers;
    CompileTimes times;
    std::vector<ObjectUnit> objects;  // the code, for artifacts
    std::string kernelsHash;          // of the distinct kernels' IR
    int64_t droppedBytes = -1;  // constants freed (CompileOptions::dropHeldConstants); -1: none
    // Arenas of finished runs, reused by the next ones (one per run in flight at most): a fresh
    // arena would page-fault on every first touch of every run.
    mutable std::mutex arenaMu;
    // 64-byte aligned (kBufferAlignment), on huge pages when large (support/large_buffer.h).
    mutable std::vector<std::shared_ptr<std::byte>> freeArenas;
    // A range program's arena offsets by the symbols' values (BufferPlan::offsetsAt), under
    // arenaMu; emptied when it reaches 64 sizes.
    mutable std::map<std::vector<int64_t>, std::shared_ptr<const std::vector<int64_t>>>
        offsetsBySize;
  };

  // Library kernels and code generation (or, with `objects`, linking the object code of an
  // artifact) for the kernels the driver lowered the module to. The driver plans the buffers
  // next (setBuffers).
  static StatusOr<std::unique_ptr<CpuProgram>>
  build(std::unique_ptr<Module> module, fusion::FusionPlan plan,
        std::vector<kernel::Kernel> kernels, const CompileOptions& options,
        const std::vector<ObjectUnit>* objects, const PackedByCall* prepacked = nullptr);
  explicit CpuProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs) const override;
  Status runAgain(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                  std::vector<double>* kernelMs, const std::set<int>& again,
                  runtime::HotTimes* hot) const override;
  const Function& function() const override { return *impl_->f; }
  const fusion::FusionPlan& plan() const override { return impl_->plan; }
  const std::vector<kernel::Kernel>& kernels() const override { return impl_->kernels; }
  const BufferPlan& buffers() const override { return impl_->buffers; }
  const CompileTimes& times() const override { return impl_->times; }
  CompileTimes& times() override { return impl_->times; }
  int threads() const override { return impl_->pool->numThreads(); }
  int uniqueKernels() const override { return impl_->uniqueKernels; }
  int64_t droppedConstantBytes() const override { return impl_->droppedBytes; }
  const std::string& kernelsHash() const { return impl_->kernelsHash; }
  std::string libraryCalls() const override;
  std::string libraryCallDetails() const override;
  void artifactParts(runtime::ArtifactParts& parts) const override;
  void setBuffers(BufferPlan buffers) override { impl_->buffers = std::move(buffers); }
  std::vector<runtime::KernelRange> concurrentRanges() const override {
    return impl_->concurrency.ranges();
  }
  std::string concurrencyDetails() const override {
    return runtime::describeConcurrency(impl_->concurrency, impl_->kernels, threads());
  }

  // The constants only library kernels hold (in their own layouts), found as calls are
  // prepared; with `drop`, freed as they are found (CompileOptions::dropHeldConstants).
  class HeldConstants;

 private:
  static Status buildInto(Impl& impl, std::unique_ptr<Module> module,
                          const std::vector<ObjectUnit>* objects, const PackedByCall* prepacked);
  std::unique_ptr<Impl> impl_;
};

// A line per library call: what runs it, and why not oneDNN (or not its post-ops) where not
// (library_call_report.cpp; `kiln explain` and the dump's library-calls.txt).
std::string describeLibraryCalls(const CpuProgram::Impl& impl);

}  // namespace kiln::codegen::cpu
