#include "ir/types.h"

#include <array>

namespace kiln {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, kNumDTypes> kDTypes = {{
    {DType::Bool, "bool", 1},
    {DType::I8, "i8", 1},
    {DType::U8, "u8", 1},
    {DType::I16, "i16", 2},
    {DType::U16, "u16", 2},
    {DType::I32, "i32", 4},
    {DType::U32, "u32", 4},
    {DType::I64, "i64", 8},
    {DType::U64, "u64", 8},
    {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2},
    {DType::F32, "f32", 4},
    {DType::F64, "f64", 8},
}};

}  // namespace

std::string_view dtypeName(DType t) { return kDTypes[static_cast<size_t>(t)].name; }

std::optional<DType> parseDType(std::string_view s) {
  for (const auto& info : kDTypes)
    if (info.name == s) return info.type;
  return std::nullopt;
}

size_t dtypeSize(DType t) { return kDTypes[static_cast<size_t>(t)].size; }

bool isFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
bool isInteger(DType t) { return !isFloat(t) && t != DType::Bool; }
bool isSignedInteger(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
bool isUnsignedInteger(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool isBool(DType t) { return t == DType::Bool; }

TensorType TensorType::of(DType dtype, const std::vector<int64_t>& dims) {
  Shape s;
  s.reserve(dims.size());
  for (int64_t d : dims) s.emplace_back(d);
  return TensorType(dtype, std::move(s));
}

bool TensorType::isStatic() const {
  for (const Dim& d : dims_)
    if (!d.isStatic()) return false;
  return true;
}

std::optional<int64_t> TensorType::numElements() const {
  if (!isStatic()) return std::nullopt;
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.value();
  return n;
}

std::vector<int64_t> TensorType::staticDims() const {
  std::vector<int64_t> out;
  out.reserve(dims_.size());
  for (const Dim& d : dims_) {
    KILN_CHECK(d.isStatic(), "staticDims() of a type with symbolic dimension " + d.str());
    out.push_back(d.value());
  }
  return out;
}

std::string TensorType::str() const {
  std::string s(dtypeName(dtype_));
  s += '[';
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ',';
    s += dims_[i].str();
  }
  s += ']';
  return s;
}

StatusOr<int64_t> checkedNumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::error("negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxElements / d) return Status::error("tensor has more than 2^40 elements");
    n *= d;
  }
  return n;
}

}  // namespace kiln
