// The Executable: a target's program with the compile cache and the artifact container around
// it. Knows targets only through runtime/target.h.
#include "runtime/executable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "compiler/compile.h"
#include "runtime/executable_sections.h"
#include "runtime/source_key.h"
#include "support/hash.h"
#include "support/large_buffer.h"
#include "support/version.h"

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A copy of `m` to compile again from: its text, and its constants in one blob that the copy
// parsed back borrows.
ModuleSource keptModule(const Module& m) {
  Blob blob;
  PrintOptions po;
  po.blob = &blob;
  po.inlineConstantLimit = 16;
  auto text = std::make_shared<const std::string>(printModule(m, po));
  std::shared_ptr<std::byte> bytes = allocateLarge(std::max<uint64_t>(blob.size, 1));
  uint64_t at = 0;
  for (std::string_view piece : blob.pieces) {
    if (!piece.empty()) std::memcpy(bytes.get() + at, piece.data(), piece.size());
    at += piece.size();
  }
  uint64_t size = blob.size;
  ModuleSource s;
  s.name = "module @" + m.entry()->name();
  s.load = [text, bytes, size]() -> StatusOr<std::unique_ptr<Module>> {
    std::string_view view(reinterpret_cast<const char*>(bytes.get()), size);
    return parseModule(*text, "<kept module>", view, bytes);
  };
  return s;
}

// How many specialisations besides the first an executable keeps; past it the least recently
// used goes (a later run of its sizes loads it from the compile cache, or compiles it again).
constexpr size_t kMaxSpecializations = 8;

}  // namespace

struct Executable::Impl {
  const Target* target = nullptr;
  std::unique_ptr<Program> program;
  CompileOptions options;
  std::string passTimings;
  std::string cacheReport;               // what the compile cache did
  std::string loadedFrom;                // the artifact it was loaded from
  std::vector<std::string> outputNames;  // as the source named them (outputNames())
  Guards guards;                         // the input dims the source left symbolic
  // Outputs of run-time size: the program's function returns their sizes after the
  // outputNames.size() outputs of the source, and runs trim them (exposeDynamicSizes).
  std::vector<DynamicDim> dynamic;
  ModuleSource source;  // how to compile again
  // The fusion plan and scheduled kernels, as its artifact stores them (compiler/stored_*.h).
  compiler::StoredProgram stored;

  // The specialisations for other sizes of the guarded symbols, each ready once compiled (a
  // run that finds one being compiled waits for it). Under `mu`.
  struct Built {
    std::shared_ptr<const Executable> exe;
    Status status;
  };
  struct Kept {
    std::shared_future<Built> ready;
    uint64_t lastUse = 0;
  };
  mutable std::mutex mu;
  mutable std::map<SymbolBindings, Kept> kept;
  mutable std::map<SymbolBindings, Kept> buckets;  // by the buckets' lower ends
  mutable uint64_t uses = 0;
  mutable int recompiles = 0;
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

// The compile cache: an entry is the artifact of an earlier compile of the same source with the
// same options, for this target and machine and this build of Kiln (buildKey: a fingerprint of
// its code, computed once per process and cache directory). Its path ("" without a cache).
std::string Executable::cacheEntryPath(const CompileOptions& options, const Target& target) {
  if (options.cacheDir.empty() || options.sourceKey.empty()) return "";
  static std::mutex mu;
  static std::map<std::string, std::string> builds;  // cache directory -> buildKey
  std::string build;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = builds.find(options.cacheDir);
    if (it == builds.end()) it = builds.emplace(options.cacheDir, buildKey(options.cacheDir)).first;
    build = it->second;
  }
  // The threads a run has, and whether kernels may run at once, choose the library kernels'
  // weight layouts: entries for other thread counts are kept apart, not rejected and rebuilt.
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string key = options.sourceKey + "\n" + optionsText(options) + "\n" + target.name() + " " +
                    target.machine() + "\n" + build + "\nthreads " + std::to_string(threads) +
                    (options.concurrentKernels ? "" : " sequential");
  return (std::filesystem::path(options.cacheDir) / (hex64(hash64(key)) + ".kiln")).string();
}

