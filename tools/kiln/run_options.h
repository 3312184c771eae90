// Command-line options of `kiln run` and their parser.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass_manager.h"
#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::cli {

// One --input flag: NAME=FILE.npy (name set) or FILE.npy (name empty: bound in order).
struct InputArg {
  std::string name;
  std::string file;
};

struct RunOptions {
  std::string program;
  std::vector<InputArg> inputs;
  bool randomInputs = false;
  uint64_t seed = 0;
  std::map<std::string, int64_t> dims;  // --dim SYMBOL=N
  SymbolRanges ranges;                  // --dim SYMBOL=LO..HI
  std::string outputDir;                // empty: outputs are not written
  std::string backend = "cpu";
  std::string cudaArch;  // --cuda-arch: the cuda target's GPU architecture (empty: the GPU's)
  std::string precision = "f32";  // --precision: f32, tf32, f16 or bf16
  bool precisionGiven = false;    // an artifact must then have been compiled in it
  bool backendGiven = false;      // likewise for --backend
  int threads = 0;         // --threads: the CPU backend's thread pool (0: one per hardware thread)
  int compileThreads = 0;  // --compile-threads (0: one per hardware thread)
  // 1: the default optimisation pipeline before running (the default); 0: the program as loaded
  // (only specialised to the input shapes).
  int optLevel = 1;
  bool postOps = true;            // --no-post-ops: epilogues of library calls stay loop nests
  bool reassociate = true;        // --no-reassociate: float reductions in the interpreter's order
  bool concurrentKernels = true;  // --no-concurrent-kernels: kernels one after another
  bool libraryCalls = true;  // --no-library-calls: matrix products and convolutions as Kiln's loops
  // --no-recompile: inputs of other sizes in a symbolic dim than an artifact's are an error
  // instead of a compile for them (CompileOptions::recompile).
  bool recompile = true;
  // The compile cache of the cpu backend: --cache-dir DIR, default runtime::defaultCacheDir();
  // --no-cache: none.
  std::string cacheDir;
  bool cache = true;
  uint64_t cacheLimitMiB = 4096;       // --cache-limit
  PassManagerOptions instrumentation;  // --verify-each, --dump-dir, --time-passes, --print-after
  bool help = false;
};

// Parses the arguments after `run`. Every error is a usage error (exit status 2).
StatusOr<RunOptions> parseRunOptions(const std::vector<std::string>& args);

// The value of a thread-count flag (--threads, --compile-threads): 1 to 1024.
StatusOr<int> parseThreadCount(const std::string& flag, const std::string& value);

// The cpu backend's compile options for `o`: `dims` are the symbol sizes bound from the inputs,
// `sourceKey` identifies the program for the compile cache (no cache when empty or --no-cache).
runtime::CompileOptions compileOptions(const RunOptions& o, const SymbolBindings& dims,
                                       const std::string& sourceKey);

// The options of loading a .kiln artifact for `o`: its threads, and the constants that library
// kernels hold in their own layout freed (run and bench never serialize); recompiles (inputs of
// other sizes in a symbolic dim) go through the compile cache.
runtime::CompileOptions loadOptions(const RunOptions& o);
// An artifact given options that shape code (--precision) must have been compiled with them.
Status checkArtifactOptions(const RunOptions& o, const runtime::Executable& exe);

// The compile options to look the program up in the compile cache before importing it
// (loadProgram fills in the source key), or none: another backend, --no-cache, or --dim (a
// program with symbolic dims is imported, so that the inputs are checked against them).
std::optional<runtime::CompileOptions> cacheProbe(const RunOptions& o);

// The text of `kiln run --help`.
const char* runUsage();

}  // namespace kiln::cli
