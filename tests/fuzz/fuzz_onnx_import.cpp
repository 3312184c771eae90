// libFuzzer target: the ONNX importer on arbitrary bytes.
//
// The importer's API reads files, so each input is written to model.onnx in a private temporary
// folder (external-data references then resolve inside that folder only, and can never reach
// /proc or stdin). Both importModelFile and checkModelFile run on it; a model that imports is also
// printed, which walks every node and constant the importer made. Any crash, hang, sanitizer
// report or huge allocation is a finding: bad input must give a Status, nothing else.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "frontend/onnx/onnx_importer.h"
#include "ir/text/text.h"

namespace {

const std::string& modelPath() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/kiln-fuzz-onnx-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (!dir) {
      std::perror("mkdtemp");
      std::abort();
    }
    return std::string(dir) + "/model.onnx";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = modelPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);

  auto module = kiln::onnx::importModelFile(path);
  if (module) (void)kiln::printModule(**module);
  (void)kiln::onnx::checkModelFile(path);
  return 0;
}
