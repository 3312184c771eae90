// Internal to src/interp: small helpers shared by the reference kernels.
//
//  - Per-dtype element types. Storage<D> is how an element of dtype D sits in a Tensor's bytes
//    (bool as uint8_t 0/1, f16/bf16 as raw uint16_t bits); Compute<D> is the type kernels do
//    arithmetic in (bool, the integer itself, float for f16/bf16/f32, double for f64).
//    load<D>/store<D> convert between the two; store rounds f16/bf16 to nearest even.
//  - dispatchDType(t, f): calls f(DTypeTag<D>{}) for the runtime dtype t, so a kernel is written
//    once as a generic lambda and instantiated for every dtype:
//        return dispatchDType(x.dtype(), [&](auto tag) {
//          constexpr DType D = decltype(tag)::value;
//          const auto* in = x.data<Storage<D>>(); ...
//        });
//    Every branch must return the same type (Status, EvalResult, ...).
//  - Row-major index arithmetic: rowMajorStrides, nextIndex (odometer increment), linearOffset.
//  - makeResult: a zero-filled tensor of a (static) result type.
//  - Integer arithmetic that must wrap (add/sub/mul/neg) is done in the unsigned type of the same
//    width: wrapAdd/wrapSub/wrapMul/wrapNeg never hit signed-overflow UB.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/tensor.h"
#include "ir/types.h"
#include "support/status.h"

namespace kiln::interp {

template <DType D>
struct DTypeTag {
  static constexpr DType value = D;
};

template <DType D>
struct DTypeTraits;
#define KILN_DTYPE_TRAITS(D, S, C) \
  template <>                      \
  struct DTypeTraits<DType::D> {   \
    using StorageType = S;         \
    using ComputeType = C;         \
  };
KILN_DTYPE_TRAITS(Bool, uint8_t, bool)
KILN_DTYPE_TRAITS(I8, int8_t, int8_t)
KILN_DTYPE_TRAITS(U8, uint8_t, uint8_t)
KILN_DTYPE_TRAITS(I16, int16_t, int16_t)
KILN_DTYPE_TRAITS(U16, uint16_t, uint16_t)
KILN_DTYPE_TRAITS(I32, int32_t, int32_t)
KILN_DTYPE_TRAITS(U32, uint32_t, uint32_t)
KILN_DTYPE_TRAITS(I64, int64_t, int64_t)
KILN_DTYPE_TRAITS(U64, uint64_t, uint64_t)
KILN_DTYPE_TRAITS(F16, uint16_t, float)
KILN_DTYPE_TRAITS(BF16, uint16_t, float)
KILN_DTYPE_TRAITS(F32, float, float)
KILN_DTYPE_TRAITS(F64, double, double)
#undef KILN_DTYPE_TRAITS

template <DType D>
using Storage = typename DTypeTraits<D>::StorageType;
template <DType D>
using Compute = typename DTypeTraits<D>::ComputeType;

template <DType D>
inline Compute<D> load(const Storage<D>* p, int64_t i) {
  if constexpr (D == DType::F16) return halfToFloat(p[i]);
  else if constexpr (D == DType::BF16) return bf16ToFloat(p[i]);
  else if constexpr (D == DType::Bool) return p[i] != 0;
  else return p[i];
}

template <DType D>
inline void store(Storage<D>* p, int64_t i, Compute<D> v) {
  if constexpr (D == DType::F16) p[i] = floatToHalf(v);
  else if constexpr (D == DType::BF16) p[i] = floatToBf16(v);
  else if constexpr (D == DType::Bool) p[i] = v ? 1 : 0;
  else p[i] = v;
}

// Calls f(DTypeTag<D>{}) for the dtype t. All instantiations must return one type.
template <typename F>
decltype(auto) dispatchDType(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(DTypeTag<DType::Bool>{});
    case DType::I8: return f(DTypeTag<DType::I8>{});
    case DType::U8: return f(DTypeTag<DType::U8>{});
    case DType::I16: return f(DTypeTag<DType::I16>{});
    case DType::U16: return f(DTypeTag<DType::U16>{});
    case DType::I32: return f(DTypeTag<DType::I32>{});
    case DType::U32: return f(DTypeTag<DType::U32>{});
    case DType::I64: return f(DTypeTag<DType::I64>{});
    case DType::U64: return f(DTypeTag<DType::U64>{});
    case DType::F16: return f(DTypeTag<DType::F16>{});
    case DType::BF16: return f(DTypeTag<DType::BF16>{});
    case DType::F32: return f(DTypeTag<DType::F32>{});
    case DType::F64: return f(DTypeTag<DType::F64>{});
    case DType::Str: break;  // the verifier keeps strings out of numeric ops
  }
  KILN_CHECK(false, "dispatchDType: " + std::string(dtypeName(t)) + " is not a number type");
  return f(DTypeTag<DType::F32>{});
}

// Two's-complement wrapping arithmetic for integer T (no signed-overflow UB).
template <typename T>
inline T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
inline T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
inline T wrapMul(T a, T b) {
  // Promote through uint64_t so that u8/i16/u16 products do not go through (signed) int.
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(
      static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(a)) *
      static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(b))));
}
template <typename T>
inline T wrapNeg(T a) {
  return wrapSub<T>(T(0), a);
}

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// Advances `idx` to the next index of `dims` in row-major order. Returns false (and leaves idx
// all zeros) after the last index. Loop: idx(rank, 0); if (n > 0) do { ... } while (nextIndex).
inline bool nextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (size_t i = idx.size(); i-- > 0;) {
    if (++idx[i] < dims[i]) return true;
    idx[i] = 0;
  }
  return false;
}

inline int64_t linearOffset(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
  return off;
}

// A zero-filled tensor of a static result type.
inline Tensor makeResult(const TensorType& t) { return Tensor(t.dtype(), t.staticDims()); }

}  // namespace kiln::interp