// Deletes the least recently used entries (by modification time, which a hit refreshes) of the
// cache in `dir` until its entries total at most `limit` bytes; `keep` stays. Leftover temporary
// files of writes that did not finish, an hour old, go too. Returns how many entries it deleted.
int Executable::evictCacheEntries(const std::string& dir, uint64_t limit, const std::string& keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  uint64_t total = 0;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    std::string name = p.filename().string();
    fs::file_time_type t = e.last_write_time(ec);
    if (ec || !e.is_regular_file(ec)) continue;
    if (name.rfind(".", 0) == 0 && name.find(".kiln.tmp") != std::string::npos) {
      if (now - t > std::chrono::hours(1)) fs::remove(p, ec);
      continue;
    }
    if (p.extension() != ".kiln") continue;
    total += e.file_size(ec);
    if (p != fs::path(keep)) entries.push_back({t, p});
  }
  std::sort(entries.begin(), entries.end());
  int deleted = 0;
  for (const auto& [time, p] : entries) {
    if (total <= limit) break;
    uint64_t size = fs::file_size(p, ec);
    if (ec || !fs::remove(p, ec)) continue;
    total -= size;
    ++deleted;
  }
  return deleted;
}

// The cache entry at `path` loaded; null when there is none, an error when it is unusable.
StatusOr<std::unique_ptr<Executable>> Executable::loadCacheEntry(const std::string& path,
                                                                 const CompileOptions& options) {
  if (!std::filesystem::exists(path)) return std::unique_ptr<Executable>();
  auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> hit, load(std::move(file), path, options));
  hit->impl_->cacheReport = "hit: " + path;
  // The entry is now the most recently used (evictCacheEntries deletes the least recent first).
  std::error_code ec;
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
  hit->impl_->program->times().cacheLoad = msSince(start);
  return hit;
}

StatusOr<std::unique_ptr<Executable>> Executable::fromCache(const CompileOptions& options) {
  StatusOr<const Target*> target = findTarget(options.backend);
  if (!target) return std::unique_ptr<Executable>();  // compile() reports it
  std::string path = cacheEntryPath(options, **target);
  if (path.empty()) return std::unique_ptr<Executable>();
  StatusOr<std::unique_ptr<Executable>> hit = loadCacheEntry(path, options);
  if (!hit) return std::unique_ptr<Executable>();  // compile() reports and rebuilds it
  return hit;
}

StatusOr<std::unique_ptr<Executable>> Executable::compile(std::unique_ptr<Module> module,
                                                          const CompileOptions& options,
                                                          std::optional<ModuleSource> source) {
  if (!module->entry()) return Status::error("the module has no function");
  std::vector<TensorType> sourceTypes = parameterTypes(*module->entry());
  bool symbolic = std::any_of(sourceTypes.begin(), sourceTypes.end(),
                              [](const TensorType& t) { return !t.isStatic(); });
  if (!source) source = symbolic && options.recompile ? keptModule(*module) : ModuleSource{};
  const bool each = std::any_of(options.ranges.begin(), options.ranges.end(),
                                [](const auto& r) { return r.second.each; });
  const bool canEach = options.recompile && source->load && !options.ranges.empty();
  StatusOr<std::unique_ptr<Executable>> exe =
      each && canEach ? compileEach(options, sourceTypes, *source, Status::ok())
                      : build(std::move(module), options, sourceTypes, *source);
  if (!exe && exe.status().needsSizes() && canEach)
    exe = compileEach(options, sourceTypes, *source, exe.status());
  if (!exe) return exe.status();
  // A cache hit records the source of the compile that wrote it: this one is the caller's.
  (*exe)->impl_->source = std::move(*source);
  return exe;
}

