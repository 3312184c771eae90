// The compile driver: one function from a module to a runnable program, the same for every
// target (runtime/target.h), in the spirit of Halide's Lower.cpp:
//
//   1. graph passes      the default pipeline (or only the specialisation at -O0), then the
//                        target's own (target.graphPasses: the CPU's split-attention, ...)
//   2. fusion planning   fusion::planFusion: kernels, each decision with its reason
//   3. lowering          kernel::lowerPlan: kernel IR (serial loop nests, Reduce statements and
//                        library calls)
//   4. schedule          target.schedule: the target's kernel-IR passes (kernel/schedule.h)
//   5. code              target.build: the target's code for the kernels (a Program)
//   6. buffers           planBuffers over the kernels (custom kernels' internal values get none)
//
// With a dump directory (CompileOptions::instrumentation.dumpDir) the pass manager writes the
// graph after each pass, and the driver the fusion plan (fusion-plan.txt) and the kernel IR
// before and after scheduling (kernels.txt, kernels-scheduled.txt); the target adds its own
// (the CPU: library-calls.txt, kernels.ll). `kiln explain` is this driver stopped after
// scheduling (after fusion where symbols are unbound).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/stored_kernels.h"
#include "compiler/stored_plan.h"
#include "passes/expose_dynamic_sizes.h"
#include "runtime/target.h"

namespace kiln::compiler {

using runtime::BufferPlan;
using runtime::CompileOptions;
using runtime::CompileTimes;

// Where compile stops: after fusion planning (symbolic shapes may remain), after lowering and
// scheduling, or with the program.
enum class Stage : uint8_t { Planned, Lowered, Program };

struct Compiled {
  std::unique_ptr<Module> module;  // after the passes (moved into the program at Stage::Program)
  fusion::FusionPlan plan;         // Stage::Lowered (the program's at Stage::Program)
  std::vector<kernel::Kernel> kernels;  // Stage::Lowered (likewise)
  StoredProgram stored;  // Stage::Program: the scheduled kernels as an artifact stores them
  // Stage::Lowered: the buffers of the lowered kernels, as the program plans them but at the
  // default alignment (program->buffers() at Stage::Program).
  std::optional<BufferPlan> buffers;
  std::unique_ptr<runtime::Program> program;  // Stage::Program
  CompileTimes times;
  std::string passTimings;           // the pass manager's table when instrumentation.timePasses
  std::vector<std::string> remarks;  // the graph passes' decisions (Module::remarks)
  // Outputs of run-time size (exposeDynamicSizes, before the passes): the program's function
  // has their sizes as extra outputs after the source's.
  std::vector<DynamicDim> dynamic;
};

// Steps 1 to `stopAfter` for `module` on `target`.
StatusOr<Compiled> compile(std::unique_ptr<Module> module, const runtime::Target& target,
                           const CompileOptions& options, Stage stopAfter = Stage::Program);

// The steps one by one, for tools that stop between them (kiln-opt): 1, the graph passes;
// 2, fusion planning with the target's epilogue policy (without a target: the default); 3,
// lowering, which needs static shapes; 4, the target's schedule. Lowering and scheduling verify
// every kernel. Each is timed into `times`; fusion-plan.txt and kernels.txt are dumped with the
// lowered kernels, kernels-scheduled.txt with the scheduled.
Status graphPasses(Module& module, const runtime::Target& target, PassManager& pm,
                   const CompileOptions& options);
fusion::FusionPlan fuse(const Function& f, const runtime::Target* target,
                        const CompileOptions& options, CompileTimes& times);
StatusOr<std::vector<kernel::Kernel>> lower(const Function& f, const fusion::FusionPlan& plan,
                                            const CompileOptions& options, CompileTimes& times);
Status schedule(const runtime::Target& target, std::vector<kernel::Kernel>& kernels,
                const CompileOptions& options, CompileTimes& times);

// Writes `text` to the dump directory as `name` (nothing without one).
Status writeDump(const CompileOptions& options, const std::string& name, const std::string& text);

// What a target's Target::load starts from: the artifact's module (its "module" and "blob"
// sections, as Program::artifactParts writes them), its fusion plan (the "fusion.plan" section,
// stored_plan.h: no fusion planning) and its scheduled kernels (the "kernels.ir" and
// "kernels.values" sections, stored_kernels.h: no lowering, no schedule), timed into `times`.
struct Reloaded {
  std::unique_ptr<Module> module;
  fusion::FusionPlan plan;
  std::vector<kernel::Kernel> kernels;
  CompileTimes times;
};
StatusOr<Reloaded> reload(const runtime::Target& target, const runtime::DecodedArtifact& artifact,
                          const std::string& source, std::shared_ptr<const MappedFile> mapping);

// Step 6: plans the program's buffers and hands them to it, timed into its times().
Status planProgramBuffers(runtime::Program& program);

}  // namespace kiln::compiler
