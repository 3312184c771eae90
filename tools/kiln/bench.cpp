// `kiln bench`: compile time by phase and run latency (median, min, max after warm-up) of a
// program on a backend.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "commands.h"
#include "inputs.h"
#include "interp/interpreter.h"
#include "passes/pipeline.h"
#include "program.h"
#include "roofline.h"
#include "run_options.h"
#include "runtime/executable.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln bench PROGRAM [options]

Compiles PROGRAM (.kir or .onnx) and runs it repeatedly; prints the compile time by phase
(import, passes, fusion, lowering, codegen, buffers) and the run latency: median, min and max over
--repeat runs after --warmup runs. Inputs are given as for `kiln run`; every input not given is
random (floats in [-1, 1), integers in [0, 10) so that they are valid token ids and indices).

Options:
  --backend NAME         cpu (the default), cuda (wall time of whole runs, inputs copied in
                         and outputs out) or interp
  --threads N            threads of the cpu backend (default: one per hardware thread)
  --repeat N             timed runs (default 20)
  --warmup N             untimed runs first (default 3)
  --json                 print one JSON object instead of text
  --roofline             also measure the machine's copy bandwidth and matmul rate now (the
                         host's for cpu, the GPU's for cuda), time every kernel, and print
                         how close the memory-bound and the contraction kernels come to
                         them; on cuda also each library call against the call alone
  --kernel-times         also time every kernel (on cuda ten more launches of it back to
                         back in one graph, over ten; on the CPU between clock reads) and
                         print the slowest 15 with their share
  -O0                    without the graph optimisation pipeline
  --input NAME=FILE.npy, --input FILE.npy, --dim SYMBOL=SIZE or LO..HI, --seed N, --no-post-ops,
  --no-reassociate, --no-library-calls, --no-recompile: as for kiln run
  -h, --help             show this help
)";

struct BenchOptions {
  RunOptions run;
  int repeat = 20, warmup = 3;
  bool json = false;
  bool roofline = false;
  bool kernelTimes = false;
};

StatusOr<BenchOptions> parse(const std::vector<std::string>& args, bool& help) {
  BenchOptions b;
  std::vector<std::string> rest;
  bool backendGiven = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> StatusOr<int> {
      std::string v;
      if (a.rfind(flag + "=", 0) == 0) v = a.substr(flag.size() + 1);
      else if (i + 1 < args.size()) v = args[++i];
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 1000000)
        return Status::error(flag + " expects a number from 0 to 1000000, got '" + v + "'");
      return static_cast<int>(n);
    };
    if (a == "-h" || a == "--help") {
      help = true;
      return b;
    } else if (a == "--json") {
      b.json = true;
    } else if (a == "--roofline") {
      b.roofline = true;
    } else if (a == "--kernel-times") {
      b.kernelTimes = true;
    } else if (a == "--repeat" || a.rfind("--repeat=", 0) == 0) {
      KILN_ASSIGN_OR_RETURN(b.repeat, value("--repeat"));
      if (b.repeat < 1) return Status::error("--repeat must be at least 1");
    } else if (a == "--warmup" || a.rfind("--warmup=", 0) == 0) {
      KILN_ASSIGN_OR_RETURN(b.warmup, value("--warmup"));
    } else {
      if (a == "--backend" || a.rfind("--backend=", 0) == 0) backendGiven = true;
      rest.push_back(a);
    }
  }
  rest.push_back("--random-inputs");
  KILN_ASSIGN_OR_RETURN(b.run, parseRunOptions(rest));
  if (!backendGiven) b.run.backend = "cpu";
  return b;
}

// The inputs bound to their values while importing: a "bound:" line each, or for --json a
// "bound_inputs" member with their names ("" when there are none).
std::string boundInputs(const LoadedProgram& p, bool json) {
  if (p.bound.empty()) return "";
  std::string s = json ? ", \"bound_inputs\": [" : "";
  for (size_t i = 0; i < p.bound.size(); ++i) {
    if (!json) {
      s += "bound: " + describeBound(p.bound[i]) + "\n";
      continue;
    }
    s += i ? ", \"" : "\"";
    for (char c : p.bound[i].name) {
      if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) {
        s += c;
        continue;
      }
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
      s += escaped;
    }
    s += "\"";
  }
  return json ? s + "]" : s;
}