StatusOr<std::unique_ptr<Executable>>
Executable::compileEach(const CompileOptions& options, const std::vector<TensorType>& sourceTypes,
                        const ModuleSource& source, const Status& why) {
  CompileOptions atLows = options;
  eachAtLowEnds(atLows.ranges, atLows.dims);
  const SymbolRanges each = std::exchange(atLows.ranges, {});
  std::string ranges;
  for (const auto& [symbol, r] : each)
    ranges += (ranges.empty() ? "" : ", ") + symbol + "=" + r.str();
  if (!why.isOk())
    std::fputs(("kiln: " + (source.name.empty() ? std::string("module") : source.name) +
                " cannot be compiled over its ranges (" + why.message() +
                "): compiling each run's sizes instead, once each (" + ranges + ")\n")
                   .c_str(),
               stderr);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, source.load());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                        build(std::move(module), atLows, sourceTypes, source));
  Impl& m = *exe->impl_;
  m.options.ranges = each;
  m.guards = guardsOf(sourceTypes, parameterTypes(m.program->function()), each);
  return exe;
}

StatusOr<std::unique_ptr<Executable>> Executable::build(std::unique_ptr<Module> module,
                                                        const CompileOptions& options,
                                                        const std::vector<TensorType>& sourceTypes,
                                                        const ModuleSource& source) {
  KILN_ASSIGN_OR_RETURN(const Target* target, findTarget(options.backend));
  if (!module->entry()) return Status::error("the module has no function");
  std::string cachePath = cacheEntryPath(options, *target), cacheReport;
  if (!cachePath.empty()) {
    StatusOr<std::unique_ptr<Executable>> hit = loadCacheEntry(cachePath, options);
    if (hit && *hit) return hit;
    cacheReport =
        !hit ? "entry rejected (" + hit.status().message() + "), rebuilt: " : "miss, written: ";
  }
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = options;
  // The outputs' names are the program's interface: taken before the passes, which may replace
  // an output by another value (max(h, h) by h).
  impl->outputNames = module->entry()->outputNames();
  KILN_ASSIGN_OR_RETURN(compiler::Compiled c,
                        compiler::compile(std::move(module), *target, options));
  impl->program = std::move(c.program);
  impl->stored = std::move(c.stored);
  impl->passTimings = std::move(c.passTimings);
  impl->dynamic = std::move(c.dynamic);
  impl->guards = guardsOf(sourceTypes, parameterTypes(impl->program->function()), options.ranges);
  impl->source = source;
  auto exe = std::unique_ptr<Executable>(new Executable(std::move(impl)));
  if (!cachePath.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cacheDir, ec);
    StatusOr<uint64_t> written = exe->writeArtifact(cachePath);
    exe->impl_->cacheReport = written ? cacheReport + cachePath
                                      : cacheReport + "not written: " + written.status().message();
    if (written) {
      int evicted = evictCacheEntries(options.cacheDir, options.cacheLimitBytes, cachePath);
      if (evicted > 0)
        exe->impl_->cacheReport += " (" + std::to_string(evicted) +
                                   " least recently used entries deleted to stay under the " +
                                   std::to_string(options.cacheLimitBytes >> 20) + " MiB limit)";
    }
  }
  return exe;
}

// ---- artifacts ------------------------------------------------------------------------------
//
// Sections: "meta" (kiln version, target, its machine, options), "outputs" (the source's output
// names, a line each), and the program's own (Program::artifactParts).

