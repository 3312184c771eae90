#include "ir/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "support/large_buffer.h"

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

namespace {

// The element count of valid dims (a checked failure otherwise).
int64_t elementCount(const std::vector<int64_t>& dims) {
  auto n = checkedNumElements(dims);
  KILN_CHECK(n.isOk(), "Tensor with invalid dims: " + n.status().message());
  return *n;
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  numElements_ = elementCount(dims_);
  allocate(true);
}

void Tensor::allocate(bool zero) {
  borrowed_ = false;
  if (isString(dtype_)) {  // constructed std::string objects (empty), destroyed with the last copy
    auto owner = std::make_shared<std::vector<std::string>>(
        std::max<size_t>(static_cast<size_t>(numElements_), 1));
    data_ = std::shared_ptr<std::byte>(owner, reinterpret_cast<std::byte*>(owner->data()));
    return;
  }
  // One byte at least, so that the data pointer of an empty tensor is not null.
  size_t size = std::max<size_t>(byteSize(), 1);
  data_ = allocateLarge(size);
  if (zero) std::memset(data_.get(), 0, size);
  borrowed_ = false;
}

Tensor Tensor::borrowed(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const void> owner,
                        const std::byte* bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numElements_ = elementCount(t.dims_);
  KILN_CHECK(owner && bytes, "Tensor::borrowed needs an owner and bytes");
  KILN_CHECK(!isString(dtype), "Tensor::borrowed of strings: they are objects, not bytes");
  t.data_ = std::shared_ptr<std::byte>(std::const_pointer_cast<void>(std::move(owner)),
                                       const_cast<std::byte*>(bytes));
  t.borrowed_ = true;
  return t;
}

Tensor Tensor::fromBytes(DType dtype, std::vector<int64_t> dims, std::string&& bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numElements_ = elementCount(t.dims_);
  KILN_CHECK(!isString(dtype), "Tensor::fromBytes of strings: they are objects, not bytes");
  KILN_CHECK(bytes.size() == t.byteSize(),
             "Tensor::fromBytes: " + std::to_string(bytes.size()) + " bytes for " + t.type().str());
  if (bytes.empty()) bytes.push_back('\0');  // a non-null data pointer
  auto owner = std::make_shared<std::string>(std::move(bytes));
  t.data_ = std::shared_ptr<std::byte>(owner, reinterpret_cast<std::byte*>(owner->data()));
  return t;
}

std::byte* Tensor::mutableBytes() {
  KILN_CHECK(!borrowed_, "a borrowed tensor (" + type().str() + ") is read-only");
  return data_.get();
}

Tensor Tensor::uninitialized(DType dtype, std::vector<int64_t> dims) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numElements_ = elementCount(t.dims_);
  t.allocate(false);
  return t;
}

StatusOr<Tensor> Tensor::create(DType dtype, std::vector<int64_t> dims) {
  auto n = checkedNumElements(dims);
  if (!n) return n.status();
  return Tensor(dtype, std::move(dims));
}

const std::string& Tensor::str(int64_t i) const {
  KILN_CHECK(isString(dtype_), "str() of a " + std::string(dtypeName(dtype_)) + " tensor");
  return data<std::string>()[i];
}

void Tensor::setStr(int64_t i, std::string v) {
  KILN_CHECK(isString(dtype_), "setStr() of a " + std::string(dtypeName(dtype_)) + " tensor");
  mutableData<std::string>()[i] = std::move(v);
}

double Tensor::getDouble(int64_t i) const {
  const std::byte* p = bytes();
  switch (dtype_) {
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::I16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::U16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::U32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::U64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::F16: return halfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F64: return reinterpret_cast<const double*>(p)[i];
    case DType::Str: break;
  }
  KILN_CHECK(false, "getDouble() of a string tensor");
  return 0;
}

namespace {

// v converted to the integer type T: truncation toward zero, saturating at T's range, NaN -> 0.
// (A plain static_cast of an out-of-range double is undefined behaviour.)
template <typename T>
T saturatingCast(double v) {
  if (std::isnan(v)) return T(0);
  // The bounds as doubles: lowest() is a power of two (or 0), so exact; max() + 1 is 2^bits.
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hiExclusive =
      2.0 * static_cast<double>(std::numeric_limits<T>::max() / 2 + 1);  // 2^(bits - signed)
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hiExclusive) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype_) {
    case DType::Bool: return data<uint8_t>()[i] ? 1 : 0;
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::I16: return data<int16_t>()[i];
    case DType::U16: return data<uint16_t>()[i];
    case DType::I32: return data<int32_t>()[i];
    case DType::U32: return data<uint32_t>()[i];
    case DType::I64: return data<int64_t>()[i];
    case DType::U64: return static_cast<int64_t>(data<uint64_t>()[i]);  // bit pattern
    default: return saturatingCast<int64_t>(getDouble(i));
  }
}

uint64_t Tensor::getUInt(int64_t i) const {
  if (dtype_ == DType::U64) return data<uint64_t>()[i];
  if (isFloat(dtype_)) return saturatingCast<uint64_t>(getDouble(i));
  return static_cast<uint64_t>(getInt(i));  // two's complement for negative signed values
}

void Tensor::setDouble(int64_t i, double v) {
  std::byte* p = mutableBytes();
  switch (dtype_) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0.0; return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = saturatingCast<int8_t>(v); return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = saturatingCast<uint8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[i] = saturatingCast<int16_t>(v); return;
    case DType::U16: reinterpret_cast<uint16_t*>(p)[i] = saturatingCast<uint16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = saturatingCast<int32_t>(v); return;
    case DType::U32: reinterpret_cast<uint32_t*>(p)[i] = saturatingCast<uint32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = saturatingCast<int64_t>(v); return;
    case DType::U64: reinterpret_cast<uint64_t*>(p)[i] = saturatingCast<uint64_t>(v); return;
    case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v)); return;
    case DType::BF16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v));
      return;
    case DType::F32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::Str: break;
  }
  KILN_CHECK(false, "setDouble() of a string tensor");
}

void Tensor::setInt(int64_t i, int64_t v) {
  std::byte* p = mutableBytes();
  switch (dtype_) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0; return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::U16: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::U32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = v; return;
    case DType::U64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); return;
    default: setDouble(i, static_cast<double>(v)); return;
  }
}

void Tensor::setUInt(int64_t i, uint64_t v) {
  if (dtype_ == DType::U64) mutableData<uint64_t>()[i] = v;
  else if (isInteger(dtype_) || isBool(dtype_)) setInt(i, static_cast<int64_t>(v));  // low bits
  else setDouble(i, static_cast<double>(v));
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
  if (data_ && isString(dtype_)) {
    t.allocate(false);
    std::copy_n(data<std::string>(), numElements_, t.mutableData<std::string>());
  } else if (data_) {
    t.allocate(false);
    std::memcpy(t.data_.get(), data_.get(), byteSize());
  }
  return t;
}

bool Tensor::identical(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (byteSize() == 0) return true;
  if (isString(dtype_))
    return std::equal(data<std::string>(), data<std::string>() + numElements_,
                      o.data<std::string>());
  return std::memcmp(bytes(), o.bytes(), byteSize()) == 0;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(dims_.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims_.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims_[i + 1];
  return s;
}

}  // namespace kiln
