// The compile driver. See compile.h.
#include "compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "ir/text/text.h"
#include "kernel/buffer_views.h"
#include "kernel/lower.h"
#include "kernel/verify.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

Status writeDump(const CompileOptions& o, const std::string& name, const std::string& text) {
  if (o.instrumentation.dumpDir.empty()) return Status::ok();
  std::string path = (std::filesystem::path(o.instrumentation.dumpDir) / name).string();
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return Status::error("cannot write '" + path + "'");
  return Status::ok();
}

namespace {

// The ranges of `f`'s symbolic dims, as kernel IR's symbols. A dim with none is an error, as is
// one no input has: a run binds the symbols from its inputs' shapes.
StatusOr<std::vector<kernel::Symbol>> symbolsOf(const Function& f, const SymbolRanges& ranges) {
  std::set<std::string> ofInputs;
  for (size_t i = 0; i < f.numParameters(); ++i)
    for (const Dim& d : f.parameter(i)->type().dims())
      if (d.isSymbol()) ofInputs.insert(d.symbolName());
  std::vector<kernel::Symbol> out;
  for (const auto& n : f.nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      for (const Dim& d : n->result(r)->type().dims())
        for (const std::string& symbol : d.factors()) {
          auto it = ranges.find(symbol);
          std::string what =
              "value " + n->result(r)->name() + " has type " + n->result(r)->type().str();
          if (it == ranges.end())
            return Status::error(what +
                                 ": give the sizes of its symbolic dimensions to compile it");
          if (!ofInputs.count(it->first))
            return Status::error(what + ", but no input has the dim " + it->first +
                                 ": a run would not know its size");
          if (std::none_of(out.begin(), out.end(),
                           [&](const kernel::Symbol& s) { return s.name == it->first; }))
            out.push_back({it->first, it->second.lo, it->second.hi});
        }
  return out;
}

}  // namespace

Status graphPasses(Module& module, const runtime::Target& target, PassManager& pm,
                   const CompileOptions& options) {
  if (options.optLevel > 0) {
    PipelineOptions po;
    po.specialize = options.dims;
    po.target = target.layoutTarget(options);
    KILN_RETURN_IF_ERROR(runDefaultPipeline(module, pm, po).status());
  } else if (!options.dims.empty()) {
    std::unique_ptr<Pass> p = makeSpecializeShapesPass(options.dims);
    KILN_RETURN_IF_ERROR(pm.runPass(*p, module).status());
  }
  if (options.precision == "f16" || options.precision == "bf16")
    KILN_RETURN_IF_ERROR(pm.runPass("lower-precision-" + options.precision, module).status());
  else if (options.precision != "f32" && options.precision != "tf32")
    return Status::error("unknown precision '" + options.precision + "' (f32, tf32, f16, bf16)");
  return target.graphPasses(module, pm, options);
}

fusion::FusionPlan fuse(const Function& f, const runtime::Target* target,
                        const CompileOptions& options, CompileTimes& times) {
  auto start = Clock::now();
  fusion::FusionOptions fo;
  fo.fuse = options.fuse;
  if (target) fo.epilogue = target->epiloguePolicy();
  fo.epilogue.postOps = options.postOps;
  // Concatenations in place lay slices out by static extents.
  fo.concatViews = target && target->concatenatesInPlace() && options.ranges.empty();
  fo.storesAlongsideReductions = target && target->storesAlongsideReductions();
  if (target) fo.sortRows = target->sortRowLimits();
  if (target) fo.custom = target->customFusions(options);
  fusion::FusionPlan plan = fusion::planFusion(f, fo);
  times.fusion = msSince(start);
  return plan;
}

// Strings have no kernel IR (their elements are text of any length): a target that runs the
// graph itself gets no kernels for them; any other refuses them rather than copy text as bytes.
StatusOr<bool> hasKernelIR(const Function& f, const runtime::Target& target) {
  const Node* n = firstStringNode(f);
  if (!n) return true;
  if (target.runsGraph()) return false;
  return Status::error(n->describe() +
                           ": string tensors are run by the interpreter only "
                           "(--backend interp); the " +
                           target.name() + " target has no kernels for text",
                       n->loc());
}

StatusOr<std::vector<kernel::Kernel>> lower(const Function& f, const fusion::FusionPlan& plan,
                                            const CompileOptions& options, CompileTimes& times) {
  KILN_ASSIGN_OR_RETURN(std::vector<kernel::Symbol> symbols, symbolsOf(f, options.ranges));
  KILN_RETURN_IF_ERROR(writeDump(options, "fusion-plan.txt", fusion::explainPlan(f, plan)));
  auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<kernel::Kernel> kernels, kernel::lowerPlan(f, plan, symbols));
  KILN_RETURN_IF_ERROR(kernel::applyViews(kernels, plan.concats.views));
  for (const kernel::Kernel& k : kernels) KILN_RETURN_IF_ERROR(kernel::verifyKernel(k));
  times.lowering = msSince(start);
  if (!options.instrumentation.dumpDir.empty())
    KILN_RETURN_IF_ERROR(writeDump(options, "kernels.txt", kernel::printKernels(kernels)));
  return kernels;
}