void Executable::artifactParts(ArtifactParts& parts) const {
  const Impl& m = *impl_;
  parts.add("meta", "kiln " + std::string(kKilnVersion) + "\nbackend " + m.target->name() +
                        "\ntarget " + m.target->machine() + "\noptions " + optionsText(m.options) +
                        "\n");
  std::string outputs;
  for (const std::string& name : m.outputNames) outputs += name + "\n";
  parts.add("outputs", outputs);
  if (!m.guards.empty()) parts.add("guards", guardsText(m.guards));
  if (!m.dynamic.empty()) parts.add("dynamic", dynamicDimsText(m.dynamic));
  if (!m.source.path.empty()) parts.add("source", sourceText(m.source));
  parts.add("kernels.ir", m.stored.ir);  // (empty: no kernels, or a target that runs the graph)
  parts.add("kernels.values", m.stored.values);
  parts.add("fusion.plan", m.stored.plan);
  m.program->artifactParts(parts);
}

std::string Executable::serialize() const {
  ArtifactParts parts;
  artifactParts(parts);
  return encodeArtifact(parts.sections);
}

StatusOr<uint64_t> Executable::writeArtifact(const std::string& path) const {
  ArtifactParts parts;
  artifactParts(parts);
  return runtime::writeArtifact(path, parts.sections);
}

StatusOr<std::unique_ptr<Executable>> Executable::load(std::string_view bytes,
                                                       const std::string& source,
                                                       const CompileOptions& runOptions) {
  return load(bytes, source, runOptions, nullptr);
}

StatusOr<std::unique_ptr<Executable>> Executable::load(MappedFile file, const std::string& source,
                                                       const CompileOptions& runOptions) {
  auto mapping = std::make_shared<const MappedFile>(std::move(file));
  return load(mapping->bytes(), source, runOptions, mapping);
}

// `mapping`, when given, is the mapped file `bytes` lie in: the program may use its bytes in
// place, and keep it mapped.
StatusOr<std::unique_ptr<Executable>> Executable::load(std::string_view bytes,
                                                       const std::string& source,
                                                       const CompileOptions& runOptions,
                                                       std::shared_ptr<const MappedFile> mapping) {
  auto start = Clock::now();
  // The table is read once; only "meta" is checked now, since it names the target that says
  // which of the other sections are weights.
  KILN_ASSIGN_OR_RETURN(DecodedArtifact s, decodeArtifact(bytes, source, [](const auto& name) {
                          return name != "meta";
                        }));
  std::map<std::string, std::string> meta;
  for (const std::string& l : sectionLines(s["meta"])) {
    size_t sp = l.find(' ');
    if (sp != std::string::npos) meta[l.substr(0, sp)] = l.substr(sp + 1);
  }
  KILN_ASSIGN_OR_RETURN(const Target* target, artifactTarget(meta, source));
  const std::string backend = target->name();
  // From a mapping the weights are checked on another thread while the rest of the load runs:
  // they are data, which nothing reads before that check has passed (the load waits for it
  // before it returns the executable). Everything else is checked before it is used.
  for (const auto& [name, data] : s.sections)
    if (name != "meta" && (!mapping || !target->isWeightSection(name)))
      KILN_RETURN_IF_ERROR(s.verify(name));
  std::future<Status> weightsChecked;
  if (mapping)
    weightsChecked = std::async(std::launch::async, [&s, target, &mapping] {
      // Read from the file, not through the mapping: checking makes no page resident (kernels
      // map the pages they read when they first run).
      for (const auto& [name, data] : s.sections)
        if (target->isWeightSection(name)) KILN_RETURN_IF_ERROR(s.verify(name, mapping.get()));
      return Status::ok();
    });
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  // What shapes the code (optimisation level, fusion, post-ops) comes from the artifact; how to
  // run it (threads) from the caller.
  impl->options = runOptions;
  impl->options.backend = backend;
  KILN_RETURN_IF_ERROR(parseOptionsText(meta["options"], impl->options));
  impl->outputNames = sectionLines(s["outputs"]);
  StatusOr<std::unique_ptr<Program>> program = target->load(s, source, impl->options, mapping);
  // The weights' check is waited for before anything returns: the thread reads `s`.
  Status weights = weightsChecked.valid() ? weightsChecked.get() : Status::ok();
  if (!program) return program.status();
  KILN_RETURN_IF_ERROR(weights);
  impl->program = std::move(*program);
  impl->stored = {std::string(s["kernels.ir"]), std::string(s["kernels.values"]),
                  std::string(s["fusion.plan"])};
  KILN_ASSIGN_OR_RETURN(
      impl->dynamic,
      storedRunTimeSizes(s, impl->outputNames, impl->program->function().outputs().size(), source));
  if (s.has("guards")) {
    StatusOr<Guards> guards =
        parseGuards(s["guards"], parameterTypes(impl->program->function()), impl->options.ranges);
    if (!guards) return Status(guards.status()).prefix(source);
    impl->guards = std::move(*guards);
  }
  if (s.has("source")) impl->source = parseSourceText(sectionLines(s["source"]));
  impl->program->times().passes = msSince(start) - impl->program->times().total();
  impl->loadedFrom = source;
  // Parsing touched the pages of the text, the code and the constants it read. Those still used
  // (constants that kernels read) come back from the page cache on first use; the rest stop
  // counting as this process's memory.
  if (mapping) mapping->release(bytes);
  return std::unique_ptr<Executable>(new Executable(std::move(impl)));
}

