// Matrix products through cuBLASLt (cublaslt.cpp is the one translation unit that includes its
// header): a plan per call, made once per program on the device, with the algorithm cuBLASLt's
// heuristic picks for the shape.
#pragma once

#include <memory>
#include <string>

#include "codegen/cuda/gemm.h"
#include "codegen/cuda/library_call.h"

namespace kiln::codegen::cuda {

class Gemm final : public LibraryCall {
 public:
  // Needs the driver's context current (Driver::get).
  static StatusOr<std::unique_ptr<Gemm>> create(const GemmShape& shape);
  ~Gemm() override;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // args: lhs, rhs, out; out = lhs . rhs (row-major, as the shape says).
  Status run(const DevicePtr* args, DevicePtr workspace, Stream stream) const override;
  std::string describe() const override;  // "cuBLASLt f32 [128 x 64] . [64 x 32], 1.00 waves"

  struct Plan;

 private:
  Gemm() = default;
  std::unique_ptr<Plan> plan_;
  GemmShape shape_;
};

}  // namespace kiln::codegen::cuda
