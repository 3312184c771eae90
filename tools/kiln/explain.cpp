// `kiln explain`: what the compiler makes of a program: the optimised graph's kernels (the fusion
// plan) with their ops, bytes and flops, and the reason for every edge left unfused.
#include <cstdio>
#include <utility>

#include "commands.h"
#include "compiler/compile.h"
#include "fusion/fusion.h"
#include "kernel/lower.h"
#include "passes/pipeline.h"
#include "program.h"
#include "run_options.h"
#include "runtime/buffer_plan.h"
#include "runtime/executable.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln explain PROGRAM [options]

Compiles PROGRAM (.kir or .onnx) as `kiln run` would, without running it, and prints the fusion
plan: each kernel with its ops, the bytes it reads and writes and its flops, the fused edges with
how they were fused, and every producer -> consumer edge left unfused with the reason; then the
guards, the outputs whose size a run computes, the memory plan, the library calls, the
schedule's decisions, and what the target's code runs: each launch (on a GPU with its grid and
block, and its registers and shared memory once the module loads) and each library call with the
implementation its library picked. A .kiln artifact is loaded as a run loads it (nothing is
compiled) and explained with its own options.

Options:
  --dim SYMBOL=SIZE      size of a symbolic dimension (e.g. --dim N=8); symbols left unbound are
                         counted as 1 in the costs
  --dim SYMBOL=LO..HI    keep the dimension symbolic over that range (as `kiln run` does): the
                         kernels read its size when they run
  --backend NAME         the target to compile for (default: cpu)
  --precision P          f32 (default), tf32, f16 or bf16, as in `kiln run`
  --cuda-arch SM         the cuda target's architecture (default: the GPU's, else sm_90)
  --no-code              stop after scheduling: no code, no launches
  -O0                    explain the program as loaded, without the optimisation pipeline
  --no-fusion            one kernel per op (the baseline the plan is measured against)
  --kernel-ir            also print each kernel's loop-level IR (what the backends compile)
  --no-post-ops          leave the epilogues of library calls to Kiln's loops (no post-ops)
  --no-reassociate       keep float sums and products of reductions in the interpreter's order
  --no-library-calls     matrix products and convolutions as Kiln's own loops (no library calls)
  --threads N            the threads a run would have (default: one per hardware thread): the
                         library calls are made for them and independent kernels may run at once
  --no-concurrent-kernels
                         run kernels one after another, each on every thread
%s  -h, --help             show this help
)";

struct ExplainOptions {
  std::string program;
  std::string backend = "cpu";  // whose graph passes run before fusion
  SymbolBindings dims;
  SymbolRanges ranges;  // --dim SYMBOL=LO..HI
  int optLevel = 1;
  bool fuse = true;
  bool kernelIr = false;
  bool postOps = true;
  bool reassociate = true;
  bool libraryCalls = true;
  bool concurrentKernels = true;
  int threads = 0;
  bool code = true;
  std::string precision = "f32";
  std::string cudaArch;
  PassManagerOptions instrumentation;
};

StatusOr<ExplainOptions> parse(const std::vector<std::string>& args, bool& help) {
  ExplainOptions o;
  o.instrumentation.inputLabel = "import";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    KILN_ASSIGN_OR_RETURN(size_t used, parseInstrumentationFlag(args, i, o.instrumentation));
    if (used > 0) {
      i += used - 1;
    } else if (a == "-h" || a == "--help") {
      help = true;
    } else if (a == "-O0" || a == "-O1") {
      o.optLevel = a[2] - '0';
    } else if (a == "--backend") {
      if (i + 1 >= args.size()) return Status::error("--backend needs a target name");
      o.backend = args[++i];
    } else if (a == "--no-fusion") {
      o.fuse = false;
    } else if (a == "--kernel-ir") {
      o.kernelIr = true;
    } else if (a == "--no-post-ops") {
      o.postOps = false;
    } else if (a == "--no-reassociate") {
      o.reassociate = false;
    } else if (a == "--no-library-calls") {
      o.libraryCalls = false;
    } else if (a == "--no-concurrent-kernels") {
      o.concurrentKernels = false;
    } else if (a == "--threads") {
      KILN_ASSIGN_OR_RETURN(o.threads, parseThreadCount(a, i + 1 < args.size() ? args[++i] : ""));
    } else if (a == "--no-code") {
      o.code = false;
    } else if (a == "--precision") {
      o.precision = i + 1 < args.size() ? args[++i] : "";
      if (o.precision != "f32" && o.precision != "tf32" && o.precision != "f16" &&
          o.precision != "bf16")
        return Status::error("--precision expects f32, tf32, f16 or bf16, got '" + o.precision +
                             "'");
    } else if (a == "--cuda-arch") {
      o.cudaArch = i + 1 < args.size() ? args[++i] : "";
      if (o.cudaArch.rfind("sm_", 0) != 0 || o.cudaArch.size() < 5)
        return Status::error("--cuda-arch expects a GPU architecture such as sm_90, got '" +
                             o.cudaArch + "'");
    } else if (a == "--dim" || a.rfind("--dim=", 0) == 0) {
      std::string v = a == "--dim" ? (i + 1 < args.size() ? args[++i] : "") : a.substr(6);
      if (v.find("..") != std::string::npos) {
        KILN_ASSIGN_OR_RETURN(SymbolRanges r, parseSymbolRanges(v));
        for (const auto& [s, range] : r) {
          if (o.dims.count(s) || o.ranges.count(s))
            return Status::error("--dim " + s + " is given twice");
          o.ranges[s] = range;
        }
        continue;
      }
      KILN_ASSIGN_OR_RETURN(SymbolBindings b, parseSymbolBindings(v));
      for (const auto& [s, n] : b) {
        if (o.dims.count(s) || o.ranges.count(s))
          return Status::error("--dim " + s + " is given twice");
        o.dims[s] = n;
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return Status::error("unknown option '" + a + "' (see kiln explain --help)");
    } else if (!o.program.empty()) {
      return Status::error("more than one program given ('" + o.program + "' and '" + a + "')");
    } else {
      o.program = a;
    }
  }
  if (o.program.empty() && !help)
    return Status::error("no program given (usage: kiln explain PROGRAM [options])");
  return o;
}

