// Targets: what compiles a module into code for one kind of machine, and the Program it makes.
// The compile driver (src/compiler/compile.h) runs the steps every target shares and asks the
// target for the rest.
//
// The runtime (Executable, the compile cache, artifacts, the APIs) knows targets only through
// this interface and finds them by name in a registry; it names no kernel, library or
// instruction set. Each target is an optional component of the build: a build without LLVM 19
// and oneDNN has no `cpu` target, and asking for one says why (findTarget). Binaries register
// the targets they were built with (registerBuiltinTargets, src/target/builtin_targets.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/fusion.h"
#include "ir/ir.h"
#include "ir/tensor.h"
#include "ir/text/text.h"
#include "kernel/kernel_ir.h"
#include "passes/layout_assignment.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"
#include "runtime/artifact.h"
#include "runtime/buffer_plan.h"
#include "support/mapped_file.h"
#include "support/status.h"

namespace kiln::runtime {

struct CompileOptions {
  std::string backend = "cpu";  // the target's name: "cpu" (LLVM-generated kernels and oneDNN)
  int threads = 0;              // <= 0: the hardware's thread count
  int optLevel = 1;             // 1: the default graph pipeline first; 0: none
  bool fuse = true;             // false: one kernel per op
  bool postOps = true;          // false: no library post-ops (fusion::EpiloguePolicy)
  bool reassociate = true;      // false: float sums in the interpreter's order (schedule.h)
  // Threads of code generation (LLVM, library kernels' creation); <= 0: the hardware's thread
  // count. Apart from `threads`: compiling uses the machine's cores whatever a run may use.
  // Does not change what the program computes (not part of cache keys).
  int compileThreads = 0;
  // Independent kernels (the branches of an inception module) run at once, one thread each,
  // where the target's concurrency plan finds it pays (runtime/concurrency.h). Does not change
  // what the program computes (not part of cache keys).
  bool concurrentKernels = true;
  // false: library calls (matrix products, convolutions) run as Kiln's own loops instead of a
  // library's kernels (kernel/expand_calls.h; the numerics of the interpreter).
  bool libraryCalls = true;
  // Free the data of constants that only library kernels read, each holding its own reordered
  // copy (convolution weights in a library's blocked layout, matrix weights with padded rows):
  // about half the weights' memory. Each is freed as soon as its last reader is prepared, before
  // code generation. Does not change the generated code or the artifact, which stores such
  // constants only in their readers' layouts either way.
  bool dropHeldConstants = false;
  SymbolBindings dims;  // sizes of symbolic dimensions (every symbol must be bound)
  // Symbolic dims kept symbolic, each over its range: their kernels read the sizes when they run
  // (kernel IR's Symbol). A symbol in neither `dims` nor `ranges` is an error.
  SymbolRanges ranges;
  // A run whose inputs differ from `dims` in a symbolic dim of the source compiles again for
  // their sizes (runtime/guards.h, Executable::run); false: that is an error instead. Does not
  // shape the code (not part of cache keys or artifacts).
  bool recompile = true;
  // The cuda target's GPU architecture ("sm_90"); empty: the GPU's, or sm_90 without one.
  std::string cudaArch;
  // "f32" (the default), "tf32" (f32 values, matrix products on TF32 tensor cores where the
  // target has them: cuda), "f16" or "bf16" (values computed and stored in the low type, sums and
  // statistics in f32: passes/lower_precision.h). The signature stays f32.
  std::string precision = "f32";
  // The pass manager's instrumentation (--verify-each, --dump-dir, --time-passes,
  // --print-after). With a dump directory, the target writes its kernel IR (kernels.txt) and
  // code (the CPU: kernels.ll) there too.
  PassManagerOptions instrumentation;
  // The persistent compile cache (empty: none). An entry is keyed by a fingerprint of
  // sourceKey (what identifies the model: compileOnnxFile uses a hash of the file's bytes; no
  // key, no cache), the options above that shape the code, the target and its machine, and
  // Kiln's version; it holds the artifact (serialize()). A corrupted or mismatched entry is
  // reported (cacheReport()) and rebuilt. Writes are atomic (a temporary file, then rename).
  std::string cacheDir;
  std::string sourceKey;
  // The cache's size limit: after an entry is written, the least recently used entries (a hit
  // makes an entry the most recent) are deleted until the entries fit in it. The entry just
  // written is kept even when it alone is larger.
  uint64_t cacheLimitBytes = uint64_t(4) << 30;
};

// Wall time of each compile phase, in milliseconds.
struct CompileTimes {
  double passes = 0, fusion = 0, lowering = 0, codegen = 0, buffers = 0;
  double cacheLoad = 0;  // a compile-cache hit: the whole load (the phases above are in it)
  double total() const {
    return cacheLoad > 0 ? cacheLoad : passes + fusion + lowering + codegen + buffers;
  }
};

// The sections of an artifact being written: small texts owned here, large data (weights, code)
// as views of where it lies.
struct ArtifactParts {
  std::deque<std::string> text;  // stable addresses
  Blob blob;
  SectionPieces sections;

