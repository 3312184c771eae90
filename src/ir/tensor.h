// Host tensors: a dtype, static dimensions and row-major bytes (std::string objects for strings),
// shared by reference.
//
// Used for constant data in the IR (stored once, shared by every node that refers to it) and for
// the inputs and outputs of the interpreter and runtimes. Copying a Tensor copies the reference;
// clone() copies the bytes. A tensor may also borrow read-only bytes that another object owns (a
// constant of a mapped artifact): borrowed() keeps the owner alive and copies nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/types.h"

namespace kiln {

// IEEE half and bfloat16 stored as raw bits; arithmetic converts through float.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float f);  // round to nearest even
float bf16ToFloat(uint16_t bits);
uint16_t floatToBf16(float f);  // round to nearest even

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor. Dims must be non-negative and within kMaxElements (checked).
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Zero-filled tensor, or an error for negative dims or too many elements.
  static StatusOr<Tensor> create(DType dtype, std::vector<int64_t> dims);
  // A tensor whose bytes are not initialised: for results that are written whole before they
  // are read (the runtime's outputs). Dims are checked as by the constructor.
  static Tensor uninitialized(DType dtype, std::vector<int64_t> dims);
  // A tensor that takes over `bytes` (exactly byteSize() of them) as its storage: no copy.
  static Tensor fromBytes(DType dtype, std::vector<int64_t> dims, std::string&& bytes);
  // A read-only tensor over `bytes` (byteSize() of them), which `owner` keeps valid and
  // unchanged for as long as any copy of the tensor lives: no copy is made. mutableBytes() of a
  // borrowed tensor is a checked failure; clone() gives a writable copy.
  static Tensor borrowed(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const void> owner,
                         const std::byte* bytes);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t numElements() const { return numElements_; }
  size_t byteSize() const { return static_cast<size_t>(numElements_) * dtypeSize(dtype_); }
  TensorType type() const { return TensorType::of(dtype_, dims_); }
  bool defined() const { return data_ != nullptr; }
  // No other Tensor shares these bytes (copies of a Tensor share them).
  bool isUnique() const { return data_ && data_.use_count() == 1; }
  // The bytes belong to another object (borrowed()) and cannot be written.
  bool isBorrowed() const { return borrowed_; }

  const std::byte* bytes() const { return data_.get(); }
  std::byte* mutableBytes();
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes());
  }
  template <typename T>
  T* mutableData() {
    return reinterpret_cast<T*>(mutableBytes());
  }

  // Element i of a string tensor (a checked failure for other dtypes). A string tensor's elements
  // are std::string objects: data<std::string>() reads them, and bytes() are not its contents.
  const std::string& str(int64_t i) const;
  void setStr(int64_t i, std::string v);

  // Element i (row-major) converted to double / int64; any dtype but string.
  // getDouble of a u64 (or i64) above 2^53 rounds to the nearest double. getInt of a u64 element
  // above INT64_MAX returns its bit pattern read as i64 (2^64 - 1 comes back as -1); use getUInt
  // for the exact value.
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  // Element i converted to uint64: exact for unsigned dtypes; signed integers wrap modulo 2^64
  // (-1 gives 2^64 - 1); floats truncate toward zero, NaN and negatives give 0 and values of
  // 2^64 or more give 2^64 - 1.
  uint64_t getUInt(int64_t i) const;
  // Stores v converted to the tensor's dtype (round to nearest even for f16/bf16,
  // truncation toward zero for integers, v != 0 for bool). setDouble saturates to the integer
  // type's range (NaN gives 0); setInt and setUInt keep the low bits of an integer (two's
  // complement wraparound, so setInt(i, -1) on a u64 stores 2^64 - 1).
  void setDouble(int64_t i, double v);
  void setInt(int64_t i, int64_t v);
  void setUInt(int64_t i, uint64_t v);

  // Same bytes, other dims (element counts must agree).
  Tensor reshaped(std::vector<int64_t> dims) const;
  Tensor clone() const;
  // Bitwise equality of dtype, dims and bytes.
  bool identical(const Tensor& o) const;

  // Row-major strides in elements.
  std::vector<int64_t> strides() const;

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> dims_;
  int64_t numElements_ = 0;
  void allocate(bool zero);
  // Points at the bytes; its control block owns them (allocateLarge memory, or a borrowed tensor's
  // owner). Never null for a defined tensor, even of zero elements.
  std::shared_ptr<std::byte> data_;
  bool borrowed_ = false;
};

}  // namespace kiln
