// Private to the ONNX frontend: the generated ONNX protos and a short alias for their namespace.
// (Inside kiln::onnx the name `onnx` means this namespace, so the protos are spelled pb::.)
#pragma once

#include <onnx/onnx_pb.h>

namespace kiln::onnx {
namespace pb = ::onnx;
}  // namespace kiln::onnx