double medianOf(std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

// The device's own times of `repeat` runs (a GPU's events around the launches, the copies of
// inputs and outputs excluded), sorted; empty for targets without a device clock.
StatusOr<std::vector<double>> deviceTimes(const runtime::Executable& exe,
                                          std::span<const Tensor> values,
                                          std::vector<Tensor>& outputs, int repeat) {
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    KILN_ASSIGN_OR_RETURN(double t, exe.runTimed(values, outputs));
    if (t < 0) return std::vector<double>{};
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// The slowest kernels of `repeat` profiled runs (median per kernel), with each one's share of
// their sum and what it runs (its fusion kind, its library calls).
StatusOr<std::string> kernelTimes(const runtime::Executable& exe, std::span<const Tensor> values,
                                  std::vector<Tensor>& outputs, int repeat) {
  const std::vector<kernel::Kernel>& ks = exe.kernels();
  std::vector<std::vector<double>> per(ks.size());
  for (int r = 0; r < repeat; ++r) {
    std::vector<double> ms;
    KILN_RETURN_IF_ERROR(exe.runInto(values, outputs, &ms));
    for (size_t i = 0; i < ms.size() && i < per.size(); ++i) per[i].push_back(ms[i]);
  }
  std::vector<std::pair<double, size_t>> order;
  double total = 0;
  for (size_t i = 0; i < per.size(); ++i) {
    double m = per[i].empty() ? 0 : medianOf(per[i]);
    order.emplace_back(m, i);
    total += m;
  }
  std::sort(order.rbegin(), order.rend());
  char line[256];
  std::snprintf(line, sizeof line, "kernels: %zu, %.3f ms in all (medians of %d profiled runs)\n",
                ks.size(), total, repeat);
  std::string text = line;
  for (size_t j = 0; j < order.size() && j < 15; ++j) {
    const kernel::Kernel& k = ks[order[j].second];
    std::string calls;
    for (const kernel::Stmt* c : kernel::callsOf(k)) calls += " " + c->callee();
    std::snprintf(line, sizeof line, "  %-20s %8.3f ms %5.1f%%  %s%s\n", k.name.c_str(),
                  order[j].first, total > 0 ? 100 * order[j].first / total : 0.0, k.kind.c_str(),
                  calls.c_str());
    text += line;
  }
  return text;
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

Status bench(const BenchOptions& b) {
  const RunOptions& o = b.run;
  std::optional<runtime::CompileOptions> probe = cacheProbe(o);
  KILN_ASSIGN_OR_RETURN(LoadedProgram program,
                        loadProgram(o.program, probe ? &*probe : nullptr, &o.inputs));
  runtime::CompileTimes times;
  std::function<Status()> runOnce;
  std::unique_ptr<runtime::Executable> exe;
  std::vector<Tensor> outputs;  // reused from run to run, as an application would
  std::string cache = "off";
  if (program.format == "kiln") {  // an artifact: loading is its compile
    runtime::CompileOptions co = loadOptions(o);
    auto start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(exe,
                          runtime::Executable::load(std::move(program.artifact), o.program, co));
    KILN_RETURN_IF_ERROR(checkArtifactOptions(o, *exe));
    times = exe->times();
    times.cacheLoad = msSince(start);
    cache = "artifact";
  } else if (program.cached) {  // a compile-cache hit: nothing imported
    exe = std::move(program.cached);
    times = exe->times();
    cache = "hit";
  }
  const Function& f = exe ? exe->function() : *program.module->entry();
  KILN_ASSIGN_OR_RETURN(RunOptions params, forParameters(o, program));
  KILN_ASSIGN_OR_RETURN(BoundInputs bound, exe ? bindExecutableInputs(*exe, params)
                                               : bindInputs(f, params, &program.read));
  std::vector<Tensor> values;
  for (BoundInput& in : bound.inputs) values.push_back(in.value);
  int threads = 1;
  if (o.backend != "interp") {
    if (!exe) {
      runtime::CompileOptions co = compileOptions(o, bound.symbols, program.sourceKey);
      co.instrumentation = PassManagerOptions{};
      KILN_ASSIGN_OR_RETURN(exe, runtime::Executable::compile(std::move(program.module), co,
                                                              sourceOf(o.program, program)));
      times = exe->times();
      const std::string& report = exe->cacheReport();
      cache = report.empty() ? "off" : report.substr(0, report.find_first_of(":, ("));
    }
    threads = exe->threads();
    runOnce = [&]() { return exe->runInto(values, outputs); };
  } else {
    auto start = std::chrono::steady_clock::now();
    if (o.optLevel > 0) {
      PipelineOptions po;
      po.specialize = bound.symbols;
      KILN_RETURN_IF_ERROR(runDefaultPipeline(*program.module, po, PassManagerOptions{}).status());
    }
    times.passes = msSince(start);
    runOnce = [&]() { return interpret(f, values).status(); };
  }
  // Inputs of other sizes than an artifact's: its recompile first, timed apart.
  double recompileMs = -1;
  if (exe && o.backend != "interp") {
    bool other = false;
    for (size_t i = 0; i < values.size(); ++i)
      other |= values[i].type() != exe->function().parameter(i)->type();
    if (other) {
      int before = exe->recompiles();
      auto start = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(runOnce());
      // Sizes within the ranges it was compiled over (--dim N=1..64) need none.
      if (exe->recompiles() > before) recompileMs = msSince(start);
    }
  }
  for (int i = 0; i < b.warmup; ++i) KILN_RETURN_IF_ERROR(runOnce());
  std::vector<double> ms;
  for (int i = 0; i < b.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(runOnce());
    ms.push_back(msSince(start));
  }
  std::string roofline, kernelText;
  if (b.kernelTimes && (!exe || b.json))
    return Status::error("--kernel-times needs a compiled backend and prints text (no --json)");
  if (b.kernelTimes) {
    KILN_ASSIGN_OR_RETURN(kernelText, kernelTimes(*exe, values, outputs, b.repeat));
  }
  if (b.roofline) {
    if (!exe) return Status::error("--roofline needs a compiled backend (cpu, cuda)");
    std::vector<std::vector<double>> kernelMs(static_cast<size_t>(b.repeat));
    for (auto& run : kernelMs) KILN_RETURN_IF_ERROR(exe->runInto(values, outputs, &run));
    KILN_ASSIGN_OR_RETURN(Ceilings c, measureCeilings(*exe, compileOptions(o, {}, "")));
    KILN_RETURN_IF_ERROR(measureHotKernels(*exe, values, outputs, b.repeat, c));
    roofline = rooflineReport(*exe, kernelMs, c, b.json);
  }
  double median = medianOf(ms);
  std::vector<double> device;
  if (exe) {
    KILN_ASSIGN_OR_RETURN(device, deviceTimes(*exe, values, outputs, b.repeat));
  }
  char deviceText[160] = "";
  if (!device.empty())
    std::snprintf(deviceText, sizeof deviceText,
                  b.json ? ", \"device_ms\": {\"median\": %.4f, \"min\": %.4f, \"max\": %.4f}"
                         : "device: median %.3f ms, min %.3f ms, max %.3f ms (the device's "
                           "events around the launches; copies excluded)\n",
                  medianOf(device), device.front(), device.back());
  double compile = program.loadMs + times.total();
  if (b.json) {
    std::printf(
        "{\"program\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"opt_level\": %d, "
        "\"compile_ms\": {\"total\": %.3f, \"import\": %.3f, \"passes\": %.3f, \"fusion\": %.3f, "
        "\"lowering\": %.3f, \"codegen\": %.3f, \"buffers\": %.3f, \"cache_load\": %.3f}, "
        "\"cache\": \"%s\", "
        "\"run_ms\": {\"median\": %.4f, \"min\": %.4f, \"max\": %.4f, \"repeat\": %d, "
        "\"warmup\": %d}%s%s%s%s%s}\n",
        o.program.c_str(), o.backend.c_str(), threads, o.optLevel, compile, program.loadMs,
        times.passes, times.fusion, times.lowering, times.codegen, times.buffers, times.cacheLoad,
        cache.c_str(), median, ms.front(), ms.back(), b.repeat, b.warmup,
        roofline.empty() ? "" : ", \"roofline\": ", roofline.c_str(),
        boundInputs(program, true).c_str(),
        recompileMs < 0 ? "" : (", \"recompile_ms\": " + std::to_string(recompileMs)).c_str(),
        deviceText);
    return Status::ok();
  }
  std::printf("program: %s (backend %s, %d thread%s, -O%d)\n", o.program.c_str(), o.backend.c_str(),
              threads, threads == 1 ? "" : "s", o.optLevel);
  std::fputs(boundInputs(program, false).c_str(), stdout);
  if (times.cacheLoad > 0)
    std::printf("compile: %.1f ms (read %.1f, %s load %.1f: parse %.1f, fusion %.1f, lowering "
                "%.1f, link %.1f, buffers %.1f)\n",
                compile, program.loadMs, cache == "artifact" ? "artifact" : "compile-cache",
                times.cacheLoad, times.passes, times.fusion, times.lowering, times.codegen,
                times.buffers);
  else
    std::printf("compile: %.1f ms (import %.1f, passes %.1f, fusion %.1f, lowering %.1f, codegen "
                "%.1f, buffers %.1f; cache %s)\n",
                compile, program.loadMs, times.passes, times.fusion, times.lowering, times.codegen,
                times.buffers, cache.c_str());
  if (recompileMs >= 0)
    std::printf("recompile: %.1f ms (the first run, for inputs of other sizes than compiled)\n",
                recompileMs);
  std::printf(
      "run: median %.3f ms, min %.3f ms, max %.3f ms over %d runs (after %d warm-up runs)\n",
      median, ms.front(), ms.back(), b.repeat, b.warmup);
  std::fputs(deviceText, stdout);
  // A device's device time includes every launch's own cost where its runs are not captured.
  if (const std::string why = exe ? exe->uncapturedReason() : ""; !why.empty())
    std::printf("note: %s\n", why.c_str());
  std::fputs(roofline.c_str(), stdout);
  std::fputs(kernelText.c_str(), stdout);
  return Status::ok();
}

}  // namespace

int benchCommand(const std::vector<std::string>& args) {
  bool help = false;
  StatusOr<BenchOptions> b = parse(args, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!b) return reportError(b.status(), kExitUsage);
  Status s = bench(*b);
  if (!s) return reportError(s, kExitError);
  return 0;
}

}  // namespace kiln::cli