StatusOr<std::vector<Tensor>> Executable::run(std::span<const Tensor> inputs,
                                              std::vector<double>* kernelMs) const {
  std::vector<Tensor> outputs;
  KILN_RETURN_IF_ERROR(runInto(inputs, outputs, kernelMs));
  return outputs;
}

Status Executable::runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                           std::vector<double>* kernelMs) const {
  const Function& f = impl_->program->function();
  if (inputs.size() != f.numParameters())
    return Status::error("expected " + std::to_string(f.numParameters()) + " inputs, got " +
                         std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type() == f.parameter(i)->type()) continue;
    if (!impl_->guards.empty()) return runOther(inputs, outputs, kernelMs);
    return Status::error("input " + std::to_string(i) + " ('" + f.parameter(i)->name() +
                         "'): expected " + f.parameter(i)->type().str() + ", got " +
                         inputs[i].type().str());
  }
  return runHere(inputs, outputs, kernelMs);
}

bool Executable::ofCompiledTypes(std::span<const Tensor> inputs) const {
  const Function& f = impl_->program->function();
  if (inputs.size() != f.numParameters()) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].type() != f.parameter(i)->type()) return false;
  return true;
}

Status Executable::runAgain(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* kernelMs, const std::set<int>& again,
                            HotTimes* hot) const {
  if (!ofCompiledTypes(inputs) || !impl_->dynamic.empty()) {
    if (hot) *hot = {};
    return runInto(inputs, outputs, kernelMs);
  }
  return impl_->program->runAgain(inputs, outputs, kernelMs, again, hot);
}

Status Executable::runHere(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                           std::vector<double>* kernelMs) const {
  KILN_RETURN_IF_ERROR(impl_->program->runInto(inputs, outputs, kernelMs));
  if (impl_->dynamic.empty()) return Status::ok();
  return trimDynamicOutputs(impl_->dynamic, impl_->outputNames.size(), outputs);
}

StatusOr<double> Executable::runTimed(std::span<const Tensor> inputs,
                                      std::vector<Tensor>& outputs) const {
  if (!ofCompiledTypes(inputs)) {
    KILN_RETURN_IF_ERROR(runInto(inputs, outputs));
    return -1.0;
  }
  KILN_ASSIGN_OR_RETURN(double ms, impl_->program->runTimed(inputs, outputs));
  if (!impl_->dynamic.empty())
    KILN_RETURN_IF_ERROR(trimDynamicOutputs(impl_->dynamic, impl_->outputNames.size(), outputs));
  return ms;
}

