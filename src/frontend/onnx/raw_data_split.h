// Private to the ONNX frontend: a serialized ModelProto split into the small part that protobuf
// parses and the raw_data payloads of its main graph's initializers, which the importer reads
// from the file straight into their tensors.
//
// Protobuf copies every bytes field into a string of its own, grown piece by piece from its read
// buffer; for a model of hundreds of MB of weights that was each weight copied about twice into
// fresh pages, half of vgg11_bn's import. The split walks only the wire format of the three
// message levels it needs (ModelProto.graph, GraphProto.initializer, TensorProto.raw_data) and
// copies the rest of the message as it is.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx {

struct SplitModel {
  // The model without the cut raw_data fields (every other field, in the same order).
  std::string skeleton;
  // Per main-graph initializer, in order: its cut payload (a view into the split bytes), or
  // nullopt where it was kept in the skeleton (smaller than the threshold, or no raw_data).
  std::vector<std::optional<std::string_view>> raw;
};

// Splits `bytes`, a serialized ModelProto, cutting raw_data payloads of at least `minBytes`.
// nullopt where the bytes are not a well-formed message of the expected shape (a field repeated
// that protobuf would merge, a group, a length past the end): the caller then parses the whole
// model, which reports what is wrong.
std::optional<SplitModel> splitInitializerData(std::string_view bytes, size_t minBytes);

}  // namespace kiln::onnx
