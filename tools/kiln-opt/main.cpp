// kiln-opt: reads a .kir module, verifies it, runs the passes named by flag in order, and prints
// the result. The tool of compiler work and lit tests:
//
//   kiln-opt model.kir --decompose-composites --dce -o out.kir
//   kiln-opt model.kir --plan-fusion --lower      (the fusion plan and kernel IR, not the module)
//   kiln-opt model.kir --lower --schedule=cpu     (kernel IR after the CPU target's schedule)
//   kiln-opt model.kir --lower --split-reductions=16 --lower-reductions   (schedule passes)
//   kiln-opt kernels.txt --kernels --schedule=cpu (kernel IR in: parsed, verified, scheduled)
//   kiln-opt model.kir --lower --map-gpu=256 --lower-reductions --emit-cuda   (CUDA C++)
//
// Any error is one line on stderr, "kiln-opt: file:line:col: error: message", and exit status 1.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_source.h"
#include "compiler/compile.h"
#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/expand_calls.h"
#include "kernel/gpu_schedule.h"
#include "kernel/parse.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"

namespace {

struct Options {
  std::string input;                // a path, or "-" for stdin
  std::string output;               // empty: stdout
  std::vector<std::string> passes;  // pass specs: "dce", "specialize-shapes=N=1", "pipeline"
  bool help = false;
  bool planFusion = false;  // print the fusion plan of the entry function after the passes
  bool lower = false;       // print the kernel IR of each of its kernels
  bool kernels = false;     // the input is kernel IR, not a module
  // The target whose fusion policy (epilogues, custom fusions) --plan-fusion and --lower use;
  // empty: the default policy, no custom fusions.
  std::string target;
  // After lowering, in order: "schedule=cpu" (a target's whole schedule) or a schedule pass
  // ("split-reductions=16", "lower-reductions", ...).
  std::vector<std::string> schedule;
  bool reassociate = true;
  bool emitCuda = false;      // print the scheduled kernels as CUDA C++, not kernel IR
  kiln::SymbolRanges ranges;  // --lower keeps these symbols, over these ranges
  kiln::PassManagerOptions instrumentation;
};

std::string passList() {
  std::string s;
  for (const std::string& p : kiln::passNames()) s += (s.empty() ? "" : ", ") + ("--" + p);
  return s;
}

void printHelp() {
  std::cout
      << "usage: kiln-opt FILE.kir|- [--PASS[=OPTIONS] ...] [--pipeline] [--verify-each]\n"
         "                [--dump-dir DIR] [--time-passes] [--print-after=PASS] [-o OUT]\n\n"
         "Parses and verifies a .kir module, runs the named passes in order, and prints the\n"
         "module (to OUT, or to stdout); the passes' remarks on their decisions go to stderr.\n\n"
         "options:\n"
         "  -o OUT                 write the module to OUT\n"
         "  --pipeline             run the default optimisation pipeline (at that point)\n"
         "  --plan-fusion          after the passes, print the entry function's fusion plan\n"
         "                         (kernels and every decision with its reason), not the module\n"
         "  --lower                after the passes, print each kernel's loop-level IR (the\n"
         "                         lowering before any target's code generation), not the module\n"
         "  --kernels              the input is kernel IR (as --lower prints it), not a module:\n"
         "                         parse and verify it, run the schedule passes, print it\n"
         "  --ranges=N=1..64,...   --lower keeps those symbolic dims, over those ranges\n"
         "                         (kernels that read the sizes when they run)\n"
         "  --target=TARGET        plan fusion with that target's policy (its epilogues and\n"
         "                         custom fusions: the cpu's inverted-residual block)\n"
         "  --schedule=TARGET      after --lower, run that target's schedule passes (cpu, cuda)\n"
         "  --emit-cuda            print the kernels (scheduled for the GPU) as CUDA C++\n"
         "schedule passes (after --lower, in the order given; kernel/schedule.h):\n"
         "  --partition-loops=N    split loops at comparisons of their variable (N pieces max)\n"
         "  --cache-rows=N         store a reduced row's costly values for a later loop (N max)\n"
         "  --parallelize-outer=N  parallel outer loops of nests of at least N statements\n"
         "  --vectorize-inner      vectorized innermost loops that only store\n"
         "  --block-transposes=N   transposing nests in N x N blocks of their two inner loops\n"
         "  --split-reductions=N   reductions into N vector partial accumulators\n"
         "  --split-row-reductions=N  row reductions with at least N work into partial rows\n"
         "                         over threads\n"
         "  --lower-reductions     Reduce statements into serial loops\n"
         "  --register-rows=N      scratch rows of accumulators in blocks of at most N bytes\n"
         "  --expand-calls         library calls (dot_general, convolution) into Kiln's loops\n"
         "  --map-gpu=N            each nest a GPU launch of N threads per block (gpu_schedule.h)\n"
         "  --map-gpu-wide=B       the same with 256 threads, a warp's row in B-byte groups a "
         "lane\n"
         "  --reductions-per-output[=N]  a row of accumulators as groups of N-byte accesses, or\n"
         "                         (no N) a Reduce per output element\n"
         "  --gpu-lanes=N          innermost loops of stores in groups of N-byte accesses\n"
         "  --wide-accesses        the aligned groups of those loops as wide copies through\n"
         "                         local arrays\n"
         "  --no-reassociate       float sums keep their order (split-reductions, map-gpu,\n"
         "                         --schedule)\n"
      << kiln::instrumentationFlagsHelp()
      << "  --help                 show this text\n\n"
         "passes (options: --specialize-shapes=N=1,S=128, --layout-assignment=nhwc|nchw|keep):\n";
  for (const std::string& name : kiln::passNames()) {
    auto pass = kiln::createPass(name);
    std::cout << "  --" << name << "\n      " << (pass ? pass->description() : "") << "\n";
  }
}

bool isSchedulePass(const std::string& flag) {
  for (const char* p :
       {"--schedule=", "--partition-loops=", "--cache-rows=", "--parallelize-outer=",
        "--split-reductions=", "--split-row-reductions=", "--map-gpu=", "--map-gpu-wide=",
        "--gpu-lanes=", "--reductions-per-output=", "--register-rows=", "--block-transposes="})
    if (flag.rfind(p, 0) == 0) return true;
  return flag == "--vectorize-inner" || flag == "--lower-reductions" || flag == "--expand-calls" ||
         flag == "--reductions-per-output" || flag == "--wide-accesses";
}

// Runs one --schedule or schedule-pass spec over `kernels`.
kiln::Status schedule(const std::string& spec, const Options& o,
                      std::vector<kiln::kernel::Kernel>& kernels) {
  size_t eq = spec.find('=');
  std::string name = spec.substr(0, eq), arg = eq == std::string::npos ? "" : spec.substr(eq + 1);
  if (name == "schedule") {
    KILN_ASSIGN_OR_RETURN(const kiln::runtime::Target* target, kiln::runtime::findTarget(arg));
    kiln::runtime::CompileOptions options;
    options.reassociate = o.reassociate;
    return target->schedule(kernels, options);
  }
  int64_t n = 0;
  if (!arg.empty()) {
    char* end = nullptr;
    n = std::strtoll(arg.c_str(), &end, 10);
    if (*end != '\0' || n <= 0)
      return kiln::Status::error("--" + name + " takes a positive count, not '" + arg + "'");
  }
  for (kiln::kernel::Kernel& k : kernels) {
    if (name == "partition-loops") k = kiln::kernel::partitionLoops(k, n);
    else if (name == "cache-rows") k = kiln::kernel::cacheRows(k, n);
    else if (name == "parallelize-outer") k = kiln::kernel::parallelizeOuter(k, n);
    else if (name == "vectorize-inner") k = kiln::kernel::vectorizeInner(k);
    else if (name == "block-transposes") k = kiln::kernel::blockTransposes(k, n);
    else if (name == "split-reductions") k = kiln::kernel::splitReductions(k, n, o.reassociate);
    else if (name == "split-row-reductions")
      k = kiln::kernel::splitRowReductions(k, n, o.reassociate);
    else if (name == "lower-reductions") k = kiln::kernel::lowerReductions(k);
    else if (name == "register-rows") k = kiln::kernel::registerRows(k, n);
    else if (name == "map-gpu") k = kiln::kernel::mapToGpu(k, n, o.reassociate);
    else if (name == "map-gpu-wide") k = kiln::kernel::mapToGpu(k, 256, o.reassociate, n);
    else if (name == "reductions-per-output") k = kiln::kernel::reductionsPerOutput(k, n);
    else if (name == "gpu-lanes") k = kiln::kernel::vectorizeLanes(k, n);
    else if (name == "wide-accesses") k = kiln::kernel::wideAccesses(k);
    else {
      KILN_ASSIGN_OR_RETURN(k, kiln::kernel::expandCalls(k));
    }
  }
  return kiln::Status::ok();
}

bool isPass(const std::string& name) {
  for (const std::string& p : kiln::passNames())
    if (p == name) return true;
  return false;
}

kiln::StatusOr<Options> parseArgs(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    KILN_ASSIGN_OR_RETURN(size_t used, kiln::parseInstrumentationFlag(args, i, o.instrumentation));
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "-o") {
      if (i + 1 >= args.size()) return kiln::Status::error("-o needs a file name");
      o.output = args[++i];
    } else if (a == "--pipeline") {
      o.passes.push_back("pipeline");
    } else if (a == "--plan-fusion") {
      o.planFusion = true;
    } else if (a == "--lower") {
      o.lower = true;
    } else if (a == "--kernels") {
      o.kernels = true;
    } else if (a.rfind("--ranges=", 0) == 0) {
      KILN_ASSIGN_OR_RETURN(o.ranges, kiln::parseSymbolRanges(a.substr(9)));
    } else if (a.rfind("--target=", 0) == 0) {
      o.target = a.substr(9);
    } else if (a == "--no-reassociate") {
      o.reassociate = false;
    } else if (a == "--emit-cuda") {
      o.emitCuda = true;
    } else if (isSchedulePass(a)) {
      o.schedule.push_back(a.substr(2));
    } else if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string spec = a.substr(2);
      if (!isPass(spec.substr(0, spec.find('='))))
        return kiln::Status::error("unknown option '" + a + "'; the passes are " + passList());
      o.passes.push_back(spec);
    } else if (a.size() > 1 && a[0] == '-') {
      return kiln::Status::error("unknown option '" + a + "'; the passes are " + passList());
    } else if (!o.input.empty()) {
      return kiln::Status::error("more than one input file ('" + o.input + "' and '" + a + "')");
    } else {
      o.input = a;
    }
  }
  if (o.input.empty() && !o.help) return kiln::Status::error("no input file (use - for stdin)");
  if (o.kernels && (o.lower || o.planFusion || !o.passes.empty()))
    return kiln::Status::error("--kernels reads kernel IR: graph passes, --plan-fusion and --lower "
                               "need a module");
  if (!o.target.empty() && !o.planFusion && !o.lower)
    return kiln::Status::error("--target=" + o.target +
                               " plans fusion: it needs --plan-fusion or --lower");
  if (!o.schedule.empty() && !o.lower && !o.kernels)
    return kiln::Status::error("--" + o.schedule[0] + " schedules kernel IR: it needs --lower");
  if (o.emitCuda && !o.lower && !o.kernels)
    return kiln::Status::error("--emit-cuda prints kernels: it needs --lower or --kernels");
  return o;
}