// Inputs whose types differ from the compiled ones: through the guards to the specialisation
// for their sizes.
Status Executable::runOther(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* kernelMs) const {
  std::vector<TensorType> have;
  for (const Tensor& t : inputs) have.push_back(t.type());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> other, specializationFor(have));
  // Sizes within the ranges the program was compiled over run here.
  if (other.get() == this) return runHere(inputs, outputs, kernelMs);
  return other->runInto(inputs, outputs, kernelMs);
}

Status Executable::runOnDevice(std::span<const DeviceTensor> inputs,
                               std::span<const DeviceTensor> outputs, uintptr_t stream) const {
  const Function& f = impl_->program->function();
  if (!impl_->dynamic.empty())
    return Status::error("a model with run-time output sizes runs on host tensors only");
  if (inputs.size() != f.numParameters() || outputs.size() != f.outputs().size())
    return Status::error("expected " + std::to_string(f.numParameters()) + " inputs and " +
                         std::to_string(f.outputs().size()) + " outputs, got " +
                         std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  std::vector<TensorType> have;
  bool compiled = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    have.push_back(inputs[i].type);
    if (inputs[i].type == f.parameter(i)->type()) continue;
    compiled = false;
    if (impl_->guards.empty())
      return Status::error("input " + std::to_string(i) + " ('" + f.parameter(i)->name() +
                           "'): expected " + f.parameter(i)->type().str() + ", got " +
                           inputs[i].type.str());
  }
  if (!compiled) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Executable> other, specializationFor(have));
    if (other.get() == this)
      return Status::error("a program compiled over ranges of sizes runs on host tensors only");
    return other->runOnDevice(inputs, outputs, stream);
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    if (outputs[o].type != f.outputs()[o]->type())
      return Status::error("output " + std::to_string(o) + " ('" + impl_->outputNames[o] +
                           "'): expected " + f.outputs()[o]->type().str() + ", got " +
                           outputs[o].type.str());
  return impl_->program->runOnDevice(inputs, outputs, stream);
}

StatusOr<std::shared_ptr<const Executable>>
Executable::specializationFor(const std::vector<TensorType>& have) const {
  const Impl& m = *impl_;
  const Function& f = m.program->function();
  bool compiled = have.size() == f.numParameters();
  for (size_t i = 0; compiled && i < have.size(); ++i) compiled = have[i] == f.parameter(i)->type();
  if (compiled) return std::shared_ptr<const Executable>(std::shared_ptr<const Executable>(), this);
  if (have.size() != f.numParameters())
    return Status::error("expected " + std::to_string(f.numParameters()) + " inputs, got " +
                         std::to_string(have.size()));
  std::vector<std::string> names;
  for (size_t i = 0; i < f.numParameters(); ++i) names.push_back(f.parameter(i)->name());
  KILN_ASSIGN_OR_RETURN(SymbolBindings sizes, bindGuards(m.guards, parameterTypes(f), names, have));
  std::string changes = describeChanges(m.guards, sizes);
  // Sizes within the ranges the program was compiled over run on it, or with pow2 buckets on
  // their bucket's compile (when it can compile: else on it too).
  if (changes.empty() && m.guards.ranged()) {
    auto [lows, which] = bucketsOf(m.guards, sizes);
    if (!lows.empty() && m.options.recompile && m.source.load)
      return specialization(lows, which, /*bucket=*/true);
    if (!lows.empty() && m.guards.eachSize())
      return Status::error(
          "a run for " + which + " needs its own compile, and " +
          (m.options.recompile ? "nothing reads the source here" : "recompiling is off"));
    return std::shared_ptr<const Executable>(std::shared_ptr<const Executable>(), this);
  }
  if (changes.empty())  // not expected: bindGuards refuses every other difference
    return Status::error("inputs of other types than compiled whose symbolic sizes are the same");
  if (!m.options.recompile || !m.source.load) {
    // The first guarded dim that changed, for the message.
    for (const DimGuard& g : m.guards.dims) {
      auto [input, dim] = g.checks.front();
      int64_t size = sizes.at(g.symbol);
      if (size == g.value || g.covers(size)) continue;
      std::string where = "input " + std::to_string(input) + " ('" + names[input] + "') dim " +
                          std::to_string(dim) + ": " + g.symbol + " is " + std::to_string(size) +
                          ", but ";
      std::string what = m.source.name.empty() ? "the executable" : m.source.name;
      std::string why =
          !m.options.recompile
              ? "recompiling is off"
              : "it cannot compile again: " +
                    (m.source.path.empty() ? std::string("its source is not known")
                                           : "nothing reads its source " + m.source.path + " here");
      std::string compiled = " was compiled " + g.compiledFor();
      return Status::error(where + what + compiled + ", and " + why);
    }
  }
  return specialization(sizes, changes);
}

