// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html), the unversioned
// DLManagedTensor of DLPack 0.x that torch >= 1.10 and numpy >= 1.22 exchange through
// `__dlpack__()` capsules named "dltensor". Declared here because Debian ships no dlpack.h;
// the layout is frozen by the standard.
#pragma once

#include <cstdint>

namespace kiln::python {

enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace kiln::python
