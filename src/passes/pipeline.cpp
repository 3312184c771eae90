// The default pipeline, in one function: runDefaultPipeline below reads top to bottom as the
// order in which Kiln optimises a graph.
#include "passes/pipeline.h"

namespace kiln {

// Simplify, fold, merge and sweep until a round changes nothing (or the bound is reached: the
// module is then valid, just possibly not fully simplified).
StatusOr<bool> runCleanup(Module& m, PassManager& pm, int maxRounds) {
  bool changed = false;
  for (int round = 0; round < maxRounds; ++round) {
    bool roundChanged = false;
    for (const char* pass : {"algebraic-simplify", "constant-fold", "cse", "dce"}) {
      KILN_ASSIGN_OR_RETURN(bool c, pm.runPass(pass, m));
      roundChanged = roundChanged || c;
    }
    if (!roundChanged) break;
    changed = true;
  }
  return changed;
}

std::vector<std::string> defaultPipelineDescription() {
  return {"specialize-shapes=<bindings> (when given)",
          "propagate-shapes",
          "(algebraic-simplify constant-fold cse dce)*",
          "recognize-patterns",
          "fold-batch-norm",
          "(algebraic-simplify constant-fold cse dce)*",
          "layout-assignment=<target>",
          "(algebraic-simplify constant-fold cse dce)*"};
}

StatusOr<bool> runDefaultPipeline(Module& m, PassManager& pm, const PipelineOptions& options) {
  bool changed = false;
  auto step = [&](StatusOr<bool> r) -> Status {
    if (!r) return r.status();
    changed = changed || *r;
    return Status::ok();
  };
  int rounds = options.maxCleanupRounds;

  // 1. Shapes: bind the symbols the caller fixed, then resolve those the graph determines, so the
  //    shape arithmetic below sees as many static extents as possible.
  if (!options.specialize.empty()) {
    std::unique_ptr<Pass> specialize = makeSpecializeShapesPass(options.specialize);
    KILN_RETURN_IF_ERROR(step(pm.runPass(*specialize, m)));
  }
  KILN_RETURN_IF_ERROR(step(pm.runPass("propagate-shapes", m)));

  // 2. Clean up what exporters write: shape computations on constants, identity reshapes and
  //    casts, duplicated initializers. Patterns match more reliably on the cleaned graph.
  KILN_RETURN_IF_ERROR(step(runCleanup(m, pm, rounds)));

  // 3. Recognise composites (GELU, layer norm, softmax, attention) so backends can use fused
  //    kernels, and fold batch norms into the convolutions before them.
  KILN_RETURN_IF_ERROR(step(pm.runPass("recognize-patterns", m)));
  KILN_RETURN_IF_ERROR(step(pm.runPass("fold-batch-norm", m)));
  KILN_RETURN_IF_ERROR(step(runCleanup(m, pm, rounds)));

  // 4. Layout: convolutions in the target's layout, transposes pushed to the graph's edges; the
  //    cleanup folds the transposed weights into new constants.
  std::unique_ptr<Pass> layout = makeLayoutAssignmentPass(options.target);
  KILN_RETURN_IF_ERROR(step(pm.runPass(*layout, m)));
  KILN_RETURN_IF_ERROR(step(runCleanup(m, pm, rounds)));
  return changed;
}

StatusOr<bool> runDefaultPipeline(Module& m, const PipelineOptions& options,
                                  const PassManagerOptions& instrumentation,
                                  std::string* timingReport) {
  PassManager pm(instrumentation);
  StatusOr<bool> r = runDefaultPipeline(m, pm, options);
  if (timingReport) *timingReport += pm.timingReport();
  return r;
}

}  // namespace kiln
