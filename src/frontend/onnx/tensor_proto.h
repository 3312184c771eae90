// Private to the ONNX frontend: ONNX element types and TensorProto data (raw, typed fields and
// external files) to Kiln tensors, and bounded file reading.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "frontend/onnx/proto.h"
#include "ir/tensor.h"
#include "support/mapped_file.h"

namespace kiln::onnx {

// Files and messages larger than this are refused (protobuf cannot parse more than 2 GB).
inline constexpr int64_t kMaxProtoBytes = (int64_t(1) << 31) - 1;

// The Kiln dtype of an ONNX TensorProto.DataType, nullopt when Kiln has none (string, uint16,
// uint32, uint64, complex, ...).
std::optional<DType> dtypeFromOnnx(int elemType);
// ONNX's name of an element type ("FLOAT", "UINT16", ...), or "type N" for unknown codes.
std::string onnxDTypeName(int elemType);
int onnxFromDType(DType t);

// The tensor held by `t`; `what` names it in errors ("initializer 'w'"). External data is read
// relative to `baseDir`; paths that are absolute or contain ".." are refused. `takeRaw`: t's
// raw_data, which the caller owns and no longer needs: the tensor then takes over its storage
// instead of copying it (a model's weights are not held twice while it is imported).
StatusOr<Tensor> tensorFromProto(const pb::TensorProto& t, const std::string& baseDir,
                                 const std::string& what, std::string* takeRaw = nullptr);

// The tensor of `t` whose raw_data was cut out of the message (raw_data_split.h): `raw`, a part
// of `file`'s bytes, read from the file straight into the tensor.
StatusOr<Tensor> tensorFromOutsideRaw(const pb::TensorProto& t, std::string_view raw,
                                      const MappedFile& file, const std::string& what);

// Reads a whole file, refusing files over kMaxProtoBytes.
StatusOr<std::string> readFileLimited(const std::string& path, const std::string& what);

// Parses a serialized message from a file, with the size limit and a clean error for corrupt or
// truncated data.
template <typename Message>
Status parseProtoFile(const std::string& path, const std::string& what, Message& out) {
  auto bytes = readFileLimited(path, what);
  if (!bytes) return bytes.status();
  if (!out.ParseFromString(*bytes))
    return Status::error(what + " '" + path + "' is not a valid " + out.GetTypeName() +
                         " (corrupt or truncated protobuf data)");
  return Status::ok();
}

}  // namespace kiln::onnx
