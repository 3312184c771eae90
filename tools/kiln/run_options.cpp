// Parsing of `kiln run` flags. Value flags take their value as the next argument or after '='
// (`--seed 3` or `--seed=3`).
#include "run_options.h"

#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>

namespace kiln::cli {
namespace {

Status usageError(const std::string& message) { return Status::error(message); }

template <typename T>
std::optional<T> parseNumber(std::string_view s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// `--input NAME=FILE` names a parameter when the text before the first '=' could be one (no
// path separator); otherwise the whole argument is a file bound in order.
InputArg parseInputArg(const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || v.substr(0, eq).find('/') != std::string::npos)
    return InputArg{"", v};
  return InputArg{v.substr(0, eq), v.substr(eq + 1)};
}

Status parseDimArg(const std::string& v, RunOptions& o) {
  size_t eq = v.find('=');
  std::string symbol = v.substr(0, eq);
  if (eq == std::string::npos || !isIdentifier(symbol))
    return usageError("--dim expects SYMBOL=SIZE or SYMBOL=LO..HI, got '" + v + "'");
  if (o.dims.count(symbol) || o.ranges.count(symbol))
    return usageError("--dim " + symbol + " is given twice");
  if (v.find("..", eq) != std::string::npos) {
    StatusOr<SymbolRanges> r = parseSymbolRanges(v);
    if (!r) return usageError("--dim: " + r.status().message());
    o.ranges.insert(r->begin(), r->end());
    return Status::ok();
  }
  auto size = parseNumber<int64_t>(std::string_view(v).substr(eq + 1));
  if (!size || *size < 0)
    return usageError("--dim " + symbol + ": size must be a non-negative integer, got '" +
                      v.substr(eq + 1) + "'");
  o.dims[symbol] = *size;
  return Status::ok();
}

// Applies one flag that takes a value.
Status applyValueFlag(const std::string& flag, const std::string& v, RunOptions& o) {
  if (flag == "--input") {
    InputArg in = parseInputArg(v);
    if (in.file.empty()) return usageError("--input " + v + ": missing file name");
    o.inputs.push_back(std::move(in));
  } else if (flag == "--seed") {
    auto seed = parseNumber<uint64_t>(v);
    if (!seed) return usageError("--seed expects a non-negative integer, got '" + v + "'");
    o.seed = *seed;
  } else if (flag == "--dim") {
    return parseDimArg(v, o);
  } else if (flag == "--output-dir") {
    if (v.empty()) return usageError("--output-dir expects a directory");
    o.outputDir = v;
  } else if (flag == "--backend") {
    // A known name this build lacks is the compile's error (the registry says why).
    if (v != "cpu" && v != "cuda" && v != "interp")
      return usageError("unknown backend '" + v + "' (known: cpu, cuda, interp)");
    o.backend = v;
    o.backendGiven = true;
  } else if (flag == "--precision") {
    if (v != "f32" && v != "tf32" && v != "f16" && v != "bf16")
      return usageError("--precision expects f32, tf32, f16 or bf16, got '" + v + "'");
    o.precision = v;
    o.precisionGiven = true;
  } else if (flag == "--cuda-arch") {
    if (v.rfind("sm_", 0) != 0 || v.size() < 5)
      return usageError("--cuda-arch expects a GPU architecture such as sm_90, got '" + v + "'");
    o.cudaArch = v;
  } else if (flag == "--cache-dir") {
    if (v.empty()) return usageError("--cache-dir expects a directory");
    o.cacheDir = v;
  } else if (flag == "--cache-limit") {
    auto mib = parseNumber<uint64_t>(v);
    if (!mib || *mib > (uint64_t(1) << 40))
      return usageError("--cache-limit expects a size in MiB, got '" + v + "'");
    o.cacheLimitMiB = *mib;
  } else if (flag == "--threads" || flag == "--compile-threads") {
    KILN_ASSIGN_OR_RETURN(int n, parseThreadCount(flag, v));
    (flag == "--threads" ? o.threads : o.compileThreads) = n;
  } else {
    return usageError("unknown option '" + flag + "' (see kiln run --help)");
  }
  return Status::ok();
}

bool takesValue(const std::string& flag) {
  return flag == "--input" || flag == "--seed" || flag == "--dim" || flag == "--output-dir" ||
         flag == "--backend" || flag == "--cuda-arch" || flag == "--precision" ||
         flag == "--threads" || flag == "--compile-threads" || flag == "--cache-dir" ||
         flag == "--cache-limit";
}

}  // namespace

StatusOr<int> parseThreadCount(const std::string& flag, const std::string& value) {
  auto n = parseNumber<int>(value);
  if (!n || *n < 1 || *n > 1024)
    return usageError(flag + " expects a number from 1 to 1024, got '" + value + "'");
  return *n;
}

StatusOr<RunOptions> parseRunOptions(const std::vector<std::string>& args) {
  RunOptions o;
  o.instrumentation.inputLabel = "import";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    StatusOr<size_t> used = parseInstrumentationFlag(args, i, o.instrumentation);
    if (!used) return usageError(used.status().message());
    if (*used > 0) {
      i += *used - 1;
      continue;
    }
    if (a == "-O0" || a == "-O1") {
      o.optLevel = a[2] - '0';
      continue;
    }
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--random-inputs") {
      o.randomInputs = true;
      continue;
    }
    if (a == "--no-post-ops") {
      o.postOps = false;
      continue;
    }
    if (a == "--no-reassociate") {
      o.reassociate = false;
      continue;
    }
    if (a == "--no-library-calls") {
      o.libraryCalls = false;
      continue;
    }
    if (a == "--no-concurrent-kernels") {
      o.concurrentKernels = false;
      continue;
    }
    if (a == "--no-cache") {
      o.cache = false;
      continue;
    }
    if (a == "--no-recompile") {
      o.recompile = false;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      size_t eq = a.find('=');
      std::string flag = a.substr(0, eq);
      if (!takesValue(flag)) return usageError("unknown option '" + a + "' (see kiln run --help)");
      if (eq != std::string::npos) {
        KILN_RETURN_IF_ERROR(applyValueFlag(flag, a.substr(eq + 1), o));
      } else if (i + 1 < args.size()) {
        KILN_RETURN_IF_ERROR(applyValueFlag(flag, args[++i], o));
      } else {
        return usageError(flag + " expects a value");
      }
      continue;
    }
    if (!o.program.empty())
      return usageError("more than one program given ('" + o.program + "' and '" + a + "')");
    o.program = a;
  }
  if (o.program.empty()) return usageError("no program given (usage: kiln run PROGRAM [options])");
  return o;
}

