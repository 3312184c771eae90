// An Executable: a function compiled for concrete shapes by a target (runtime/target.h), ready to
// run many times.
//
// compile() finds the target options.backend names, runs its graph passes (the default pipeline
// unless optLevel 0) and has it build the program: fusion planning, lowering to kernel IR, code
// generation and buffer assignment. Around that it keeps the compile cache and the artifact's
// container. run() is thread-safe: each call has its own arena and outputs.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/target.h"

namespace kiln::runtime {

// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (empty when neither is set).
std::string defaultCacheDir();

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
  // The machine the code is for, for people ("znver5 (+avx512f ...)").
  std::string hostCpu() const;
  const Target& target() const;
  // How many distinct kernels were compiled (kernels identical up to names share code).
  int uniqueKernels() const;
  // What the compile cache did: "hit: PATH", "miss, written: PATH", "entry rejected (why),
  // rebuilt: PATH"; "" without a cache.
  const std::string& cacheReport() const;
  // The artifact this executable was loaded from ("" when compiled here).
  const std::string& loadedFrom() const;

 private:
  struct Impl;
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
