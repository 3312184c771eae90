#include "ir/types.h"

#include <algorithm>
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
    {DType::Str, "string", sizeof(std::string)},
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
bool isInteger(DType t) { return isSignedInteger(t) || isUnsignedInteger(t); }
bool isSignedInteger(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
bool isUnsignedInteger(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool isBool(DType t) { return t == DType::Bool; }

Dim Dim::product(int64_t coefficient, std::vector<std::string> factors) {
  if (factors.empty() || coefficient == 0) return Dim(coefficient);
  std::sort(factors.begin(), factors.end());
  Dim d;
  d.value_ = -1;
  d.coef_ = coefficient;
  d.factors_ = std::move(factors);
  return d;
}

const std::string& Dim::symbolName() const {
  KILN_CHECK(isSymbol(), "symbolName() of dimension " + str() + ", which is not a lone symbol");
  return factors_[0];
}

std::string Dim::str() const {
  if (isStatic()) return std::to_string(value_);
  std::string s = coef_ == 1 ? "" : std::to_string(coef_);
  for (const std::string& f : factors_) s += (s.empty() ? "" : "*") + f;
  return s;
}

std::optional<Dim> Dim::sum(const std::vector<Dim>& dims) {
  int64_t total = 0, coefficient = 0;
  const std::vector<std::string>* factors = nullptr;
  for (const Dim& d : dims) {
    if (d.isStatic()) {
      if (__builtin_add_overflow(total, d.value(), &total)) return std::nullopt;
      continue;
    }
    if (factors && *factors != d.factors()) return std::nullopt;
    factors = &d.factors();
    if (__builtin_add_overflow(coefficient, d.coefficient(), &coefficient)) return std::nullopt;
  }
  if (!factors) return Dim(total);
  if (total != 0) return std::nullopt;
  return product(coefficient, *factors);
}

std::string Dim::sumText(const std::vector<Dim>& dims) {
  std::string s;
  for (const Dim& d : dims) s += (s.empty() ? "" : " + ") + d.str();
  return s;
}

std::optional<Dim> operator*(const Dim& a, const Dim& b) {
  int64_t c = 0;
  int64_t ca = a.isStatic() ? a.value() : a.coef_, cb = b.isStatic() ? b.value() : b.coef_;
  if (__builtin_mul_overflow(ca, cb, &c) || c > kMaxElements) return std::nullopt;
  if (c == 0) return Dim(0);
  std::vector<std::string> f = a.factors_;
  f.insert(f.end(), b.factors_.begin(), b.factors_.end());
  return Dim::product(c, std::move(f));
}

std::optional<Dim> Dim::quotient(const Dim& a, const Dim& b) {
  int64_t ca = a.isStatic() ? a.value() : a.coef_, cb = b.isStatic() ? b.value() : b.coef_;
  if (cb == 0 || ca % cb != 0) return std::nullopt;
  std::vector<std::string> rest = a.factors_;
  for (const std::string& f : b.factors_) {
    auto it = std::find(rest.begin(), rest.end(), f);
    if (it == rest.end()) return std::nullopt;
    rest.erase(it);
  }
  return Dim::product(ca / cb, std::move(rest));
}

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