Status schedule(const runtime::Target& target, std::vector<kernel::Kernel>& kernels,
                const CompileOptions& options, CompileTimes& times) {
  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(target.schedule(kernels, options));
  for (const kernel::Kernel& k : kernels) {
    Status verified = kernel::verifyKernel(k);
    if (!verified.isOk()) return verified.prefix("after the " + target.name() + " schedule");
  }
  times.lowering += msSince(start);
  if (options.instrumentation.dumpDir.empty()) return Status::ok();
  return writeDump(options, "kernels-scheduled.txt", kernel::printKernels(kernels));
}

StatusOr<Reloaded> reload(const runtime::Target& target, const runtime::DecodedArtifact& artifact,
                          const std::string& source, std::shared_ptr<const MappedFile> mapping) {
  Reloaded r;
  KILN_ASSIGN_OR_RETURN(r.module, parseModule(artifact["module"], source + " (module)",
                                              artifact["blob"], std::move(mapping)));
  if (!r.module->entry()) return Status::error(source + ": its module has no function");
  if (!artifact.has("fusion.plan"))
    return Status::error(source + ": the artifact has no fusion plan: compile the model again");
  auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(r.plan, loadPlan(artifact["fusion.plan"], *r.module->entry(), source));
  r.times.fusion = msSince(start);
  KILN_ASSIGN_OR_RETURN(bool kernels, hasKernelIR(*r.module->entry(), target));
  if (!kernels) return r;
  if (!artifact.has("kernels.ir") || !artifact.has("kernels.values"))
    return Status::error(source + ": the artifact has no kernel IR: compile the model again");
  start = Clock::now();
  KILN_ASSIGN_OR_RETURN(r.kernels, loadKernels(artifact["kernels.ir"], artifact["kernels.values"],
                                               *r.module->entry(), source));
  r.times.lowering = msSince(start);
  return r;
}

Status planProgramBuffers(runtime::Program& program) {
  auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(BufferPlan buffers,
                        runtime::planBuffers(program.function(), program.kernels(),
                                             program.bufferAlignment(),
                                             program.concurrentRanges()));
  program.setBuffers(std::move(buffers));
  program.times().buffers = msSince(start);
  return Status::ok();
}

StatusOr<Compiled> compile(std::unique_ptr<Module> module, const runtime::Target& target,
                           const CompileOptions& options, Stage stopAfter) {
  if (!module->entry()) return Status::error("the module has no function");
  Compiled c;
  KILN_ASSIGN_OR_RETURN(c.dynamic, exposeDynamicSizes(*module->entry()));
  auto start = Clock::now();
  PassManager pm(options.instrumentation);
  KILN_RETURN_IF_ERROR(graphPasses(*module, target, pm, options));
  c.times.passes = msSince(start);
  c.passTimings = pm.timingReport();
  c.remarks = module->remarks();
  const Function& f = *module->entry();
  c.plan = fuse(f, &target, options, c.times);
  if (stopAfter == Stage::Planned) {
    c.module = std::move(module);
    return c;
  }
  KILN_ASSIGN_OR_RETURN(bool kernels, hasKernelIR(f, target));
  if (kernels) {
    KILN_ASSIGN_OR_RETURN(c.kernels, lower(f, c.plan, options, c.times));
    KILN_RETURN_IF_ERROR(schedule(target, c.kernels, options, c.times));
  }
  if (stopAfter == Stage::Lowered) {
    start = Clock::now();
    KILN_ASSIGN_OR_RETURN(c.buffers, runtime::planBuffers(f, c.kernels));
    c.times.buffers = msSince(start);
    c.module = std::move(module);
    return c;
  }
  start = Clock::now();
  c.stored = storeKernels(c.kernels, f);
  c.stored.plan = storePlan(c.plan, f);
  KILN_ASSIGN_OR_RETURN(
      c.program, target.build(std::move(module), std::move(c.plan), std::move(c.kernels), options));
  CompileTimes& t = c.program->times();
  t.passes = c.times.passes;
  t.fusion = c.times.fusion;
  t.lowering = c.times.lowering;
  t.codegen = msSince(start);
  KILN_RETURN_IF_ERROR(planProgramBuffers(*c.program));
  c.times = t;
  return c;
}

}  // namespace kiln::compiler
