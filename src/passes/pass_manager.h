// The pass manager: runs passes in order with instrumentation (verification, IR dumps, timing,
// printing after chosen passes). The pipeline (pipeline.h) and kiln-opt both run passes through it.
#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/status.h"

namespace kiln {

struct PassManagerOptions {
  // Verify the module after every pass. Always on in debug builds (!NDEBUG).
  bool verifyEach = false;
  // When set, the IR is written there before the first pass (00-input.kir) and after every pass
  // (01-<pass>.kir, 02-<pass>.kir, ...). The files are complete .kir modules that parse back,
  // unless a constant's data is over 4 KiB: that prints as `elided` (as in XLA's dumps, so a
  // model's weights are not written once per pass) unless dumpConstants is set.
  std::string dumpDir;
  bool dumpConstants = false;
  // Collect the wall time of every pass run; timingReport() formats it.
  bool timePasses = false;
  // Names of passes whose output is printed to `printStream` (stderr by default) after they run;
  // "all" prints after every pass. A pass that changed nothing is printed too, so a missing
  // printout never hides a pass that ran.
  std::set<std::string> printAfter;
  std::ostream* printStream = nullptr;
  // The name of the first dump (00-<inputLabel>.kir): "input" in kiln-opt, "import" in kiln.
  std::string inputLabel = "input";
};

// The instrumentation flags that `kiln` and `kiln-opt` share: --verify-each, --time-passes,
// --dump-constants, --dump-dir DIR (or --dump-dir=DIR), --print-after=PASS (or --print-after PASS).
// Looks at args[i]; returns how many arguments it used (0: not one of these flags) or a usage
// error.
StatusOr<size_t> parseInstrumentationFlag(const std::vector<std::string>& args, size_t i,
                                          PassManagerOptions& options);

// The --help lines of those flags.
const char* instrumentationFlagsHelp();

// A pass spec is a flag name, optionally with options after '=':
//   "dce", "specialize-shapes=N=1,S=128", "layout-assignment=nchw".
// Passes that take options are created here; every other name goes to the registry (pass.h).
StatusOr<std::unique_ptr<Pass>> createPassFromSpec(const std::string& spec);

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {});

  const PassManagerOptions& options() const { return options_; }

  // Appends a pass to the list that run() runs.
  void addPass(std::unique_ptr<Pass> pass);
  // Appends the pass named by `spec` (see createPassFromSpec); an error names an unknown pass.
  Status addPass(const std::string& spec);

  // Runs the list in order; returns whether any pass changed the module.
  StatusOr<bool> run(Module& m);
  // Runs one pass with the instrumentation. Errors are prefixed with the pass name; a module
  // that no longer verifies is an error naming the pass that broke it.
  StatusOr<bool> runPass(Pass& pass, Module& m);
  // Same, for a registered pass given by spec.
  StatusOr<bool> runPass(const std::string& spec, Module& m);

  // The timing table: one row per pass name (runs, how many changed the module, total
  // milliseconds, share of the total), in order of first run; empty when nothing was timed.
  std::string timingReport() const;

 private:
  struct PassTiming {
    std::string name;
    int runs = 0;
    int changed = 0;
    double ms = 0;
  };

  Status dump(const Module& m, const std::string& label);
  void recordTiming(const std::string& name, bool changed, double ms);
  bool shouldVerify() const;

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassTiming> timings_;
  int dumpIndex_ = 0;
};

}  // namespace kiln
