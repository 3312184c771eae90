// The cuda target's program: the kernels' CUDA C++ (cuda_source.h) compiled by NVRTC into one
// cubin, run through the driver (driver.h) on a stream per run. Weights are uploaded once, at the
// first run; each run has one device allocation (the buffer plan's arena, then the inputs and
// the outputs), copies the inputs in and the outputs out, and nothing else crosses the bus.
// A program compiled over ranges of sizes sizes its run memory for the ranges' top; each run
// binds the sizes from its inputs, packs the arena at them, passes them to the kernels, makes
// its library calls' plans for them on their first use, and captures a CUDA graph per size.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/cublaslt.h"
#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/driver.h"
#include "codegen/cuda/nvrtc.h"
#include "runtime/target.h"

namespace kiln::codegen::cuda {

using runtime::BufferPlan;
using runtime::CompileOptions;
using runtime::CompileTimes;

class CudaProgram final : public runtime::Program {
 public:
  // What the device holds, made at the first run (Device::load).
  struct Device;
  struct RunSizes;
  struct Impl {
    std::unique_ptr<Module> module;
    const Function* f = nullptr;
    CompileOptions options;
    fusion::FusionPlan plan;
    std::vector<kernel::Kernel> kernels;
    BufferPlan buffers;
    CompileTimes times;
    CudaSource source;
    CompiledModule code;
    // The run memory's layout: the arena at 0, then each input and each output, then the
    // library calls' workspace (workspaceOffset; -1: none).
    std::vector<int64_t> inputOffsets, outputOffsets;
    int64_t workspaceOffset = -1;
    int64_t runBytes = 0;
    SymbolBindings maxSizes;  // each symbol at the top of its range (none: a static program)
    mutable std::mutex mu;
    mutable std::shared_ptr<Device> device;  // null until the first run
    // What runs at each size need, made once per size (at most kSizesKept kept).
    mutable std::map<std::vector<int64_t>, std::shared_ptr<const RunSizes>> bySize;
    ~Impl();
  };

  // The source of `kernels` (scheduled for the GPU) and, without `cubin`, NVRTC's compile of it
  // for options.cudaArch (else `arch`); with it, that code (an artifact's).
  static StatusOr<std::unique_ptr<CudaProgram>>
  build(std::unique_ptr<Module> module, fusion::FusionPlan plan,
        std::vector<kernel::Kernel> kernels, const CompileOptions& options, const std::string& arch,
        const CompiledModule* cubin = nullptr);
  explicit CudaProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs) const override;
  StatusOr<double> runTimed(std::span<const Tensor> inputs,
                            std::vector<Tensor>& outputs) const override;
  Status runOnDevice(std::span<const runtime::DeviceTensor> inputs,
                     std::span<const runtime::DeviceTensor> outputs,
                     uintptr_t stream) const override;
  const Function& function() const override { return *impl_->f; }
  const fusion::FusionPlan& plan() const override { return impl_->plan; }
  const std::vector<kernel::Kernel>& kernels() const override { return impl_->kernels; }
  const BufferPlan& buffers() const override { return impl_->buffers; }
  const CompileTimes& times() const override { return impl_->times; }
  CompileTimes& times() override { return impl_->times; }
  int threads() const override { return 1; }
  int uniqueKernels() const override;
  int64_t droppedConstantBytes() const override { return -1; }
  std::string libraryCalls() const override;
  std::string libraryCallDetails() const override;
  std::string uncapturedReason() const override;
  void artifactParts(runtime::ArtifactParts& parts) const override;
  void setBuffers(BufferPlan buffers) override;
  // 256 bytes, as cuMemAlloc aligns: cuBLASLt's algorithms assume it of every matrix.
  int64_t bufferAlignment() const override { return kCudaAlignment; }
  StatusOr<std::optional<runtime::DeviceCeilings>>
  measureDevice(int repeat, const std::vector<int64_t>& copyBytes) const override;

  const CudaSource& source() const { return impl_->source; }
  const CompiledModule& code() const { return impl_->code; }
  // A hash of the generated source: an artifact's code must be the source this Kiln prints.
  std::string sourceHash() const;

 private:
  StatusOr<std::shared_ptr<Device>> device() const;
  StatusOr<std::shared_ptr<const RunSizes>>
  sizesOf(const std::vector<std::vector<int64_t>>& shapes) const;
  Status run(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
             std::vector<double>* kernelMs, double* deviceMs) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen::cuda
