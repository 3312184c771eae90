// An Executable: a function compiled for concrete shapes by a target (runtime/target.h), ready to
// run many times.
//
// compile() finds the target options.backend names, runs its graph passes (the default pipeline
// unless optLevel 0) and has it build the program: fusion planning, lowering to kernel IR, code
// generation and buffer assignment. Around that it keeps the compile cache and the artifact's
// container. run() is thread-safe: each call has its own arena and outputs.
//
// An executable remembers which of its input dims the source left symbolic (its guards,
// runtime/guards.h) and how to get the source again (a ModuleSource). A run whose inputs differ
// from the compiled sizes in such a dim compiles the source again for their sizes (through the
// compile cache) and keeps that specialisation, so that switching back does not compile again;
// it logs one line to stderr ("kiln: recompiling model.onnx: dim N=12 (compiled for N=8)").
// With CompileOptions::recompile false that is an error naming the dim and both sizes instead.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "passes/expose_dynamic_sizes.h"
#include "runtime/guards.h"
#include "runtime/target.h"

namespace kiln::runtime {

// Where an executable's source module comes from again, to compile it for other sizes of its
// guarded dims.
struct ModuleSource {
  std::string name;  // for messages: "model.onnx"
  // The file it was read from, which artifacts record (all empty for none): its format ("onnx",
  // "kir"), its absolute path and its sourceKey (source_key.h) when known.
  std::string format, path, key;
  // The module as the frontend first gave it (before the passes); null: it cannot be had again.
  std::function<StatusOr<std::unique_ptr<Module>>()> load;
};

// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (empty when neither is set).
std::string defaultCacheDir();

class Executable {
 public:
  // `source` gives the module again for recompiles; without one, a module with symbolic input
  // dims is kept as a copy (printed with its constants into a blob) when options.recompile is
  // set. A ModuleSource whose load is null: this executable does not recompile.
  static StatusOr<std::unique_ptr<Executable>>
  compile(std::unique_ptr<Module> module, const CompileOptions& options,
          std::optional<ModuleSource> source = std::nullopt);
  // The executable the compile cache holds for `options` (its cacheDir and sourceKey, and the
  // options that shape the code), or null when it holds none that loads: compile() then builds
  // it, reporting a rejected entry. Lets a frontend skip importing a model whose compile is
  // cached.
  static StatusOr<std::unique_ptr<Executable>> fromCache(const CompileOptions& options);
  // An artifact (a .kiln file's bytes, from serialize()): the module after the passes, its
  // constants and the object code of its kernels. Loading parses the module, re-derives the
  // fusion plan and kernel IR (checked against the artifact's hash of them), links the object
  // code and creates the library kernels: no passes and no LLVM compilation. `source` names it
  // in errors. A corrupted artifact, or one from another Kiln version or for another CPU, is
  // an error that says so. options.threads applies; the code-shaping options come from the
  // artifact. The weights the artifact stores in library kernels' layouts are copied (the
  // kernels use them without reordering).
  static StatusOr<std::unique_ptr<Executable>>
  load(std::string_view bytes, const std::string& source, const CompileOptions& options = {});
  // The same from a mapped artifact, whose bytes the executable uses in place: constants borrow
  // them, and library kernels use the weights the artifact holds in their layouts (packed)
  // without reordering them. The file stays mapped while the executable lives; its weights are
  // checksummed on a second thread while the load goes on.
  static StatusOr<std::unique_ptr<Executable>> load(MappedFile file, const std::string& source,
                                                    const CompileOptions& options = {});
  // The artifact: the same module and options give the same bytes on the same machine.
  std::string serialize() const;
  // The artifact written to `path` (atomically, without a copy of it in memory); its size.
  StatusOr<uint64_t> writeArtifact(const std::string& path) const;
  ~Executable();

