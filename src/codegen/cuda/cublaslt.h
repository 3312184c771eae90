// Matrix products through cuBLASLt (cublaslt.cpp is the one translation unit that includes its
// header): a plan per call, made once per program on the device, with the algorithm cuBLASLt's
// heuristic picks for the shape.
#pragma once

#include <memory>
#include <string>

#include "codegen/cuda/driver.h"
#include "codegen/cuda/gemm.h"
#include "support/status.h"

namespace kiln::codegen::cuda {

// Device memory a product may use as scratch (cuBLASLt's recommendation for Hopper).
inline constexpr int64_t kGemmWorkspace = int64_t(32) << 20;

class Gemm {
 public:
  // Needs the driver's context current (Driver::get).
  static StatusOr<std::unique_ptr<Gemm>> create(const GemmShape& shape);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out = lhs . rhs (row-major, as the shape says) on `stream`.
  Status run(DevicePtr lhs, DevicePtr rhs, DevicePtr out, DevicePtr workspace, Stream stream) const;
  std::string describe() const;  // "cuBLASLt f32 [128 x 64] . [64 x 32], 1 wave"

  struct Plan;

 private:
  Gemm() = default;
  std::unique_ptr<Plan> plan_;
  GemmShape shape_;
};

}  // namespace kiln::codegen::cuda
