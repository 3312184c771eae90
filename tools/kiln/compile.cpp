// `kiln compile PROGRAM -o OUT.kiln`: ahead-of-time compilation into an artifact that `kiln run`,
// `kiln bench` and the C/C++ APIs load without compiling (runtime::Executable::load).
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "program.h"
#include "run_options.h"
#include "runtime/artifact.h"
#include "runtime/executable.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln compile PROGRAM -o OUT.kiln [options]

Compiles PROGRAM (.kir or .onnx) for this machine's CPU as `kiln run` would and writes the
artifact OUT.kiln: the optimised graph with its weights, the object code of every kernel and
what the runtime needs to run them. `kiln run OUT.kiln`, `kiln bench OUT.kiln` and the C/C++ APIs
load it in a fresh process without compiling. Compiling the same program with the same options
on the same machine writes the same bytes. An artifact from another Kiln version or for another
CPU is refused when loaded.

Options:
  -o, --output FILE      the artifact to write (required)
  --dim SYMBOL=SIZE      size of a symbolic dimension (every symbol needs a size or a range)
  --dim SYMBOL=LO..HI    compile once for every size in LO..HI (the artifact runs them all);
                         LO..HI:pow2 also compiles each power-of-two bucket on its first run
  -O0                    without the optimisation pipeline
  --backend NAME         the target: cpu (the default) or cuda (NVRTC; needs no GPU)
  --cuda-arch SM         the GPU architecture of cuda code (default: the GPU's, or sm_90)
  --no-post-ops          leave the epilogues of library calls to Kiln's loops
  --no-reassociate       keep float sums and products of reductions in the interpreter's order
  --no-library-calls     matrix products and convolutions as Kiln's own loops (no oneDNN)
  --threads N            the threads its runs have (default: one per hardware thread): oneDNN
                         lays some weights out by it, so a run with another may be refused
  --no-concurrent-kernels
                         no kernels run at once (as in kiln run)
  -h, --help             show this help
)";

Status compileProgram(const RunOptions& o, const std::string& out) {
  KILN_ASSIGN_OR_RETURN(LoadedProgram program, loadProgram(o.program));
  if (program.format == "kiln") return Status::error(o.program + " is already an artifact");
  runtime::CompileOptions co = compileOptions(o, o.dims, "");
  co.dropHeldConstants = true;  // the artifact stores held constants in their kernels' layouts
  auto start = std::chrono::steady_clock::now();
  // The artifact records the source file: a run with other sizes of its symbolic dims compiles
  // it again for them.
  KILN_ASSIGN_OR_RETURN(auto exe, runtime::Executable::compile(std::move(program.module), co,
                                                               sourceOf(o.program, program)));
  KILN_ASSIGN_OR_RETURN(uint64_t bytes, exe->writeArtifact(out));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // A cuda artifact holds code for one architecture: --cuda-arch's, else the GPU's or sm_90.
  std::string arch = co.cudaArch.empty() ? exe->target().machine() : co.cudaArch;
  arch = co.backend == "cuda" ? "; code for " + arch : "";
  std::printf("wrote %s: %llu bytes, %zu kernels (%d distinct), compiled in %.1f ms for %s%s\n",
              out.c_str(), static_cast<unsigned long long>(bytes), exe->plan().kernels.size(),
              exe->uniqueKernels(), ms, exe->hostCpu().c_str(), arch.c_str());
  return Status::ok();
}

}  // namespace

int compileCommand(const std::vector<std::string>& args) {
  std::string out;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size())
        return reportError(Status::error(a + " expects a file"), kExitUsage);
      out = args[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      out = a.substr(9);
    } else {
      rest.push_back(a);
    }
  }
  StatusOr<RunOptions> o = parseRunOptions(rest);
  if (!o) return reportError(o.status(), kExitUsage);
  if (out.empty())
    return reportError(Status::error("no output given (usage: kiln compile PROGRAM -o OUT.kiln)"),
                       kExitUsage);
  if (!o->inputs.empty() || o->randomInputs || !o->outputDir.empty() || o->backend == "interp")
    return reportError(Status::error("kiln compile takes no inputs or outputs, and compiles for "
                                     "a target (cpu, cuda), not the interpreter"),
                       kExitUsage);
  Status s = compileProgram(*o, out);
  if (!s) return reportError(s, kExitError);
  return 0;
}

}  // namespace kiln::cli
