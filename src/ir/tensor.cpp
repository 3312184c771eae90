#include "ir/tensor.h"

#include <bit>
#include <cmath>

namespace kiln {

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      bits = sign | (uint32_t(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    // value = absx as float; half subnormal unit is 2^-24.
    float a = std::bit_cast<float>(absx);
    float scaled = a * 16777216.0f;                              // 2^24, exact
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));  // ties to even (default mode)
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absx >> 23) - 127 + 15);
  uint32_t mant = absx & 0x7fffffu;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into exp correctly
  return static_cast<uint16_t>(sign | half);
}

float bf16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t floatToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  auto n = checkedNumElements(dims_);
  KILN_CHECK(n.isOk(), "Tensor with invalid dims: " + n.status().message());
  numElements_ = *n;
  data_ = std::make_shared<std::vector<std::byte>>(byteSize());
}

StatusOr<Tensor> Tensor::create(DType dtype, std::vector<int64_t> dims) {
  auto n = checkedNumElements(dims);
  if (!n) return n.status();
  return Tensor(dtype, std::move(dims));
}

double Tensor::getDouble(int64_t i) const {
  const std::byte* p = bytes();
  switch (dtype_) {
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::I16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::F16: return halfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F64: return reinterpret_cast<const double*>(p)[i];
  }
  return 0;
}

int64_t Tensor::getInt(int64_t i) const {
  if (dtype_ == DType::I64) return data<int64_t>()[i];
  if (isFloat(dtype_)) return static_cast<int64_t>(getDouble(i));
  return static_cast<int64_t>(getDouble(i));  // exact for integers up to 32 bits
}

namespace {
template <typename T>
T saturatingCast(double v) {
  if (std::isnan(v)) return T(0);
  return static_cast<T>(v);
}
}  // namespace

void Tensor::setDouble(int64_t i, double v) {
  std::byte* p = mutableBytes();
  switch (dtype_) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0.0; return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = saturatingCast<int8_t>(v); return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = saturatingCast<uint8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[i] = saturatingCast<int16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = saturatingCast<int32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = saturatingCast<int64_t>(v); return;
    case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); return;
    case DType::BF16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v));
      return;
    case DType::F32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
  }
}

void Tensor::setInt(int64_t i, int64_t v) {
  std::byte* p = mutableBytes();
  switch (dtype_) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0; return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = v; return;
    default: setDouble(i, static_cast<double>(v)); return;
  }
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  auto n = checkedNumElements(dims);
  KILN_CHECK(n.isOk() && *n == numElements_, "reshaped() with a different element count");
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (data_) t.data_ = std::make_shared<std::vector<std::byte>>(*data_);
  return t;
}

bool Tensor::identical(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (byteSize() == 0) return true;
  return std::memcmp(bytes(), o.bytes(), byteSize()) == 0;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(dims_.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims_.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims_[i + 1];
  return s;
}

}  // namespace kiln
