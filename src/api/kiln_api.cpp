// The C++ API (include/kiln/kiln.hpp).
#include "frontend/onnx/onnx_importer.h"
#include "kiln/kiln.hpp"
#include "runtime/artifact.h"
#include "runtime/source_key.h"
#include "runtime/target.h"
#include "support/mapped_file.h"

namespace kiln {

StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options) {
  runtime::registerBuiltinTargets();
  CompileOptions o = options;
  if (o.cacheDir.empty() || !o.sourceKey.empty()) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
    return Executable::compile(std::move(m), o);
  }
  // The cache key fingerprints the file's bytes (runtime/source_key.h); a hit needs no import.
  KILN_ASSIGN_OR_RETURN(o.sourceKey, runtime::sourceFileKey("onnx", path, o.cacheDir));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> cached, Executable::fromCache(o));
  if (cached) return cached;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
  return Executable::compile(std::move(m), o);
}

StatusOr<std::unique_ptr<Executable>> loadArtifact(const std::string& path,
                                                   const CompileOptions& options) {
  runtime::registerBuiltinTargets();
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return Executable::load(std::move(file), path, options);
}

StatusOr<std::unique_ptr<Executable>> compileModule(std::unique_ptr<Module> module,
                                                    const CompileOptions& options) {
  runtime::registerBuiltinTargets();
  return Executable::compile(std::move(module), options);
}

}  // namespace kiln
