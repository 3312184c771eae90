// The C++ API (include/kiln/kiln.hpp).
#include <filesystem>
#include <fstream>
#include <iterator>

#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"
#include "kiln/kiln.hpp"
#include "runtime/artifact.h"
#include "runtime/source_key.h"
#include "runtime/target.h"
#include "support/mapped_file.h"

namespace kiln {

ModuleSource fileSource(const std::string& format, const std::string& path,
                        const std::string& key) {
  ModuleSource s;
  s.name = path;
  s.format = format;
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  s.path = ec ? path : absolute.lexically_normal().string();
  s.key = key;
  if (format != "onnx" && format != "kir") return s;  // no load: it cannot recompile
  s.load = [format, path = s.path, key]() -> StatusOr<std::unique_ptr<Module>> {
    if (!key.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string now, runtime::sourceFileKey(format, path, ""));
      if (now != key)
        return Status::error(path + " has changed since it was compiled: compile it again");
    }
    if (format == "onnx") return onnx::importModelFile(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::error("cannot read file", Location{path, 0, 0});
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return parseModule(text, path);
  };
  return s;
}

StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options) {
  runtime::registerBuiltinTargets();
  CompileOptions o = options;
  if (o.cacheDir.empty() || !o.sourceKey.empty()) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
    return Executable::compile(std::move(m), o, fileSource("onnx", path, o.sourceKey));
  }
  // The cache key fingerprints the file's bytes (runtime/source_key.h); a hit needs no import.
  KILN_ASSIGN_OR_RETURN(o.sourceKey, runtime::sourceFileKey("onnx", path, o.cacheDir));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> cached, Executable::fromCache(o));
  if (cached) {
    cached->setSource(fileSource("onnx", path, o.sourceKey));
    return cached;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
  return Executable::compile(std::move(m), o, fileSource("onnx", path, o.sourceKey));
}

StatusOr<std::unique_ptr<Executable>> loadArtifact(const std::string& path,
                                                   const CompileOptions& options) {
  runtime::registerBuiltinTargets();
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                        Executable::load(std::move(file), path, options));
  const ModuleSource& recorded = exe->source();
  if (!recorded.path.empty())
    exe->setSource(fileSource(recorded.format, recorded.path, recorded.key));
  return exe;
}

StatusOr<std::unique_ptr<Executable>> compileModule(std::unique_ptr<Module> module,
                                                    const CompileOptions& options,
                                                    std::optional<ModuleSource> source) {
  runtime::registerBuiltinTargets();
  return Executable::compile(std::move(module), options, std::move(source));
}

}  // namespace kiln