// The library calls: which epilogue ops the library applies as post-ops, and why the rest
// stays a loop nest; then the schedule's decisions.
void printCalls(const std::vector<kernel::Kernel>& kernels) {
  std::string calls, notes;
  for (const kernel::Kernel& k : kernels) {
    for (const kernel::Stmt* s : kernel::callsOf(k)) {
      calls += "  " + k.name + "  " + s->callee();
      for (size_t i = 0; i < s->postOps.size(); ++i)
        calls += std::string(i ? ", " : "  post-ops ") + kernel::postOpName(s->postOps[i].kind);
      if (!s->note.empty()) calls += "; epilogue loop after it: " + s->note;
      calls += "\n";
    }
    for (const std::string& n : k.notes) notes += "  " + k.name + "  " + n + "\n";
  }
  if (!calls.empty()) std::printf("\nlibrary calls:\n%s", calls.c_str());
  if (!notes.empty()) std::printf("\nschedule:\n%s", notes.c_str());
}

// The guards: the input dims the source left symbolic, which a run checks before it uses this
// compile.
void printGuards(const runtime::Guards& guards, const Function& compiled) {
  if (guards.empty()) return;
  std::vector<std::string> names;
  for (size_t i = 0; i < compiled.numParameters(); ++i)
    names.push_back(compiled.parameter(i)->name());
  std::string lines = runtime::describeGuards(guards, names);
  for (size_t at = 0; at < lines.size(); at = lines.find('\n', at) + 1) lines.insert(at, "  ");
  std::printf("\nguards (a run whose inputs have other sizes in these symbolic dims, or sizes "
              "outside their ranges, compiles again for them; with --no-recompile it is an "
              "error):\n%s",
              lines.c_str());
}

// The outputs of run-time size (ONNX NonZero, Unique, ...): their buffers have the bound, and a
// run cuts them to the size it computes (passes/expose_dynamic_sizes.h).
void printRunTimeSizes(const std::vector<DynamicDim>& dims, const Function& compiled) {
  if (dims.empty()) return;
  std::printf("\nrun-time sizes (outputs computed at a bound; each run gives them the size it "
              "computes):\n");
  for (const DynamicDim& d : dims) {
    const TensorType& t = compiled.outputs()[d.output]->type();
    std::printf("  output %zu '%s' dim %lld: at most %s (%s)\n", d.output,
                compiled.outputName(d.output).c_str(), static_cast<long long>(d.dim),
                t.dim(static_cast<size_t>(d.dim)).str().c_str(), t.str().c_str());
  }
}

runtime::CompileOptions compileOptions(const ExplainOptions& o) {
  runtime::CompileOptions co;
  co.backend = o.backend;
  co.optLevel = o.optLevel;
  co.fuse = o.fuse;
  co.postOps = o.postOps;
  co.reassociate = o.reassociate;
  co.libraryCalls = o.libraryCalls;
  co.concurrentKernels = o.concurrentKernels;
  co.threads = o.threads;
  co.precision = o.precision;
  co.cudaArch = o.cudaArch;
  co.dims = o.dims;
  co.ranges = o.ranges;
  co.instrumentation = o.instrumentation;
  return co;
}

// What a compile made, for printing: its memory plan and kernels, and with its code (`code`)
// what runs the library calls and the kernels run at once.
struct Made {
  const runtime::BufferPlan& buffers;
  const std::vector<kernel::Kernel>& kernels;
  bool code = false;
  std::string libraryCalls, libraryCallDetails, concurrency;
};