  void add(const std::string& name, std::string content) {
    text.push_back(std::move(content));
    sections[name].push_back(text.back());
  }
};

// A function compiled by a target: its kernels, their code and its buffer plan. run is
// thread-safe: each call has its own arena and outputs.
// A tensor in a device's memory that the caller owns (a DLPack tensor on a GPU): the address of
// its first element, dense and row-major.
struct DeviceTensor {
  uintptr_t data = 0;
  TensorType type;
};

// What `kiln bench --roofline` compares a device's kernels with, measured now on the device.
struct DeviceCeilings {
  double copyGBs = 0;                   // a device-to-device copy (bytes read + written), best of 5
  std::vector<double> aloneMs;          // per kernel: its library calls run alone (-1: it has none)
  std::vector<double> aloneEpilogueMs;  // the same with their epilogues (fused bias, residual)
  std::vector<double> copyMs;           // per kernel: a copy that moves its bytes (-1: none asked)
  // per kernel: its calls alone with their epilogues, each run on another copy of its operands
  // (more bytes than the L2 holds), so read from memory as a program's calls read their weights
  std::vector<double> aloneColdMs;
  // per kernel: its library calls (their epilogues included) in the last run's memory, without
  // the kernel's other launches (-1: it has none; empty before a first run)
  std::vector<double> callsMs;
};

// Kernel times of runs again at once (Program::runAgain): with the run's threads, and on one.
struct HotTimes {
  std::vector<double> ms, oneThreadMs;
};

class Program {
 public:
  virtual ~Program() = default;
  // Inputs of the types compiled for (checked by the Executable); outputs of the right types
  // are written in place, others replaced. kernelMs: each kernel's wall time, in plan order.
  virtual Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                         std::vector<double>* kernelMs) const = 0;
  // One run as runInto in which each kernel of `again` whose results do not overlap its operands
  // (a second run computes the same values) runs a second time at once, the kernel with its data
  // hot in the caches of the threads that ran it, and a third time at once on one thread where
  // the run has more: hot->ms[i] and hot->oneThreadMs[i] are their times (-1 where it did not
  // run). A target that cannot leaves both empty.
  virtual Status runAgain(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                          std::vector<double>* kernelMs, const std::set<int>& again,
                          HotTimes* hot) const {
    (void)again;
    if (hot) *hot = {};
    return runInto(inputs, outputs, kernelMs);
  }
  // One run as runInto, and the time its launches took by the device's own clock (the copies
  // of inputs and outputs excluded); -1 where the target has no device apart from the host.
  virtual StatusOr<double> runTimed(std::span<const Tensor> inputs,
                                    std::vector<Tensor>& outputs) const {
    KILN_RETURN_IF_ERROR(runInto(inputs, outputs, nullptr));
    return -1.0;
  }
  // One run on tensors in the device's memory, ordered after the work issued so far on the
  // caller's `stream` (a CUstream; 0: the default stream) and before the work issued on it
  // later, without waiting on the host: nothing crosses the bus. Types are checked by the
  // Executable. A target whose programs run on the host has no such run.
  virtual Status runOnDevice(std::span<const DeviceTensor> inputs,
                             std::span<const DeviceTensor> outputs, uintptr_t stream) const {
    (void)inputs, (void)outputs, (void)stream;
    return Status::error("this target runs on the host: its inputs and outputs are host tensors");
  }
  virtual const Function& function() const = 0;
  virtual const fusion::FusionPlan& plan() const = 0;
  virtual const std::vector<kernel::Kernel>& kernels() const = 0;
  virtual const BufferPlan& buffers() const = 0;
  virtual const CompileTimes& times() const = 0;
  virtual CompileTimes& times() = 0;
  virtual int threads() const = 0;
  virtual int uniqueKernels() const = 0;
  virtual int64_t droppedConstantBytes() const = 0;    // -1: not asked
  virtual std::string libraryCalls() const = 0;        // one line: what runs the library calls
  virtual std::string libraryCallDetails() const = 0;  // a line per call
  // Its sections of an artifact: the module, its constants, the code; everything Target::load
  // needs besides the "meta" and "outputs" sections the Executable writes.
  virtual void artifactParts(ArtifactParts& parts) const = 0;
  // The buffer plan the driver makes for its kernels (compiler::planProgramBuffers), before the
  // first run.
  virtual void setBuffers(BufferPlan buffers) = 0;
  // The alignment of its arena's buffers (bytes): what its kernels and libraries assume.
  virtual int64_t bufferAlignment() const { return kBufferAlignment; }
  // Kernels its runs may execute at once (runtime/concurrency.h): the buffer plan keeps their
  // buffers apart.
  virtual std::vector<KernelRange> concurrentRanges() const { return {}; }
  // What runs at once and why, for `kiln explain` ("" when nothing does).
  virtual std::string concurrencyDetails() const { return ""; }
  // Why its runs issue their launches one by one where a device would capture them into a
  // graph ("" when they are captured, or on the host).
  virtual std::string uncapturedReason() const { return ""; }
  // Its device's ceilings, measured now; nullopt for a target that runs on the host.
  // copyBytes: per kernel, the bytes (read + written) a copy of the same size moves (0: none).
  virtual StatusOr<std::optional<DeviceCeilings>>
  measureDevice(int repeat, const std::vector<int64_t>& copyBytes) const {
    (void)repeat, (void)copyBytes;
    return std::optional<DeviceCeilings>();
  }
};