StatusOr<std::shared_ptr<const Executable>> Executable::specialization(const SymbolBindings& sizes,
                                                                       const std::string& changes,
                                                                       bool bucket) const {
  const Impl& m = *impl_;
  auto& kept = bucket ? m.buckets : m.kept;
  std::shared_future<Impl::Built> ready;
  std::promise<Impl::Built> promise;
  bool compileHere = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = kept.find(sizes);
    if (it == kept.end()) {
      // The least recently used one goes when the map is full (one being compiled stays).
      if (kept.size() >= kMaxSpecializations) {
        auto oldest = kept.end();
        for (auto k = kept.begin(); k != kept.end(); ++k) {
          bool done =
              k->second.ready.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
          if (done && (oldest == kept.end() || k->second.lastUse < oldest->second.lastUse))
            oldest = k;
        }
        if (oldest != kept.end()) kept.erase(oldest);
      }
      it = kept.emplace(sizes, Impl::Kept{promise.get_future().share(), 0}).first;
      compileHere = true;
    }
    it->second.lastUse = ++m.uses;
    ready = it->second.ready;
  }
  if (compileHere) {
    std::fputs(((bucket ? "kiln: compiling " : "kiln: recompiling ") +
                (m.source.name.empty() ? std::string("module") : m.source.name) +
                (bucket ? " for " : ": ") + changes + "\n")
                   .c_str(),
               stderr);
    Impl::Built built;
    try {
      StatusOr<std::unique_ptr<Executable>> exe = bucket ? compileBucket(sizes) : compileFor(sizes);
      if (exe) built.exe = std::move(*exe);
      else built.status = exe.status();
    } catch (const std::exception& e) {
      built.status = Status::error(std::string("recompiling failed: ") + e.what());
    }
    {
      std::lock_guard<std::mutex> lock(m.mu);
      if (!bucket) ++m.recompiles;  // a bucket's compile is within the ranges
      // A failed compile is not kept: the next run of these sizes tries again.
      if (!built.exe) kept.erase(sizes);
    }
    promise.set_value(std::move(built));
  }
  const Impl::Built& built = ready.get();
  if (!built.exe)
    return Status(built.status).prefix((bucket ? "compiling " : "recompiling for ") + changes);
  return built.exe;
}

StatusOr<std::unique_ptr<Executable>>
Executable::compileBucket(const SymbolBindings& buckets) const {
  SymbolBindings sizes;  // the symbols whose bucket holds one size
  SymbolRanges ranges = impl_->options.ranges;
  for (const auto& [symbol, lo] : buckets) {
    SymbolRange b = ranges.at(symbol).bucketOf(lo);
    if (b.lo == b.hi) {
      sizes[symbol] = b.lo;
      ranges.erase(symbol);
    } else {
      ranges[symbol] = b;
    }
  }
  return compileFor(sizes, &ranges);
}

