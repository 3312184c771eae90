// Program loading by extension: .kir through the text parser, .onnx through the ONNX importer.
// A new frontend is one more branch in loadProgram().
#include "program.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"

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
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error("cannot read file", Location{path, 0, 0});
  return ss.str();
}

StatusOr<std::unique_ptr<Module>> loadKir(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseModule(text, path);
}

}  // namespace

StatusOr<LoadedProgram> loadProgram(const std::string& path) {
  auto start = std::chrono::steady_clock::now();
  std::string ext = std::filesystem::path(path).extension().string();
  LoadedProgram p;
  if (ext == ".kir") {
    KILN_ASSIGN_OR_RETURN(p.module, loadKir(path));
    p.format = "kir";
  } else if (ext == ".onnx") {
    KILN_ASSIGN_OR_RETURN(p.module, onnx::importModelFile(path));
    p.format = "onnx";
  } else {
    std::string what = ext.empty() ? "no file extension" : "unknown extension '" + ext + "'";
    return Status::error("cannot tell the program format: " + what + " (expected .kir or .onnx)",
                         Location{path, 0, 0});
  }
  if (!p.module->entry())
    return Status::error("the program has no function to run", Location{path, 0, 0});
  std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  p.loadMs = ms.count();
  return p;
}

}  // namespace kiln::cli
