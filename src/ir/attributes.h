// Typed attributes of graph-IR nodes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"
#include "ir/types.h"

namespace kiln {

// Constant data held by a `constant` node. `poolName` is the name of its out-of-line entry in
// the .kir text ("" lets the printer choose: inline when small, a fresh name otherwise).
struct ConstantData {
  Tensor tensor;
  std::string poolName;
  // The data is not in the graph: every reader of the constant is a library kernel that holds it
  // in a layout of its own. `tensor` is then undefined and the node's type is its declared result
  // type. Set where the runtime frees such constants (CompileOptions::dropHeldConstants) and in
  // artifacts, which store such weights once, in the kernels' layout (.kir: `data @w = T held`).
  bool held = false;
};

// The order matches AttrValue's alternatives.
enum class AttrKind : uint8_t { Int, Float, Bool, Enum, Ints, Floats, DType, String, Tensor };

using AttrValue =
    std::variant<int64_t, double, bool, std::string /*enum word*/, std::vector<int64_t>,
                 std::vector<double>, DType, std::string /*free string*/, ConstantData>;

inline AttrKind attrKind(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }
const char* attrKindName(AttrKind k);

// Helpers to build AttrValues without spelling the variant index.
inline AttrValue intAttr(int64_t v) { return AttrValue(std::in_place_index<0>, v); }
inline AttrValue floatAttr(double v) { return AttrValue(std::in_place_index<1>, v); }
inline AttrValue boolAttr(bool v) { return AttrValue(std::in_place_index<2>, v); }
inline AttrValue enumAttr(std::string v) { return AttrValue(std::in_place_index<3>, std::move(v)); }
inline AttrValue intsAttr(std::vector<int64_t> v) {
  return AttrValue(std::in_place_index<4>, std::move(v));
}
inline AttrValue floatsAttr(std::vector<double> v) {
  return AttrValue(std::in_place_index<5>, std::move(v));
}
inline AttrValue dtypeAttr(DType v) { return AttrValue(std::in_place_index<6>, v); }
inline AttrValue stringAttr(std::string v) {
  return AttrValue(std::in_place_index<7>, std::move(v));
}
inline AttrValue tensorAttr(Tensor t, std::string poolName = {}) {
  return AttrValue(std::in_place_index<8>, ConstantData{std::move(t), std::move(poolName)});
}

// Attributes by name. The printer prints them in the op's schema order.
using AttrMap = std::map<std::string, AttrValue>;

}  // namespace kiln
