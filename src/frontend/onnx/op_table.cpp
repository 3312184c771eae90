// The table of ONNX op mappings, keyed by (op type, since-version). A mapping registered at
// version v serves every opset from v up to the next registered version of the same op, so an op
// whose semantics changed in a later opset gets a second entry rather than a branch inside one.
#include "frontend/onnx/op_context.h"

namespace kiln::onnx {

MapFn OpTable::find(const std::string& opType, int opset) const {
  auto it = entries_.find(opType);
  if (it == entries_.end()) return nullptr;
  auto v = it->second.upper_bound(opset);  // first entry newer than the opset
  if (v == it->second.begin()) return nullptr;
  return std::prev(v)->second;
}

const OpTable& opTable() {
  static const OpTable table = [] {
    OpTable t;
    addElementwiseOps(t);
    addActivationOps(t);
    addMathOps(t);
    addShapeOps(t);
    addSliceOps(t);
    addIndexOps(t);
    addReduceOps(t);
    addNnOps(t);
    addPoolOps(t);
    addNormOps(t);
    addMiscOps(t);
    addEinsumOps(t);
    addRnnOps(t);
    addResizeOps(t);
    addSequenceOps(t);
    addDynamicSizeOps(t);
    return t;
  }();
  return table;
}

}  // namespace kiln::onnx