constexpr const char* kRunUsage = R"(usage: kiln run PROGRAM [options]

Runs PROGRAM on the given inputs, prints each input and output (dtype, shape, min/max/mean), the
run time and what the compiler did, and writes the outputs as .npy files when --output-dir is set.
PROGRAM is a .kir file (Kiln's text IR) or an ONNX model (.onnx).

Options:
  --input NAME=FILE.npy  bind the input (parameter) NAME to the array in FILE.npy
  --input FILE.npy       bind the next input not bound by name, in parameter order
  --random-inputs        fill every input not given with seeded random values: floats uniform
                         in [-1, 1), integers uniform in [0, 10), bools true or false
  --seed N               seed of --random-inputs (default 0); the same seed gives the same values
  --dim SYMBOL=SIZE      size of a symbolic dimension (e.g. --dim N=8); needed by
                         --random-inputs when no input file fixes the symbol
  --dim SYMBOL=LO..HI    compile once for every size in LO..HI (e.g. --dim N=1..64): kernels
                         read the size when they run, and other sizes compile again; random
                         inputs take HI when no input file fixes the symbol; LO..HI:pow2
                         compiles each power-of-two bucket on its first run
  --output-dir DIR       write each output to DIR/NAME.npy (DIR is created when missing); NAME
                         is the output's name in the program, or output_<i> when it has none
  --backend NAME         where to run: cpu (the default), kernels fused and compiled to native
                         code by LLVM; cuda, an NVIDIA GPU (CUDA C++ compiled by NVRTC); or
                         interp, the reference interpreter
  --cuda-arch SM         the GPU architecture cuda code is for (default: the GPU's, or sm_90
                         without one)
  --precision P          f32 (the default); tf32: matrix products on TF32 tensor cores (cuda);
                         f16 or bf16: values computed and stored in that type, sums and
                         statistics in f32; inputs and outputs stay f32
  --threads N            threads of the cpu backend (default: one per hardware thread)
  --compile-threads N    threads that compile (LLVM and library kernels; default: one per
                         hardware thread, whatever --threads is)
  -O1                    optimise first with the default pipeline, specialised to the input
                         shapes (the default; docs/passes.md lists its passes)
  -O0                    run the program as loaded, only specialised to the input shapes
  --cache-dir DIR        the compile cache of the cpu backend (default $XDG_CACHE_HOME/kiln,
                         else ~/.cache/kiln): a model compiled before with the same options on
                         this CPU loads from it without compiling
  --cache-limit MIB      the cache's size limit (default 4096): writing an entry deletes the
                         least recently used ones until the rest fit
  --no-cache             compile without the cache (neither read nor written)
  --no-post-ops          leave the epilogues of library calls (bias, activation, residual of a
                         convolution or matrix product) to Kiln's loops instead of the library
  --no-reassociate       keep float sums and products of reductions in the interpreter's
                         order (by default they split into vectorized partial sums)
  --no-library-calls     run matrix products and convolutions as Kiln's own loops instead of
                         a library's kernels (oneDNN), with the interpreter's numerics
  --no-concurrent-kernels
                         run kernels one after another, each on every thread (by default
                         independent ones, such as an inception module's branches, may run at
                         once, one thread each, where the plan finds it pays: kiln explain)
  --no-recompile         inputs that differ from a .kiln artifact's sizes in a symbolic dim are
                         an error (naming the dim, its size and the compiled size) instead of
                         compiling the artifact's source model again for them
%s  -h, --help             show this help

Exit status: 0 on success, 1 on an error (one line on stderr: "kiln: error: ..."), 2 on a
usage error.
)";

