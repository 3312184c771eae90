// The C++ API (include/kiln/kiln.hpp).
#include "frontend/onnx/onnx_importer.h"
#include "kiln/kiln.hpp"
#include "runtime/artifact.h"
#include "support/hash.h"
#include "support/mapped_file.h"

namespace kiln {

StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options) {
  CompileOptions o = options;
  if (o.cacheDir.empty() || !o.sourceKey.empty()) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
    return Executable::compile(std::move(m), o);
  }
  // The cache key hashes the file's bytes: read once, for the key and the import.
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  std::string_view bytes = file.bytes();
  o.sourceKey = "onnx " + hex64(hash64(bytes));
  // A cache hit needs no import.
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> cached, Executable::fromCache(o));
  if (cached) return cached;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path, bytes));
  return Executable::compile(std::move(m), o);
}

StatusOr<std::unique_ptr<Executable>> loadArtifact(const std::string& path,
                                                   const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return Executable::load(std::move(file), path, options);
}

StatusOr<std::unique_ptr<Executable>> compileModule(std::unique_ptr<Module> module,
                                                    const CompileOptions& options) {
  return Executable::compile(std::move(module), options);
}

}  // namespace kiln
