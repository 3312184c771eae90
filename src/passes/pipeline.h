// The default graph optimisation pipeline.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "passes/layout_assignment.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"
#include "support/status.h"

namespace kiln {

struct PipelineOptions {
  // Symbols to bind before anything else (empty: keep every symbol).
  SymbolBindings specialize;
  // The layout preferences of the backend that will run the module.
  LayoutTarget target = LayoutTarget::cpu();
  // Bound on the rounds of each simplify/fold/cse/dce cleanup; a round that changes nothing ends
  // it earlier (the usual case: two or three rounds).
  int maxCleanupRounds = 8;
};

// The passes of the default pipeline in order, as kiln-opt flags; "(...)*" marks a cleanup group
// run to a fixed point. For --help texts and documentation.
std::vector<std::string> defaultPipelineDescription();

// Runs the default pipeline on `m` through `pm` (which verifies, dumps, times and prints as its
// options say). Returns whether the module changed.
StatusOr<bool> runDefaultPipeline(Module& m, PassManager& pm, const PipelineOptions& options = {});

// The pipeline's cleanup: algebraic-simplify, constant-fold, cse and dce until a round changes
// nothing or `maxRounds` rounds ran. For a target's graph passes that expand ops (an unrolled
// recurrence's slices and reshapes).
StatusOr<bool> runCleanup(Module& m, PassManager& pm, int maxRounds = 8);

// Same, with a pass manager of its own configured by `instrumentation`; the timing table, when
// asked for, is appended to `timingReport` (if not null).
StatusOr<bool> runDefaultPipeline(Module& m, const PipelineOptions& options,
                                  const PassManagerOptions& instrumentation,
                                  std::string* timingReport = nullptr);

}  // namespace kiln