runtime::CompileOptions compileOptions(const RunOptions& o, const SymbolBindings& dims,
                                       const std::string& sourceKey) {
  runtime::CompileOptions co;
  co.backend = o.backend;
  co.cudaArch = o.cudaArch;
  co.precision = o.precision;
  co.dims = dims;
  // A symbol over a range stays symbolic: the sizes the inputs give are this run's only.
  for (const auto& [symbol, range] : o.ranges) co.dims.erase(symbol);
  co.ranges = o.ranges;
  co.optLevel = o.optLevel;
  co.postOps = o.postOps;
  co.reassociate = o.reassociate;
  co.libraryCalls = o.libraryCalls;
  co.concurrentKernels = o.concurrentKernels;
  co.recompile = o.recompile;
  co.dropHeldConstants = true;
  co.threads = o.threads;
  co.compileThreads = o.compileThreads;
  co.instrumentation = o.instrumentation;
  if (o.cache && !sourceKey.empty()) {
    co.cacheDir = o.cacheDir.empty() ? runtime::defaultCacheDir() : o.cacheDir;
    co.sourceKey = sourceKey;
    co.cacheLimitBytes = o.cacheLimitMiB << 20;
  }
  return co;
}

runtime::CompileOptions loadOptions(const RunOptions& o) {
  runtime::CompileOptions co;
  co.backend = o.backend;
  co.threads = o.threads;
  co.compileThreads = o.compileThreads;
  co.dropHeldConstants = true;
  co.recompile = o.recompile;
  if (o.cache) {
    co.cacheDir = o.cacheDir.empty() ? runtime::defaultCacheDir() : o.cacheDir;
    co.cacheLimitBytes = o.cacheLimitMiB << 20;
  }
  return co;
}

Status checkArtifactOptions(const RunOptions& o, const runtime::Executable& exe) {
  const std::string& backend = exe.compileOptions().backend;
  if (o.backendGiven && backend != o.backend)
    return Status::error(o.program + ": compiled for the " + backend + " backend, --backend " +
                         o.backend + " asks for another: compile the model again with it");
  const std::string& have = exe.compileOptions().precision;
  if (o.precisionGiven && have != o.precision)
    return Status::error(o.program + ": compiled for precision " + have + ", --precision " +
                         o.precision + " asks for another: compile the model again with it");
  return Status::ok();
}

std::optional<runtime::CompileOptions> cacheProbe(const RunOptions& o) {
  // With --dim the program has symbolic dims, which the import must check against the inputs
  // (the cached function is specialised): no probe.
  if (o.backend == "interp" || !o.cache || !o.dims.empty()) return std::nullopt;
  runtime::CompileOptions co = compileOptions(o, {}, "probe");
  co.sourceKey.clear();
  return co;
}

const char* runUsage() {
  static const std::string text = [] {
    std::string t = kRunUsage;
    size_t at = t.find("%s");
    return t.replace(at, 2, instrumentationFlagsHelp());
  }();
  return text.c_str();
}

}  // namespace kiln::cli