kiln::StatusOr<std::string> readInput(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return kiln::Status::error("cannot open '" + path + "'");
  ss << in.rdbuf();
  if (in.bad()) return kiln::Status::error("cannot read '" + path + "'");
  return ss.str();
}

kiln::Status writeOutput(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text;
    std::cout.flush();
    return std::cout ? kiln::Status::ok() : kiln::Status::error("cannot write to stdout");
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return kiln::Status::error("cannot write '" + path + "'");
  return kiln::Status::ok();
}

// The schedule passes of `o` over `kernels`, each kernel verified before and after, printed
// (as kernel IR, or with --emit-cuda as CUDA C++).
kiln::StatusOr<std::string> scheduleAndPrint(std::vector<kiln::kernel::Kernel>& kernels,
                                             const Options& o) {
  for (const kiln::kernel::Kernel& k : kernels) KILN_RETURN_IF_ERROR(kiln::kernel::verifyKernel(k));
  for (const std::string& spec : o.schedule) KILN_RETURN_IF_ERROR(schedule(spec, o, kernels));
  for (const kiln::kernel::Kernel& k : kernels) KILN_RETURN_IF_ERROR(kiln::kernel::verifyKernel(k));
  if (!o.emitCuda) return kiln::kernel::printKernels(kernels);
  KILN_ASSIGN_OR_RETURN(kiln::codegen::cuda::CudaSource cuda,
                        kiln::codegen::cuda::emitCuda(kernels));
  return cuda.source;
}

