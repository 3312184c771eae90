// Runs one ONNX backend test: imports model.onnx for each test_data_set_*, feeds input_<i>.pb to
// the graph input it belongs to (by position among the graph inputs), runs the backend and compares
// with output_<i>.pb.
#include "conformance_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "conformance_compare.h"
#include "conformance_scope.h"
#include "frontend/onnx/import_options.h"
#include "frontend/onnx/onnx_importer.h"
#include "interp/interpreter.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"

namespace kiln::conformance {

namespace {

namespace fs = std::filesystem;

// Files or folders of `dir` named <prefix><number><suffix>, sorted by the number (so input_10
// follows input_9).
std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix,
                                  const std::string& suffix, bool wantDirs) {
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory(ec) != wantDirs) continue;
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stol(digits), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

struct DataSet {
  std::string name;
  std::vector<std::string> inputs, outputs;
};

std::vector<DataSet> findDataSets(const std::string& testDir) {
  std::vector<DataSet> sets;
  for (const auto& dir : numbered(testDir, "test_data_set_", "", true))
    sets.push_back({fs::path(dir).filename().string(), numbered(dir, "input_", ".pb", false),
                    numbered(dir, "output_", ".pb", false)});
  return sets;
}

StatusOr<std::vector<Tensor>> readAll(const std::vector<std::string>& files) {
  std::vector<Tensor> out;
  for (const auto& f : files) {
    auto t = onnx::readTensorProtoFile(f);
    if (!t) return t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

// ONNX's older backend-test data stores bfloat16 tensors as UINT16 holding the bf16 bits. Such a
// tensor, where the model has a bf16 of the same dims, is read as those bits.
Tensor asBf16IfStoredAsU16(const Tensor& t, const TensorType& want) {
  if (t.dtype() != DType::U16 || want.dtype() != DType::BF16 ||
      t.type().withDType(DType::BF16) != want)
    return t;
  Tensor b(DType::BF16, t.dims());
  if (t.byteSize() > 0) std::memcpy(b.mutableBytes(), t.bytes(), t.byteSize());
  return b;
}

// Runs the imported module on the backend: the interpreter, or the cpu backend (compiled for the
// inputs' shapes at the run's -O level).
StatusOr<std::vector<Tensor>> runOnBackend(const RunOptions& opts, std::unique_ptr<Module> m,
                                           std::span<const Tensor> inputs) {
  const Function& f = *m->entry();
  if (opts.backend == "interp") return interpretSized(*m->entry(), inputs);
  KILN_CHECK(isKnownBackend(opts.backend), "unknown backend " + opts.backend);
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.dims());
  runtime::CompileOptions co;
  co.backend = opts.backend;
  co.optLevel = opts.optLevel;
  co.libraryCalls = opts.libraryCalls;
  co.threads = 1;
  KILN_ASSIGN_OR_RETURN(co.dims, bindingsFromInputShapes(f, shapes));
  auto exe = runtime::Executable::compile(std::move(m), co);
  if (!exe) return Status(exe.status()).prefix("compile");
  return (*exe)->run(inputs);
}

// Fills the outcome of a test whose model did not import: the importer's full list of
// unsupported items when it has one, else the import error.
void describeUnsupported(const std::string& model, const Status& importError, TestResult& r) {
  r.outcome = Outcome::Unsupported;
  auto items = onnx::checkModelFile(model);
  if (!items || items->empty()) {
    r.reason = importError.str();
    return;
  }
  std::set<std::string> ops;
  std::string reason;
  size_t shown = 0;
  for (const auto& u : *items) {
    if (!u.opType.empty()) ops.insert(u.opType);
    if (shown++ < 4)
      reason += (reason.empty() ? "" : "; ") + u.node +
                (u.opType.empty() ? "" : " (" + u.opType + ")") + ": " + u.reason;
  }
  if (items->size() > 4) reason += "; and " + std::to_string(items->size() - 4) + " more";
  r.reason = reason;
  r.unsupportedOps.assign(ops.begin(), ops.end());
}

// Imports the model for one data set. Graph inputs whose values the importer needs (a shape, axes,
// a count) are bound to this data set's values and become constants; the others stay parameters.
// With opts.optLevel > 0 the function is then specialised to the inputs' shapes and put through
// the default pipeline, as `kiln run` does.
StatusOr<std::unique_ptr<Module>> importForDataSet(const std::string& model,
                                                   const std::vector<std::string>& names,
                                                   const std::vector<Tensor>& inputs,
                                                   const RunOptions& opts) {
  // The data set also fixes the sizes of the inputs' named dims (dim_param): shape arithmetic on
  // them (a split into as many pieces as a dim is long) then imports.
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < names.size(); ++i) values[names[i]] = inputs[i];
  KILN_ASSIGN_OR_RETURN(onnx::ImportOptions io, onnx::importOptionsForInputs(model, values));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(model, io));
  // The cpu backend compiles (and optimises) the module itself.
  if (opts.optLevel == 0 || opts.backend != "interp") return m;
  Function* f = m->entry();
  KILN_CHECK(f != nullptr, "the imported module has no function");
  std::vector<std::vector<int64_t>> shapes;
  for (size_t p = 0; p < f->numParameters(); ++p) {
    auto it = std::find(names.begin(), names.end(), f->parameter(p)->name());
    KILN_CHECK(it != names.end(), "parameter '" + f->parameter(p)->name() + "' has no input");
    shapes.push_back(inputs[it - names.begin()].dims());
  }
  PipelineOptions po;
  KILN_ASSIGN_OR_RETURN(po.specialize, bindingsFromInputShapes(*f, shapes));
  Status s = runDefaultPipeline(*m, po, PassManagerOptions{}).status();
  if (!s) return s.prefix("optimisation pipeline");
  return m;
}

