// The errors the module raises: a C++ exception that the module translates into kiln.KilnError
// or one of its subclasses, with Kiln's located message.
#pragma once

#include <string>
#include <vector>

namespace kiln::python {

// One thing a source has that Kiln cannot compile (kiln.UnsupportedOpError.unsupported).
struct UnsupportedItem {
  std::string node;  // where: the node's name (and source location when known)
  std::string op;    // the op ("onnx::Foo", "aten.foo")
  std::string reason;
};

struct Error {
  enum class Kind { Kiln, Compile, UnsupportedOp, InvalidInput, Run };
  Kind kind = Kind::Kiln;
  std::string message;
  std::vector<UnsupportedItem> unsupported;
};

}  // namespace kiln::python