void printMade(const Made& m, bool kernelIr) {
  std::printf("\nmemory: %s\n", runtime::describeBufferPlan(m.buffers).c_str());
  printCalls(m.kernels);
  if (m.code) std::printf("\ncode (%s):\n%s", m.libraryCalls.c_str(), m.libraryCallDetails.c_str());
  if (!m.concurrency.empty()) std::printf("\n%s", m.concurrency.c_str());
  if (kernelIr) {
    std::puts("\nkernel IR:");
    for (const kernel::Kernel& k : m.kernels) std::printf("\n%s", kernel::printKernel(k).c_str());
  }
}

// An artifact (kiln compile -o): what it holds, loaded as a run loads it (nothing compiled).
Status explainArtifact(const ExplainOptions& o, LoadedProgram& program) {
  runtime::CompileOptions co;
  co.threads = o.threads;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> exe,
                        runtime::Executable::load(std::move(program.artifact), o.program, co));
  const Function& f = exe->function();
  std::fputs(fusion::explainPlan(f, exe->plan()).c_str(), stdout);
  printGuards(exe->guards(), f);
  printRunTimeSizes(exe->runTimeSizes(), f);
  printMade({exe->buffers(), exe->kernels(), true, exe->libraryCalls(), exe->libraryCallDetails(),
             exe->concurrencyDetails()},
            o.kernelIr);
  return Status::ok();
}

// The compile driver stopped at `stop`; where an op cannot be compiled over the ranges, as runs
// do (Executable::compileEach): each size on its own, shown at the ranges' low ends, with
// `shown` the options of that compile and its ranges marked each.
StatusOr<compiler::Compiled> compileShown(const ExplainOptions& o, LoadedProgram& program,
                                          const runtime::Target& target, compiler::Stage stop,
                                          ExplainOptions& shown) {
  shown = o;
  StatusOr<compiler::Compiled> compiled =
      compiler::compile(std::move(program.module), target, compileOptions(o), stop);
  if (compiled || !compiled.status().needsSizes() || o.ranges.empty()) return compiled;
  std::printf("not compiled over its ranges (%s): a run compiles each size once; shown at their "
              "low ends\n\n",
              compiled.status().message().c_str());
  eachAtLowEnds(shown.ranges, shown.dims);
  const SymbolRanges each = std::exchange(shown.ranges, {});
  KILN_ASSIGN_OR_RETURN(program, loadProgram(o.program));
  compiled = compiler::compile(std::move(program.module), target, compileOptions(shown), stop);
  shown.ranges = each;
  return compiled;
}

Status explain(const ExplainOptions& o) {
  KILN_ASSIGN_OR_RETURN(LoadedProgram program, loadProgram(o.program));
  if (program.format == "kiln") return explainArtifact(o, program);
  KILN_ASSIGN_OR_RETURN(const runtime::Target* target, runtime::findTarget(o.backend));
  // Symbols --dim leaves unbound: the plan with them counted as 1, and no kernels (lowering
  // needs static shapes). Otherwise the compile driver, stopped after scheduling or with the
  // program (its code).
  bool symbolic = false;
  for (const auto& n : program.module->entry()->nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      for (const Dim& d : n->result(r)->type().dims())
        for (const std::string& f : d.factors()) symbolic |= !o.dims.count(f) && !o.ranges.count(f);
  const compiler::Stage stop = symbolic ? compiler::Stage::Planned
                               : o.code ? compiler::Stage::Program
                                        : compiler::Stage::Lowered;
  std::vector<TensorType> sourceTypes = runtime::parameterTypes(*program.module->entry());
  ExplainOptions shown;
  KILN_ASSIGN_OR_RETURN(compiler::Compiled c, compileShown(o, program, *target, stop, shown));
  if (o.instrumentation.timePasses) std::fputs(c.passTimings.c_str(), stderr);
  const runtime::Program* p = c.program.get();
  const Function& f = p ? p->function() : *c.module->entry();
  if (!c.remarks.empty()) {
    std::puts("graph pass decisions:");
    for (const std::string& r : c.remarks) std::printf("  %s\n", r.c_str());
    std::puts("");
  }
  std::fputs(fusion::explainPlan(f, p ? p->plan() : c.plan).c_str(), stdout);
  printGuards(runtime::guardsOf(sourceTypes, runtime::parameterTypes(f), shown.ranges), f);
  printRunTimeSizes(c.dynamic, f);
  if (symbolic) {
    std::puts("\nmemory: not planned (symbolic dimensions; give their sizes with --dim)");
    return Status::ok();
  }
  if (!p) printMade({*c.buffers, c.kernels, false, "", "", ""}, o.kernelIr);
  else
    printMade({p->buffers(), p->kernels(), true, p->libraryCalls(), p->libraryCallDetails(),
               p->concurrencyDetails()},
              o.kernelIr);
  return Status::ok();
}

}  // namespace

int explainCommand(const std::vector<std::string>& args) {
  bool help = false;
  StatusOr<ExplainOptions> o = parse(args, help);
  if (help) {
    std::string text = kUsage;
    text.replace(text.find("%s"), 2, instrumentationFlagsHelp());
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (!o) return reportError(o.status(), kExitUsage);
  Status s = explain(*o);
  if (!s) return reportError(s, kExitError);
  return 0;
}

}  // namespace kiln::cli
