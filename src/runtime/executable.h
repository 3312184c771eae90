// An Executable: a function compiled for concrete shapes, ready to run many times.
//
// compile() runs the whole stack: the default pipeline (unless optLevel 0), fusion planning,
// lowering to kernel IR, code generation for the backend, and buffer assignment. run() is
// thread-safe: each call has its own arena and outputs, and kernels share only read-only state.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/fusion.h"
#include "ir/ir.h"
#include "ir/tensor.h"
#include "kernel/kernel_ir.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"
#include "runtime/buffer_plan.h"
#include "support/mapped_file.h"
#include "support/status.h"

namespace kiln::codegen::cpu {
struct PackedWeights;
}

namespace kiln::runtime {

struct CompileOptions {
  std::string backend = "cpu";  // "cpu": LLVM-generated kernels on Kiln's thread pool
  int threads = 0;              // <= 0: the hardware's thread count
  int optLevel = 1;             // 1: the default graph pipeline first; 0: none
  bool fuse = true;             // false: one kernel per op
  bool postOps = true;          // false: no library post-ops (kernel::LowerOptions::postOps)
  bool reassociate = true;      // false: float sums in the interpreter's order (LowerOptions)
  // Free the data of constants that only library kernels read, each holding its own reordered
  // copy (convolution weights in oneDNN's blocked layout, matrix weights with padded rows):
  // about half the weights' memory. Each is freed as soon as its last reader is prepared, before
  // code generation. Does not change the generated code or the artifact, which stores such
  // constants only in their readers' layouts either way.
  bool dropHeldConstants = false;
  SymbolBindings dims;  // sizes of symbolic dimensions (every symbol must be bound)
  // The pass manager's instrumentation (--verify-each, --dump-dir, --time-passes,
  // --print-after). With a dump directory, the kernel IR (kernels.txt) and the optimised LLVM IR
  // (kernels.ll) are written there too.
  PassManagerOptions instrumentation;
  // The persistent compile cache (empty: none). An entry is keyed by a fingerprint of
  // sourceKey (what identifies the model: compileOnnxFile uses a hash of the file's bytes; no
  // key, no cache), the options above that shape the code, the target CPU and Kiln's version;
  // it holds the artifact (serialize()). A corrupted or mismatched entry is reported
  // (cacheReport()) and rebuilt. Writes are atomic (a temporary file, then rename).
  std::string cacheDir;
  std::string sourceKey;
  // The cache's size limit: after an entry is written, the least recently used entries (a hit
  // makes an entry the most recent) are deleted until the entries fit in it. The entry just
  // written is kept even when it alone is larger.
  uint64_t cacheLimitBytes = uint64_t(4) << 30;
};

// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (empty when neither is set).
std::string defaultCacheDir();

// Wall time of each compile phase, in milliseconds.
struct CompileTimes {
  double passes = 0, fusion = 0, lowering = 0, codegen = 0, buffers = 0;
  double cacheLoad = 0;  // a compile-cache hit: the whole load (the phases above are in it)
  double total() const {
    return cacheLoad > 0 ? cacheLoad : passes + fusion + lowering + codegen + buffers;
  }
};

// The graph passes a CPU compile runs before fusion: the default pipeline (at -O0 only the
// specialisation of `dims`) and split-attention. `kiln explain` runs the same, so that it shows
// the kernels a compile builds.
Status runCpuPasses(Module& module, PassManager& pm, int optLevel, const SymbolBindings& dims);

class Executable {
 public:
  static StatusOr<std::unique_ptr<Executable>> compile(std::unique_ptr<Module> module,
                                                       const CompileOptions& options);
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

  // One tensor per parameter, in order, of the types the executable was compiled for. Returns
  // one tensor per function output.
  // kernelMs (optional): the wall time of each kernel of this run, in plan order.
  StatusOr<std::vector<Tensor>> run(std::span<const Tensor> inputs,
                                    std::vector<double>* kernelMs = nullptr) const;
  // Same, into `outputs`: tensors of the right types from an earlier run are written in place
  // (no allocation, no page faults on fresh memory); otherwise they are replaced.
  Status runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* kernelMs = nullptr) const;

  const Function& function() const;
  // The outputs' names as the source program named them ("" for an unnamed one), which the
  // passes may have changed in function() (an output replaced by an equal value).
  const std::vector<std::string>& outputNames() const;
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
  // The per-pass timing table when instrumentation.timePasses was set, else "".
  const std::string& passTimings() const;
  std::string hostCpu() const;
  // How many distinct kernels were compiled (kernels identical up to names share code).
  int uniqueKernels() const;
  // What the compile cache did: "hit: PATH", "miss, written: PATH", "entry rejected (why),
  // rebuilt: PATH"; "" without a cache.
  const std::string& cacheReport() const;
  // The artifact this executable was loaded from ("" when compiled here).
  const std::string& loadedFrom() const;

 private:
  struct Impl;
  struct ObjectUnit;
  struct ArtifactParts;
  class HeldConstants;
  void artifactParts(ArtifactParts& parts) const;
  static std::string describeCalls(const Impl& impl);
  static std::string cacheEntryPath(const CompileOptions& options);
  static int evictCacheEntries(const std::string& dir, uint64_t limit, const std::string& keep);
  static StatusOr<std::unique_ptr<Executable>> loadCacheEntry(const std::string& path,
                                                              const CompileOptions& options);
  static void storeBlockedValues(Impl& impl, const Function& f);
  static StatusOr<std::unique_ptr<Executable>> load(std::string_view bytes,
                                                    const std::string& source,
                                                    const CompileOptions& options,
                                                    std::shared_ptr<const MappedFile> mapping);
  // Packed weights of an artifact by (kernel, call index in the kernel).
  using PackedByCall = std::map<std::pair<size_t, size_t>, codegen::cpu::PackedWeights>;
  static Status build(Impl& impl, std::unique_ptr<Module> module,
                      const std::vector<ObjectUnit>* objects,
                      const PackedByCall* prepacked = nullptr);
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