  // One tensor per parameter, in order, of the types the executable was compiled for, or of
  // other sizes in its guarded dims (see the top of this file). Returns one tensor per function
  // output. Thread-safe, recompiles included: a size being compiled by one run is waited for
  // by others, and runs of sizes compiled already go on meanwhile.
  // kernelMs (optional): the wall time of each kernel of this run, in plan order.
  StatusOr<std::vector<Tensor>> run(std::span<const Tensor> inputs,
                                    std::vector<double>* kernelMs = nullptr) const;
  // Same, into `outputs`: tensors of the right types from an earlier run are written in place
  // (no allocation, no page faults on fresh memory); otherwise they are replaced.
  Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs = nullptr) const;
  // Same, with the kernels of `again` run again at once (and once more on one thread) where that
  // computes the same values (Program::runAgain): kiln bench --roofline's hot times of a kernel.
  // Inputs of other sizes than compiled run as runInto and leave `hot` empty.
  Status runAgain(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                  std::vector<double>* kernelMs, const std::set<int>& again, HotTimes* hot) const;
  // Same, returning the device time of the run's launches (Program::runTimed; a GPU's events),
  // -1 for targets without one and for inputs that need another specialisation.
  StatusOr<double> runTimed(std::span<const Tensor> inputs, std::vector<Tensor>& outputs) const;
  // A run on tensors in the device's memory (Program::runOnDevice): inputs and outputs of the
  // types run() takes and returns, ordered on the caller's stream; the host does not wait. Other
  // sizes in guarded dims recompile as for run(). A model with run-time output sizes, or a
  // target that runs on the host, is an error.
  Status runOnDevice(std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                     uintptr_t stream) const;
  // The executable that runs inputs of types `have`: this one for the compiled types, else the
  // specialisation for their sizes in guarded dims (compiled or loaded now if need be; shared
  // with the runs), or why there is none. Its function() gives the outputs' types, which a
  // caller allocating device outputs needs.
  StatusOr<std::shared_ptr<const Executable>>
  specializationFor(const std::vector<TensorType>& have) const;

  // The function as first compiled (the sizes of options.dims); specialisations for other sizes
  // are not reported here. With run-time sizes (runTimeSizes()) its outputs are not what run()
  // returns: the sized ones have their bound, and one i64[] per size follows them; outputTypes()
  // describes run()'s outputs.
  const Function& function() const;
  // The input dims the source left symbolic, with the sizes function() has for them.
  const Guards& guards() const;
  // The inputs' types run() accepts: function()'s, with each guarded dim symbolic.
  std::vector<TensorType> inputTypes() const;
  // How it compiles again; set by the frontend for an executable from an artifact or the compile
  // cache (whose recorded source, if any, has a path but no load). Call before any run.
  const ModuleSource& source() const;
  void setSource(ModuleSource source);
  // The sizes of the guarded symbols of each specialisation kept now besides function()'s, and
  // how many compiles (or compile-cache loads) runs have made.
  std::vector<SymbolBindings> specializations() const;
  int recompiles() const;
  // The outputs' names as the source program named them ("" for an unnamed one), which the
  // passes may have changed in function() (an output replaced by an equal value).
  const std::vector<std::string>& outputNames() const;
  // The types of the outputs run() returns (one per outputNames() entry): function()'s, where
  // a dim of run-time size has its bound, the most entries run() can give along it.
  std::vector<TensorType> outputTypes() const;
  // The output dims whose size is known only at run time (ONNX NonZero, Compress, Unique,
  // NonMaxSuppression): run() cuts them to that size; empty for most models.
  const std::vector<DynamicDim>& runTimeSizes() const;
  // The bytes of constant data freed by CompileOptions::dropHeldConstants (-1 when not asked).
  int64_t droppedConstantBytes() const;
  const fusion::FusionPlan& plan() const;
  const std::vector<kernel::Kernel>& kernels() const;
  const BufferPlan& buffers() const;
  const CompileTimes& times() const;
  int threads() const;
  // What runs the library calls: "oneDNN: 20 convolution, 1 dot_general; reference: 1 gather".
  std::string libraryCalls() const;
  // A line per library call: its kernel, op and implementation ("k1_contraction: convolution:
  // oneDNN convolution (..., post-ops add+clamp)"), or why the reference kernel runs it.
  std::string libraryCallDetails() const;
  // The kernels that run at once and why (Program::concurrencyDetails; "" when none do).
  std::string concurrencyDetails() const;
  // Why runs issue their launches one by one (Program::uncapturedReason; "" when captured).
  std::string uncapturedReason() const;
  // The ranges of kernels that run at once, each kernel on one thread (Program::concurrentRanges).
  std::vector<KernelRange> concurrentRanges() const;
  // The per-pass timing table when instrumentation.timePasses was set, else "".
  const std::string& passTimings() const;
  // The machine the code is for, for people ("znver5 (+avx512f ...)").
  std::string hostCpu() const;
  const Target& target() const;
  // The device's ceilings for `kiln bench --roofline` (Program::measureDevice).
  StatusOr<std::optional<DeviceCeilings>>
  measureDevice(int repeat, const std::vector<int64_t>& copyBytes) const;
  // The options its code was compiled with (an artifact's own, with the caller's run options).
  const CompileOptions& compileOptions() const;
  // How many distinct kernels were compiled (kernels identical up to names share code).
  int uniqueKernels() const;
  // What the compile cache did: "hit: PATH", "miss, written: PATH", "entry rejected (why),
  // rebuilt: PATH"; "" without a cache.
  const std::string& cacheReport() const;
  // The artifact this executable was loaded from ("" when compiled here).
  const std::string& loadedFrom() const;