// Outputs of f's types for a run to write: `outputs` as they are when they fit and no one else
// holds them (a caller reusing its tensors run after run), else new ones.
// `sizes`: the run's sizes of the symbolic dims f keeps (a program compiled over ranges).
void prepareOutputs(const Function& f, std::vector<Tensor>& outputs,
                    const SymbolBindings& sizes = {});
// The sizes of the symbolic dims of f's parameters in `inputs` (none when f is static), each
// checked against its range in `ranges` (a program's buffers are sized for the range's top):
// an error names the input, the dim, the size and the range.
StatusOr<SymbolBindings> runSizes(const Function& f, std::span<const Tensor> inputs,
                                  const SymbolRanges& ranges);
// The same from the inputs' shapes (a run on device tensors).
StatusOr<SymbolBindings> runSizes(const Function& f,
                                  const std::vector<std::vector<int64_t>>& shapes,
                                  const SymbolRanges& ranges);

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;  // "cpu"
  // The machine the code is for ("znver5+avx512f..."): part of cache keys, written in
  // artifacts and checked when one is loaded. describeMachine: the same for people.
  virtual std::string machine() const = 0;
  virtual std::string describeMachine() const = 0;
  // Its own graph passes, after the default pipeline the driver runs (at -O0 only what its
  // lowering needs); they may depend on the run's threads (a cache entry is per thread count).
  virtual Status graphPasses(Module& module, PassManager& pm,
                             const CompileOptions& options) const = 0;
  // The layouts its kernels prefer, which the default pipeline's layout assignment gives
  // convolutions (the CPU's NHWC unless a target says otherwise).
  virtual LayoutTarget layoutTarget(const CompileOptions&) const { return LayoutTarget::cpu(); }
  // Whether its kernels and library calls store a concatenation's operands into their slices of
  // its buffer, strided (fusion/concat_views.h); else each concatenate is computed by a kernel.
  virtual bool concatenatesInPlace() const { return false; }
  // Whether a reduction's outputs of its input's shape are stored from its reduced loops (each
  // element once, computed once) rather than in a nest of their own (fusion::FusionOptions).
  virtual bool storesAlongsideReductions() const { return false; }
  // Sort and top_k rows longer than these stay library calls (fusion::FusionOptions::sortRows).
  virtual fusion::SortRowLimits sortRowLimits() const { return {}; }
  // Whether it runs the graph itself (the interpreter), so that its kernels only explain the
  // plan: it then runs graphs that have no kernel IR (strings), given no kernels.
  virtual bool runsGraph() const { return false; }
  // What its library calls apply as they write their results: the planner decides each call's
  // post-ops from it (fusion/epilogue.h).
  virtual fusion::EpiloguePolicy epiloguePolicy() const = 0;
  // Its own kernels for groups of library calls, which the planner forms as custom kernels
  // (fusion/custom_fusion.h; the CPU's inverted-residual block); none by default.
  virtual std::vector<fusion::CustomFusion> customFusions(const CompileOptions&) const {
    return {};
  }
  // Its schedule passes (kernel/schedule.h) over the lowered kernels, in place; the driver
  // verifies the result.
  virtual Status schedule(std::vector<kernel::Kernel>& kernels,
                          const CompileOptions& options) const = 0;
  // The program of the kernels the driver lowered the module to (src/compiler/compile.h): its
  // code and library calls. The driver plans its buffers next.
  virtual StatusOr<std::unique_ptr<Program>> build(std::unique_ptr<Module> module,
                                                   fusion::FusionPlan plan,
                                                   std::vector<kernel::Kernel> kernels,
                                                   const CompileOptions& options) const = 0;
  // The program of an artifact (its sections decoded; `mapping`, when given, the mapped file
  // they lie in, which the program may use in place). `options` are the artifact's.
  virtual StatusOr<std::unique_ptr<Program>>
  load(const DecodedArtifact& artifact, const std::string& source, const CompileOptions& options,
       std::shared_ptr<const MappedFile> mapping) const = 0;
  // Sections of its artifacts that are weights: checked on another thread while a mapped
  // artifact loads.
  virtual bool isWeightSection(const std::string& name) const = 0;
};

// Makes `target` findable by its name (a second registration of a name replaces nothing).
void registerTarget(std::unique_ptr<Target> target);
// The target of that name, or an error that says which targets this build has and, for a known
// target it lacks, why.
StatusOr<const Target*> findTarget(std::string_view name);
// The names of the registered targets, sorted.
std::vector<std::string> targetNames();

// Registers the targets this build has (src/target/builtin_targets.cpp); idempotent. Every
// binary that compiles calls it (the tools, the APIs, the tests).
void registerBuiltinTargets();

}  // namespace kiln::runtime