// Runs one data set; false (with r filled) when the test did not pass on it.
bool runDataSet(const std::string& model, const std::vector<std::string>& names, const DataSet& ds,
                const RunOptions& opts, TestResult& r) {
  auto inputs = readAll(ds.inputs);
  if (!inputs) {
    r.outcome = Outcome::Unsupported;
    r.reason = ds.name + ": input data: " + inputs.status().str();
    return false;
  }
  if (inputs->size() != names.size()) {
    r.outcome = Outcome::Error;
    r.reason = ds.name + ": the model has " + std::to_string(names.size()) +
               " graph inputs, the data set has " + std::to_string(inputs->size());
    return false;
  }
  auto module = importForDataSet(model, names, *inputs, opts);
  if (!module) {
    if (module.status().message().find("optimisation pipeline") != std::string::npos) {
      r.outcome = Outcome::Error;
      r.reason = ds.name + ": " + module.status().str();
    } else {
      describeUnsupported(model, module.status(), r);
    }
    return false;
  }
  const Function* f = (*module)->entry();
  if (!f) {
    r.outcome = Outcome::Error;
    r.reason = "the imported module has no function";
    return false;
  }
  // Parameters are the graph inputs the importer did not bind, matched by name.
  std::vector<Tensor> args;
  for (size_t p = 0; p < f->numParameters(); ++p) {
    auto it = std::find(names.begin(), names.end(), f->parameter(p)->name());
    if (it == names.end()) {
      r.outcome = Outcome::Error;
      r.reason = ds.name + ": parameter '" + f->parameter(p)->name() + "' is no graph input";
      return false;
    }
    args.push_back(asBf16IfStoredAsU16((*inputs)[it - names.begin()], f->parameter(p)->type()));
  }
  std::vector<std::string> outputNames = f->outputNames();
  auto outputs = runOnBackend(opts, std::move(*module), args);
  if (!outputs) {
    r.outcome = Outcome::Error;
    r.reason = ds.name + ": " + outputs.status().str();
    return false;
  }
  auto expected = readAll(ds.outputs);
  if (!expected) {
    r.outcome = Outcome::Unsupported;
    r.reason = ds.name + ": expected output data: " + expected.status().str();
    return false;
  }
  if (outputs->size() != expected->size()) {
    r.outcome = Outcome::Failed;
    r.reason = ds.name + ": " + std::to_string(outputs->size()) + " outputs, expected " +
               std::to_string(expected->size());
    return false;
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    Tensor want = asBf16IfStoredAsU16((*expected)[i], (*outputs)[i].type());
    Comparison c = compareTensors((*outputs)[i], want, opts.rtol, opts.atol);
    r.maxAbsError = std::max(r.maxAbsError, c.maxAbsError);
    if (c.ok) continue;
    r.outcome = Outcome::Failed;
    r.reason =
        ds.name + ": output " + std::to_string(i) + " '" + outputNames[i] + "': " + c.message;
    return false;
  }
  return true;
}

