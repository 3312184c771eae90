// The ONNX frontend: ModelProto (through the real protobuf schema) into graph IR.
// This is the only code in Kiln that knows ONNX.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"

namespace kiln::onnx {

// Imports a model file; external data files are resolved relative to the model's folder, and
// must stay in it: a location that is absolute, has '..', or whose real path (symbolic links
// followed) lies outside the folder's real path is an error.
// The function is named "main"; parameters are the graph inputs that are not initializers,
// named as in the model; outputs are named after the graph outputs. The file is parsed through a
// small buffer, and the constants take over the parsed weights' storage: the weights are in
// memory once while the model imports, not three times (file, protobuf, constants).
StatusOr<std::unique_ptr<Module>> importModelFile(const std::string& path);

// One thing in a model that Kiln cannot handle.
struct Unsupported {
  std::string node;    // node name (or "graph input 'x'", "initializer 'w'")
  std::string opType;  // "domain::OpType" or "" for non-node items
  std::string reason;  // "op not supported", "attribute mode='foo' not supported", ...
};

// Lists every unsupported op, attribute value and dtype in the model at once (not only the
// first). An empty list means the model imports. Errors are for unreadable files only.
StatusOr<std::vector<Unsupported>> checkModelFile(const std::string& path);

// Reads a serialized TensorProto file (the ONNX test data's input_*.pb / output_*.pb).
StatusOr<Tensor> readTensorProtoFile(const std::string& path);

}  // namespace kiln::onnx