 private:
  struct Impl;
  // compile() without the recompile source: the cache, the driver, the cache entry written
  // (with the guards of `sourceTypes`, the parameters' types before the passes, and the file of
  // `source`).
  static StatusOr<std::unique_ptr<Executable>> build(std::unique_ptr<Module> module,
                                                     const CompileOptions& options,
                                                     const std::vector<TensorType>& sourceTypes,
                                                     const ModuleSource& source);
  // Where `why` (Status::needsSizes) refuses the compile over options.ranges, or where they ask
  // for it (SymbolRange::each; `why` ok): the executable of their low ends, whose ranges compile
  // each size on its first run, saying why on stderr.
  static StatusOr<std::unique_ptr<Executable>>
  compileEach(const CompileOptions& options, const std::vector<TensorType>& sourceTypes,
              const ModuleSource& source, const Status& why);
  // The executable for inputs of `sizes` (a kept specialisation, or one compiled now), or with
  // `bucket` the one of the pow2 buckets that `sizes` holds the lower ends of.
  StatusOr<std::shared_ptr<const Executable>> specialization(const SymbolBindings& sizes,
                                                             const std::string& changes,
                                                             bool bucket = false) const;
  // The compile for `sizes` (and with `ranges`, over them instead of the options' ranges).
  StatusOr<std::unique_ptr<Executable>> compileFor(const SymbolBindings& sizes,
                                                   const SymbolRanges* ranges = nullptr) const;
  // The compile over the pow2 buckets whose lower ends `buckets` gives (a bucket of one size
  // specialised).
  StatusOr<std::unique_ptr<Executable>> compileBucket(const SymbolBindings& buckets) const;
  // Whether `inputs` are as many as the parameters and of their compiled types.
  bool ofCompiledTypes(std::span<const Tensor> inputs) const;
  // The program itself on inputs it takes (its types, or sizes within its ranges).
  Status runHere(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs) const;
  Status runOther(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                  std::vector<double>* kernelMs) const;
  static std::string cacheEntryPath(const CompileOptions& options, const Target& target);
  static int evictCacheEntries(const std::string& dir, uint64_t limit, const std::string& keep);
  static StatusOr<std::unique_ptr<Executable>> loadCacheEntry(const std::string& path,
                                                              const CompileOptions& options);
  static StatusOr<std::unique_ptr<Executable>> load(std::string_view bytes,
                                                    const std::string& source,
                                                    const CompileOptions& options,
                                                    std::shared_ptr<const MappedFile> mapping);
  void artifactParts(ArtifactParts& parts) const;
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