std::vector<std::optional<Tensor>> readFirstInputs(const std::vector<DataSet>& sets) {
  std::vector<std::optional<Tensor>> out;
  if (sets.empty()) return out;
  for (const auto& f : sets[0].inputs) {
    auto t = onnx::readTensorProtoFile(f);
    out.push_back(t ? std::optional<Tensor>(std::move(*t)) : std::nullopt);
  }
  return out;
}

void runTestBody(const TestCase& test, const RunOptions& opts, TestResult& r) {
  std::string model = (fs::path(test.path) / "model.onnx").string();
  std::error_code ec;
  if (!fs::is_regular_file(model, ec)) {
    r.outcome = Outcome::Unsupported;
    r.reason = "no model.onnx in the test folder";
    return;
  }
  std::vector<DataSet> sets = findDataSets(test.path);
  ScopeDecision scope = decideScope(model, readFirstInputs(sets));
  r.inScope = scope.inScope;
  r.scopeReason = scope.reason;
  if (sets.empty()) {
    r.outcome = Outcome::Error;
    r.reason = "no test_data_set_* folder";
    return;
  }
  auto names = onnx::graphInputNames(model);
  if (!names) return describeUnsupported(model, names.status(), r);
  for (const auto& ds : sets)
    if (!runDataSet(model, *names, ds, opts, r)) return;
  r.outcome = Outcome::Passed;
}

}  // namespace

const char* outcomeName(Outcome o) {
  switch (o) {
    case Outcome::Passed: return "passed";
    case Outcome::Failed: return "failed";
    case Outcome::Unsupported: return "unsupported";
    case Outcome::Error: return "error";
  }
  return "error";
}

bool isKnownBackend(const std::string& backend) {
  return backend == "interp" || backend == "cpu" || backend == "cuda";
}

std::vector<TestCase> discoverTests(const std::string& dir, const std::string& filter) {
  std::vector<TestCase> tests;
  std::string folder = fs::path(dir).lexically_normal().filename().string();
  if (folder.empty()) folder = fs::path(dir).lexically_normal().parent_path().filename().string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec)) continue;
    std::string name = e.path().filename().string();
    bool match = false;  // `filter` is substrings separated by '|'
    for (size_t at = 0, end = 0; !match && end != std::string::npos; at = end + 1) {
      end = filter.find('|', at);
      match = name.find(filter.substr(at, end - at)) != std::string::npos;
    }
    if (!match) continue;
    tests.push_back({folder, name, e.path().string()});
  }
  std::sort(tests.begin(), tests.end(),
            [](const TestCase& a, const TestCase& b) { return a.name < b.name; });
  return tests;
}

TestResult runTest(const TestCase& test, const RunOptions& opts) {
  TestResult r;
  r.test = test;
  auto start = std::chrono::steady_clock::now();
  runTestBody(test, opts, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kiln::conformance
