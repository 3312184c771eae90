// The C++ API (include/kiln/kiln.hpp).
#include "frontend/onnx/onnx_importer.h"
#include "kiln/kiln.hpp"

namespace kiln {

StatusOr<std::unique_ptr<Executable>> compileOnnxFile(const std::string& path,
                                                      const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, onnx::importModelFile(path));
  return Executable::compile(std::move(m), options);
}

StatusOr<std::unique_ptr<Executable>> compileModule(std::unique_ptr<Module> module,
                                                    const CompileOptions& options) {
  return Executable::compile(std::move(module), options);
}

}  // namespace kiln
