// `kiln run`: load a program, bind its inputs, run it, write its outputs, print the report.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "commands.h"
#include "inputs.h"
#include "interp/interpreter.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "program.h"
#include "run_options.h"
#include "runtime/executable.h"
#include "summary.h"
#include "support/npy.h"

namespace kiln::cli {
namespace {

double msSince(std::chrono::steady_clock::time_point start) {
  std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - start;
  return d.count();
}

// A file name made of [A-Za-z0-9._-] only, not starting with '.', so that an output name cannot
// escape the output directory or hide itself.
std::string sanitizeFileName(const std::string& name) {
  std::string s;
  for (char c : name.substr(0, 200)) {
    bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    s += plain ? c : '_';
  }
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

// How many values of `f` have a type with a symbolic dimension.
int countSymbolicValues(const Function& f) {
  int n = 0;
  for (const auto& node : f.nodes()) {
    for (size_t r = 0; r < node->numResults(); ++r) n += !node->result(r)->type().isStatic();
  }
  return n;
}

// "N=4, S=16".
std::string describeBindings(const SymbolBindings& sizes) {
  std::string given;
  for (const auto& [symbol, size] : sizes)
    given += (given.empty() ? "" : ", ") + symbol + "=" + std::to_string(size);
  return given;
}

// -O0: substitutes the sizes the inputs fixed for the parameters' symbols (specialize-shapes), so
// that ops whose result shape is declared rather than derived (a bias broadcast to f32[N,32])
// know them too. Describes what it did: "N=4: 10 value types made static".
StatusOr<std::string> specialize(Module& m, const Function& f, PassManager& pm,
                                 const SymbolBindings& sizes) {
  int before = countSymbolicValues(f);
  std::unique_ptr<Pass> pass = makeSpecializeShapesPass(sizes);
  StatusOr<bool> changed = pm.runPass(*pass, m);
  std::string given = describeBindings(sizes);
  if (!changed) return Status(changed.status()).prefix("with " + given);
  int made = before - countSymbolicValues(f);
  return given + ": " + std::to_string(made) + (made == 1 ? " value type" : " value types") +
         " made static";
}

std::vector<std::string> outputNames(const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string& n = given[i];
    // %0, %1, ... are how the text spells unnamed values.
    bool unnamed = n.empty() || n.find_first_not_of("0123456789") == std::string::npos;
    names.push_back(unnamed ? "output_" + std::to_string(i) : n);
  }
  return names;
}

std::vector<std::string> outputNames(const Function& f) { return outputNames(f.outputNames()); }

// Writes each output to dir/NAME.npy (names made unique); bf16 goes out as f32, with a note.
Status writeOutputs(const std::string& dir, std::vector<TensorRow>& outputs,
                    std::vector<std::string>& notes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    return Status::error("cannot create output directory '" + dir + "'");
  std::set<std::string> used;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string file = sanitizeFileName(outputs[i].name);
    while (!used.insert(file).second) file += "_" + std::to_string(i);
    std::string path = (std::filesystem::path(dir) / (file + ".npy")).string();
    Tensor value = outputs[i].value;
    if (value.dtype() == DType::BF16) {
      Tensor f32(DType::F32, value.dims());
      for (int64_t k = 0; k < value.numElements(); ++k) f32.setDouble(k, value.getDouble(k));
      value = f32;
      notes.push_back("output '" + outputs[i].name + "' is bf16; " + path +
                      " holds it as f32 (numpy has no bf16)");
    }
    Status s = writeNpy(path, value);
    if (!s) return Status::error("output '" + outputs[i].name + "': " + path + ": " + s.message());
    outputs[i].where = path;
  }
  return Status::ok();
}

// Everything after option parsing; returns an error to report with exit status 1.
// Writes the outputs (when asked) and prints the summary.
Status finishRun(const RunOptions& o, RunSummary& summary, const std::vector<std::string>& names,
                 const std::vector<Tensor>& results) {
  KILN_CHECK(names.size() == results.size(), "the run returned a result count unlike outputs");
  for (size_t i = 0; i < results.size(); ++i)
    summary.outputs.push_back({names[i], results[i], "not written"});
  if (!o.outputDir.empty())
    KILN_RETURN_IF_ERROR(writeOutputs(o.outputDir, summary.outputs, summary.notes));
  std::fputs(formatSummary(summary).c_str(), stdout);
  return Status::ok();
}

// "cpu, 2 threads", "cuda".
std::string backendSummary(const runtime::Executable& exe) {
  const std::string name = exe.target().name();
  if (name != "cpu") return name;
  return name + ", " + std::to_string(exe.threads()) + " threads";
}

// A .kiln artifact, or a compile-cache hit: loaded (no passes, no code generation) and run on
// the target it was compiled for.
Status runArtifact(const RunOptions& o, LoadedProgram& program, RunSummary& summary) {
  std::unique_ptr<runtime::Executable> exe = std::move(program.cached);
  auto start = std::chrono::steady_clock::now();
  if (exe) {
    summary.stages.push_back({"read+hash", program.loadMs, "the source, for its cache key"});
    summary.notes.push_back("compile cache " + exe->cacheReport());
  } else {
    runtime::CompileOptions co = loadOptions(o);
    size_t bytes = program.artifact.bytes().size();
    KILN_ASSIGN_OR_RETURN(exe,
                          runtime::Executable::load(std::move(program.artifact), o.program, co));
    KILN_RETURN_IF_ERROR(checkArtifactOptions(o, *exe));
    summary.stages.push_back({"read", program.loadMs, std::to_string(bytes) + " bytes"});
  }
  const Function& f = exe->function();
  summary.function = f.name();
  // A cache hit was loaded by loadProgram (Executable::fromCache), which timed it.
  double loadMs = program.format == "kiln" ? msSince(start) : exe->times().cacheLoad;
  summary.stages.push_back(
      {program.format == "kiln" ? "load artifact" : "load compile-cache entry", loadMs,
       std::to_string(exe->plan().kernels.size()) + " kernels, " +
           std::to_string(exe->uniqueKernels()) +
           " distinct, linked from object code; library calls: " + exe->libraryCalls()});
  summary.stages.push_back({"buffers", 0, runtime::describeBufferPlan(exe->buffers())});
  KILN_ASSIGN_OR_RETURN(BoundInputs bound, bindExecutableInputs(*exe, o));
  std::vector<Tensor> values;
  for (BoundInput& in : bound.inputs) {
    values.push_back(in.value);
    summary.inputs.push_back({in.name, in.value, in.source});
  }
  start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> results, exe->run(values));
  summary.runMs = msSince(start);
  if (exe->recompiles() > 0) {
    std::string sizes;
    for (const SymbolBindings& s : exe->specializations()) sizes += describeBindings(s);
    summary.notes.push_back("recompiled for " + sizes + " (the run's time includes it)");
  }
  summary.backend = backendSummary(*exe);
  return finishRun(o, summary, outputNames(exe->outputNames()), results);
}

