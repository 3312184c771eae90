// Program loading by extension: .kir through the text parser, .onnx through the ONNX importer,
// .kiln (an artifact) read for runtime::Executable::load.
// A new frontend is one more branch in loadProgram().
#include "program.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"
#include "runtime/source_key.h"
#include "support/mapped_file.h"

namespace kiln::cli {
namespace {

StatusOr<std::string> readTextFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::error("is a directory", Location{path, 0, 0});
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string why = std::filesystem::exists(path, ec) ? "cannot read file" : "no such file";
    return Status::error(why, Location{path, 0, 0});
  }
  std::string data;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    data.resize(static_cast<size_t>(size));
    in.read(data.data(), size);
  }
  if (in.bad() || (size > 0 && in.gcount() != size))
    return Status::error("cannot read file", Location{path, 0, 0});
  return data;
}

}  // namespace

StatusOr<LoadedProgram> loadProgram(const std::string& path, const runtime::CompileOptions* cache) {
  auto start = std::chrono::steady_clock::now();
  std::string ext = std::filesystem::path(path).extension().string();
  LoadedProgram p;
  auto done = [&] {
    p.loadMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  // A compile-cache hit for the source key just computed.
  auto cached = [&]() -> StatusOr<bool> {
    if (!cache) return false;
    runtime::CompileOptions co = *cache;
    co.sourceKey = p.sourceKey;
    KILN_ASSIGN_OR_RETURN(p.cached, runtime::Executable::fromCache(co));
    return p.cached != nullptr;
  };
  if (ext == ".kir") {
    KILN_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
    p.format = "kir";
    KILN_ASSIGN_OR_RETURN(p.sourceKey,
                          runtime::sourceFileKey("kir", path, cache ? cache->cacheDir : ""));
    done();
    KILN_ASSIGN_OR_RETURN(bool hit, cached());
    if (hit) return p;
    KILN_ASSIGN_OR_RETURN(p.module, parseModule(text, path));
  } else if (ext == ".onnx") {
    KILN_ASSIGN_OR_RETURN(p.sourceKey,
                          runtime::sourceFileKey("onnx", path, cache ? cache->cacheDir : ""));
    p.format = "onnx";
    done();
    KILN_ASSIGN_OR_RETURN(bool hit, cached());
    if (hit) return p;
    KILN_ASSIGN_OR_RETURN(p.module, onnx::importModelFile(path));
  } else if (ext == ".kiln") {
    KILN_ASSIGN_OR_RETURN(p.artifact, MappedFile::open(path));
    p.format = "kiln";
    p.loadMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return p;
  } else {
    std::string what = ext.empty() ? "no file extension" : "unknown extension '" + ext + "'";
    return Status::error("cannot tell the program format: " + what +
                             " (expected .kir, .onnx or .kiln)",
                         Location{path, 0, 0});
  }
  if (!p.module->entry())
    return Status::error("the program has no function to run", Location{path, 0, 0});
  std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  p.loadMs = ms.count();
  return p;
}

}  // namespace kiln::cli