StatusOr<std::unique_ptr<Executable>> Executable::compileFor(const SymbolBindings& sizes,
                                                             const SymbolRanges* ranges) const {
  const Impl& m = *impl_;
  CompileOptions o = m.options;
  if (ranges) o.ranges = *ranges;
  for (const auto& [symbol, size] : sizes) {
    o.dims[symbol] = size;
    o.ranges.erase(symbol);  // outside its range: this compile is for the size
  }
  o.instrumentation = PassManagerOptions{};  // the first compile's dumps stay as they are
  if (o.sourceKey.empty()) o.sourceKey = m.source.key;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> hit, fromCache(o));
  if (hit) return hit;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, m.source.load());
  if (!module->entry()) return Status::error("the module has no function");
  std::vector<TensorType> sourceTypes = parameterTypes(*module->entry());
  // The specialisation has no source of its own: only this executable's guards dispatch to it.
  return build(std::move(module), o, sourceTypes, ModuleSource{});
}

const Function& Executable::function() const { return impl_->program->function(); }
const Guards& Executable::guards() const { return impl_->guards; }
const ModuleSource& Executable::source() const { return impl_->source; }
void Executable::setSource(ModuleSource source) { impl_->source = std::move(source); }

std::vector<TensorType> Executable::inputTypes() const {
  std::vector<TensorType> types = parameterTypes(function());
  for (const DimGuard& g : impl_->guards.dims)
    for (auto [input, dim] : g.checks) {
      std::vector<Dim> dims = types[input].dims();
      dims[dim] = Dim::symbol(g.symbol);
      types[input] = TensorType(types[input].dtype(), dims);
    }
  return types;
}

std::vector<SymbolBindings> Executable::specializations() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<SymbolBindings> sizes;
  for (const auto& [s, k] : impl_->kept) sizes.push_back(s);
  return sizes;
}

int Executable::recompiles() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->recompiles;
}
const std::vector<std::string>& Executable::outputNames() const { return impl_->outputNames; }
const std::vector<DynamicDim>& Executable::runTimeSizes() const { return impl_->dynamic; }

std::vector<TensorType> Executable::outputTypes() const {
  const std::vector<Value*>& outs = function().outputs();
  std::vector<TensorType> types;
  for (size_t i = 0; i < impl_->outputNames.size() && i < outs.size(); ++i)
    types.push_back(outs[i]->type());
  return types;
}
int64_t Executable::droppedConstantBytes() const { return impl_->program->droppedConstantBytes(); }
const fusion::FusionPlan& Executable::plan() const { return impl_->program->plan(); }
const std::vector<kernel::Kernel>& Executable::kernels() const { return impl_->program->kernels(); }
const BufferPlan& Executable::buffers() const { return impl_->program->buffers(); }
const CompileTimes& Executable::times() const { return impl_->program->times(); }
int Executable::threads() const { return impl_->program->threads(); }
const std::string& Executable::passTimings() const { return impl_->passTimings; }
std::string Executable::libraryCallDetails() const { return impl_->program->libraryCallDetails(); }
std::string Executable::libraryCalls() const { return impl_->program->libraryCalls(); }
std::string Executable::concurrencyDetails() const { return impl_->program->concurrencyDetails(); }
std::string Executable::uncapturedReason() const { return impl_->program->uncapturedReason(); }
std::vector<KernelRange> Executable::concurrentRanges() const {
  return impl_->program->concurrentRanges();
}
StatusOr<std::optional<DeviceCeilings>>
Executable::measureDevice(int repeat, const std::vector<int64_t>& copyBytes) const {
  return impl_->program->measureDevice(repeat, copyBytes);
}
std::string Executable::hostCpu() const { return impl_->target->describeMachine(); }
const Target& Executable::target() const { return *impl_->target; }
int Executable::uniqueKernels() const { return impl_->program->uniqueKernels(); }
const std::string& Executable::cacheReport() const { return impl_->cacheReport; }
const CompileOptions& Executable::compileOptions() const { return impl_->options; }
const std::string& Executable::loadedFrom() const { return impl_->loadedFrom; }

std::string defaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return (std::filesystem::path(xdg) / "kiln").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (std::filesystem::path(home) / ".cache" / "kiln").string();
  return "";
}

}  // namespace kiln::runtime
