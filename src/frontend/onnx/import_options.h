// More ways into the ONNX frontend than onnx_importer.h offers: importing from bytes (tests,
// fuzzing) and binding values to graph inputs that must be known while importing.
#pragma once

#include <map>
#include <memory>
#include <set>
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

// What an import learnt about the graph inputs, filled in whether or not it succeeds.
struct ImportReport {
  // Graph inputs whose values some node needed while importing (a Reshape's shape, pads, axes,
  // a count). Without a value in ImportOptions::inputValues such an input fails the import.
  std::set<std::string> neededInputs;
  // Those of them bound to their given values: constants of the module, not parameters.
  std::set<std::string> boundInputs;
};

StatusOr<std::unique_ptr<Module>> importModelFile(const std::string& path,
                                                  const ImportOptions& options,
                                                  ImportReport* report = nullptr);

// Options that give the graph inputs named in `values` those values where the importer needs
// them (inputValues), and fix the named dims (dim_param) of those inputs to the values' sizes
// (dimValues), so that shape arithmetic on them imports too. A model is then imported for these
// inputs, as the ONNX test runner does with each data set and `kiln run` with its input files.
StatusOr<ImportOptions> importOptionsForInputs(const std::string& path,
                                               std::map<std::string, Tensor> values);

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

// A parameter of the imported function is named after its graph input, so a caller matches
// input values to parameters by name (bound inputs are not parameters).

}  // namespace kiln::onnx
