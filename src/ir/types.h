// Element types, dimensions and tensor types of the graph IR.
//
// A dimension is either a static extent (>= 0) or a product of named symbols ("N", "4*N*S").
// Types are small values compared with ==; printing gives the .kir spelling: f32[N,3,224,224],
// i64[] for a scalar.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace kiln {

// Keep the order: it is printed nowhere, but tables below are indexed by it.
// Room is left for fp8 kinds (f8e4m3, f8e5m2) after bf16. Str (ONNX's string) holds text of any
// length; only the interpreter runs ops over it (docs/ops.md, "Strings").
enum class DType : uint8_t { Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, Str };
inline constexpr int kNumDTypes = 14;

std::string_view dtypeName(DType t);  // "f32", "i64", "bool", "string", ...
std::optional<DType> parseDType(std::string_view s);
size_t dtypeSize(DType t);        // bytes per element (a std::string object for Str)
bool isFloat(DType t);            // f16, bf16, f32, f64
bool isInteger(DType t);          // i8..i64, u8..u64 (not bool)
bool isSignedInteger(DType t);    // i8, i16, i32, i64
bool isUnsignedInteger(DType t);  // u8, u16, u32, u64
bool isBool(DType t);
inline bool isString(DType t) { return t == DType::Str; }
inline bool isNumeric(DType t) { return !isBool(t) && !isString(t); }

// A static extent, or a product of symbols with a positive coefficient (N, 4*N, N*S): the
// products come from reshapes that merge a symbolic dim with others, as attention's heads do.
class Dim {
 public:
  Dim() = default;
  Dim(int64_t extent) : value_(extent) {}  // NOLINT(google-explicit-constructor)
  static Dim symbol(std::string name) { return product(1, {std::move(name)}); }
  // coefficient * factors[0] * factors[1] * ...; no factors gives the static extent.
  static Dim product(int64_t coefficient, std::vector<std::string> factors);

  bool isStatic() const { return value_ >= 0; }
  bool isSymbolic() const { return value_ < 0; }
  // A lone symbol (N), not a product.
  bool isSymbol() const { return isSymbolic() && coef_ == 1 && factors_.size() == 1; }
  // Extent of a static dimension.
  int64_t value() const { return value_; }
  // The name of a lone symbol (isSymbol()).
  const std::string& symbolName() const;
  // A symbolic dim's coefficient and its symbols, sorted, repeated for powers.
  int64_t coefficient() const { return coef_; }
  const std::vector<std::string>& factors() const { return factors_; }
  std::string str() const;  // 8, N, 4*N, N*S

  // The product; nullopt when a static product overflows 2^40.
  friend std::optional<Dim> operator*(const Dim& a, const Dim& b);
  // The exact quotient a / b, or nullopt when b does not divide a as a product of symbols.
  static std::optional<Dim> quotient(const Dim& a, const Dim& b);
  // The sum when it is static or a product of symbols (N + 2*N = 3*N; 0 adds nothing), else
  // nullopt (N + 1, N + S: a dim is a product, not a sum).
  static std::optional<Dim> sum(const std::vector<Dim>& dims);
  // The sum as text: "N + 1".
  static std::string sumText(const std::vector<Dim>& dims);
  // The extent under `sizes` (symbol -> extent); nullopt if a symbol has none.
  template <typename Lookup>  // std::optional<int64_t>(const std::string&)
  std::optional<int64_t> evaluate(const Lookup& sizeOf) const {
    if (isStatic()) return value_;
    int64_t v = coef_;
    for (const std::string& f : factors_) {
      std::optional<int64_t> e = sizeOf(f);
      if (!e || __builtin_mul_overflow(v, *e, &v)) return std::nullopt;
    }
    return v;
  }

  bool operator==(const Dim& o) const {
    return value_ == o.value_ && coef_ == o.coef_ && factors_ == o.factors_;
  }
  bool operator!=(const Dim& o) const { return !(*this == o); }

 private:
  int64_t value_ = 0;
  int64_t coef_ = 1;
  std::vector<std::string> factors_;
};

using Shape = std::vector<Dim>;

class TensorType {
 public:
  TensorType() = default;
  TensorType(DType dtype, Shape dims) : dtype_(dtype), dims_(std::move(dims)) {}
  static TensorType of(DType dtype, const std::vector<int64_t>& dims);

  DType dtype() const { return dtype_; }
  const Shape& dims() const { return dims_; }
  const Dim& dim(size_t i) const { return dims_[i]; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  bool isStatic() const;
  // Product of the extents; nullopt if any dimension is symbolic.
  std::optional<int64_t> numElements() const;
  // The static extents; requires isStatic().
  std::vector<int64_t> staticDims() const;
  TensorType withDType(DType t) const { return TensorType(t, dims_); }
  TensorType withDims(Shape d) const { return TensorType(dtype_, std::move(d)); }

  std::string str() const;  // f32[N,3]
  bool operator==(const TensorType& o) const { return dtype_ == o.dtype_ && dims_ == o.dims_; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }

 private:
  DType dtype_ = DType::F32;
  Shape dims_;
};

// Largest element count a tensor may have (2^40); larger types are rejected as user errors
// rather than attempted.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

// Product of dims with overflow and kMaxElements checks.
StatusOr<int64_t> checkedNumElements(const std::vector<int64_t>& dims);

}  // namespace kiln
