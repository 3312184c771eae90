// More ways into the ONNX frontend than onnx_importer.h offers: importing from bytes (tests,
// fuzzing) and binding values to graph inputs that must be known while importing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/onnx/onnx_importer.h"

namespace kiln::onnx {

struct ImportOptions {
  // Values of graph inputs. The importer uses one only where it needs an input's value while
  // importing (a shape, axes, a count, a padding): that input then becomes a constant holding the
  // value. Every other graph input stays a parameter, whether or not a value is given here.
  // (The ONNX test suite passes shapes and axes as graph inputs; this lets such models import.)
  std::map<std::string, Tensor> inputValues;
  // Extents for symbolic dims (ONNX dim_param names, e.g. {"batch", 1}): such dims become
  // static, which lets shape arithmetic on them (batch * heads) import.
  std::map<std::string, int64_t> dimValues;
};

StatusOr<std::unique_ptr<Module>> importModelFile(const std::string& path,
                                                  const ImportOptions& options);

// Imports a serialized ModelProto held in memory; external data is resolved relative to
// `baseDir`.
StatusOr<std::unique_ptr<Module>> importModelBytes(std::string_view bytes,
                                                   const std::string& baseDir,
                                                   const ImportOptions& options = {});
StatusOr<std::vector<Unsupported>> checkModelBytes(std::string_view bytes,
                                                   const std::string& baseDir);

// The graph inputs of the model at `path` that are not initializers, in the graph's order: the
// names the ONNX test data's input_<i>.pb files belong to.
StatusOr<std::vector<std::string>> graphInputNames(const std::string& path);

// The dim_param name of each dimension of those inputs, in the same order ("" for a dimension
// without one).
StatusOr<std::vector<std::vector<std::string>>> graphInputDimParams(const std::string& path);

// A parameter of the imported function is named after its graph input, so a caller matches
// input values to parameters by name (bound inputs are not parameters).

}  // namespace kiln::onnx
