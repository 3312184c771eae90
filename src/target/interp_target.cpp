// The interp target. See interp_target.h.
#include "target/interp_target.h"

#include "compiler/compile.h"
#include "interp/interpreter.h"

namespace kiln::target {
namespace {

using runtime::BufferPlan;
using runtime::CompileOptions;
using runtime::CompileTimes;

class InterpProgram final : public runtime::Program {
 public:
  InterpProgram(std::unique_ptr<Module> module, fusion::FusionPlan plan,
                std::vector<kernel::Kernel> kernels)
      : module_(std::move(module)), plan_(std::move(plan)), kernels_(std::move(kernels)) {}

  Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs) const override {
    KILN_ASSIGN_OR_RETURN(outputs, interpret(function(), inputs));
    if (kernelMs) kernelMs->assign(kernels_.size(), 0.0);  // no kernel runs
    return Status::ok();
  }
  const Function& function() const override { return *module_->entry(); }
  const fusion::FusionPlan& plan() const override { return plan_; }
  const std::vector<kernel::Kernel>& kernels() const override { return kernels_; }
  const BufferPlan& buffers() const override { return buffers_; }
  const CompileTimes& times() const override { return times_; }
  CompileTimes& times() override { return times_; }
  int threads() const override { return 1; }
  int uniqueKernels() const override { return 0; }
  int64_t droppedConstantBytes() const override { return -1; }
  std::string libraryCalls() const override { return "none (the interpreter runs every op)"; }
  std::string libraryCallDetails() const override { return ""; }
  void artifactParts(runtime::ArtifactParts& parts) const override {
    PrintOptions po;
    po.blob = &parts.blob;
    parts.add("module", printModule(*module_, po));
    parts.sections["blob"] = parts.blob.pieces;
  }
  void setBuffers(BufferPlan buffers) override { buffers_ = std::move(buffers); }

 private:
  std::unique_ptr<Module> module_;
  fusion::FusionPlan plan_;
  std::vector<kernel::Kernel> kernels_;
  BufferPlan buffers_;
  CompileTimes times_;
};

class InterpTarget final : public runtime::Target {
 public:
  std::string name() const override { return "interp"; }
  std::string machine() const override { return "any"; }  // plain C++, the same everywhere
  std::string describeMachine() const override { return "the reference interpreter"; }

  bool runsGraph() const override { return true; }
  // It runs any graph: nothing beyond the driver's pipeline.
  Status graphPasses(Module&, PassManager&, const CompileOptions&) const override {
    return Status::ok();
  }
  // The interpreter runs the graph: its kernels only explain the plan, with the default
  // (the CPU's) library epilogues, left unscheduled.
  fusion::EpiloguePolicy epiloguePolicy() const override { return {}; }
  Status schedule(std::vector<kernel::Kernel>&, const CompileOptions&) const override {
    return Status::ok();
  }

  StatusOr<std::unique_ptr<runtime::Program>> build(std::unique_ptr<Module> module,
                                                    fusion::FusionPlan plan,
                                                    std::vector<kernel::Kernel> kernels,
                                                    const CompileOptions&) const override {
    return std::unique_ptr<runtime::Program>(
        std::make_unique<InterpProgram>(std::move(module), std::move(plan), std::move(kernels)));
  }

  StatusOr<std::unique_ptr<runtime::Program>>
  load(const runtime::DecodedArtifact& s, const std::string& source,
       const CompileOptions& /*options*/,
       std::shared_ptr<const MappedFile> mapping) const override {
    KILN_ASSIGN_OR_RETURN(compiler::Reloaded r, compiler::reload(*this, s, source, mapping));
    auto p = std::make_unique<InterpProgram>(std::move(r.module), std::move(r.plan),
                                             std::move(r.kernels));
    p->times() = r.times;
    KILN_RETURN_IF_ERROR(compiler::planProgramBuffers(*p));
    return std::unique_ptr<runtime::Program>(std::move(p));
  }

  bool isWeightSection(const std::string& name) const override { return name == "blob"; }
};

}  // namespace

std::unique_ptr<runtime::Target> makeInterpTarget() { return std::make_unique<InterpTarget>(); }

}  // namespace kiln::target