// The fusion plan and/or kernel IR of the module's entry function, as --plan-fusion and --lower
// ask: the compile driver's fusion and lowering steps, with its default options.
kiln::StatusOr<std::string> planAndLower(const kiln::Module& module, const Options& o) {
  const kiln::Function* f = module.entry();
  if (!f) return kiln::Status::error("the module has no entry function to plan");
  kiln::runtime::CompileOptions options;
  options.ranges = o.ranges;
  kiln::runtime::CompileTimes times;
  const kiln::runtime::Target* target = nullptr;
  if (!o.target.empty()) {
    KILN_ASSIGN_OR_RETURN(target, kiln::runtime::findTarget(o.target));
  }
  kiln::fusion::FusionPlan plan = kiln::compiler::fuse(*f, target, options, times);
  std::string out = o.planFusion ? kiln::fusion::explainPlan(*f, plan) : "";
  if (!o.lower) return out;
  KILN_ASSIGN_OR_RETURN(std::vector<kiln::kernel::Kernel> kernels,
                        kiln::compiler::lower(*f, plan, options, times));
  KILN_ASSIGN_OR_RETURN(std::string scheduled, scheduleAndPrint(kernels, o));
  return out + scheduled;
}

kiln::Status run(const Options& o) {
  KILN_ASSIGN_OR_RETURN(std::string text, readInput(o.input));
  std::string filename = o.input == "-" ? "<stdin>" : o.input;
  if (o.kernels) {
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::kernel::Kernel> kernels,
                          kiln::kernel::parseKernels(text, filename));
    KILN_ASSIGN_OR_RETURN(std::string printed, scheduleAndPrint(kernels, o));
    return writeOutput(o.output, printed);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::Module> module, kiln::parseModule(text, filename));
  kiln::PassManager pm(o.instrumentation);
  // Resolve every spec before running anything, so a misspelt option changes nothing.
  std::vector<std::unique_ptr<kiln::Pass>> passes;
  for (const std::string& spec : o.passes) {
    if (spec == "pipeline") {
      passes.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::Pass> p, kiln::createPassFromSpec(spec));
    passes.push_back(std::move(p));
  }
  for (auto& p : passes) {
    auto r = p ? pm.runPass(*p, *module) : kiln::runDefaultPipeline(*module, pm);
    if (!r) return r.status();
  }
  if (o.instrumentation.timePasses) std::cerr << pm.timingReport();
  for (const std::string& r : module->remarks()) std::cerr << "remark: " << r << "\n";
  if (!o.planFusion && !o.lower) return writeOutput(o.output, kiln::printModule(*module));
  KILN_ASSIGN_OR_RETURN(std::string printed, planAndLower(*module, o));
  return writeOutput(o.output, printed);
}

}  // namespace

int main(int argc, char** argv) {
  kiln::runtime::registerBuiltinTargets();
  auto opts = parseArgs(argc, argv);
  kiln::Status s = opts ? kiln::Status::ok() : opts.status();
  if (s && opts->help) {
    printHelp();
    return 0;
  }
  if (s) s = run(*opts);
  if (!s) {
    std::fprintf(stderr, "kiln-opt: %s\n", s.str().c_str());
    return 1;
  }
  return 0;
}