Status runProgram(const RunOptions& o) {
  RunSummary summary;
  summary.program = o.program;
  summary.backend = o.backend;
  std::optional<runtime::CompileOptions> probe = cacheProbe(o);
  KILN_ASSIGN_OR_RETURN(LoadedProgram program,
                        loadProgram(o.program, probe ? &*probe : nullptr, &o.inputs));
  if (program.format == "kiln" || program.cached) return runArtifact(o, program, summary);
  Function& f = *program.module->entry();
  summary.function = f.name();
  std::string loadStage = program.format == "onnx" ? "import+verify" : "parse+verify";
  summary.stages.push_back({loadStage, program.loadMs, describeNodes(f)});

  // Output names are the program's interface: taken before the passes, which may replace an
  // output by another value (max(h, h) by h).
  std::vector<std::string> names = outputNames(f);
  KILN_ASSIGN_OR_RETURN(RunOptions params, forParameters(o, program));
  KILN_ASSIGN_OR_RETURN(BoundInputs bound, bindInputs(f, params, &program.read));
  std::vector<Tensor> values;
  for (BoundInput& in : bound.inputs) {
    values.push_back(in.value);
    summary.inputs.push_back({in.name, in.value, in.source});
  }
  for (const BoundValue& b : program.bound) {
    summary.inputs.push_back({b.name, b.value, b.file + " (bound)"});
    summary.notes.push_back(describeBound(b));
  }
  std::vector<Tensor> results;
  if (o.backend != "interp") {
    size_t before = f.numNodes();
    runtime::CompileOptions co = compileOptions(o, bound.symbols, program.sourceKey);
    KILN_ASSIGN_OR_RETURN(
        std::unique_ptr<runtime::Executable> exe,
        runtime::Executable::compile(std::move(program.module), co, sourceOf(o.program, program)));
    const runtime::CompileTimes& t = exe->times();
    if (!exe->cacheReport().empty()) summary.notes.push_back("compile cache " + exe->cacheReport());
    if (o.instrumentation.timePasses) std::fputs(exe->passTimings().c_str(), stderr);
    const Function& opt = exe->function();
    std::string bindings = bound.symbols.empty() ? "" : describeBindings(bound.symbols) + "; ";
    for (const auto& [symbol, r] : o.ranges)
      bindings += symbol + " compiled over " + r.str() + "; ";
    summary.stages.push_back({o.optLevel > 0 ? "optimize (-O1)" : "specialize-shapes", t.passes,
                              bindings + std::to_string(before) + " -> " + describeNodes(opt)});
    const fusion::FusionPlan& plan = exe->plan();
    summary.stages.push_back({"fusion", t.fusion,
                              std::to_string(plan.kernels.size()) + " kernels (kiln explain " +
                                  "shows them and why edges were not fused)"});
    summary.stages.push_back({"lowering", t.lowering, "kernel IR for each kernel"});
    summary.stages.push_back({"codegen", t.codegen,
                              std::to_string(exe->uniqueKernels()) + " distinct kernels for " +
                                  exe->hostCpu() + "; library calls: " + exe->libraryCalls()});
    summary.stages.push_back({"buffers", t.buffers, runtime::describeBufferPlan(exe->buffers())});
    auto start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(results, exe->run(values));
    summary.runMs = msSince(start);
    summary.backend = backendSummary(*exe);
  } else {
    PassManager pm(o.instrumentation);
    if (o.optLevel > 0) {
      // The default pipeline, specialised to the sizes the inputs fixed.
      PipelineOptions po;
      po.specialize = bound.symbols;
      auto start = std::chrono::steady_clock::now();
      size_t before = f.numNodes();
      StatusOr<bool> changed = runDefaultPipeline(*program.module, pm, po);
      if (!changed) return changed.status();
      std::string what = std::to_string(before) + " -> " + describeNodes(f);
      if (!bound.symbols.empty()) what = describeBindings(bound.symbols) + "; " + what;
      summary.stages.push_back({"optimize (-O1)", msSince(start), what});
    } else if (!bound.symbols.empty()) {
      auto start = std::chrono::steady_clock::now();
      KILN_ASSIGN_OR_RETURN(std::string what, specialize(*program.module, f, pm, bound.symbols));
      summary.stages.push_back({"specialize-shapes", msSince(start), what});
    }
    if (o.precision == "f16" || o.precision == "bf16") {
      auto start = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(pm.runPass("lower-precision-" + o.precision, *program.module).status());
      summary.stages.push_back({"lower-precision", msSince(start), "values in " + o.precision});
    }
    if (o.instrumentation.timePasses) std::fputs(pm.timingReport().c_str(), stderr);
    auto start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(results, interpretSized(f, values));
    summary.runMs = msSince(start);
  }
  return finishRun(o, summary, names, results);
}

}  // namespace

int runCommand(const std::vector<std::string>& args) {
  StatusOr<RunOptions> o = parseRunOptions(args);
  if (!o) return reportError(o.status(), kExitUsage);
  if (o->help) {
    std::fputs(runUsage(), stdout);
    return 0;
  }
  Status s = runProgram(*o);
  if (!s) return reportError(s, kExitError);
  return 0;
}

}  // namespace kiln::cli
