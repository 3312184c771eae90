// Matrix products through cuBLASLt (cublaslt.cpp is the one translation unit that includes its
// header): a plan per call, made once per program on the device, with the algorithm cuBLASLt's
// heuristic ranks first for the shape (or, with KILN_CUBLASLT_TIMED=1, the fastest of its first
// 8, timed on the device).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/gemm.h"
#include "codegen/cuda/library_call.h"

namespace kiln::codegen::cuda {

class Gemm final : public LibraryCall {
 public:
  // Needs the driver's context current (Driver::get).
  // The epilogue's residual and bias are args[residualArg] and args[biasArg] of run().
  static StatusOr<std::unique_ptr<Gemm>> create(const GemmShape& shape,
                                                const GemmEpilogue& epilogue = {},
                                                int residualArg = -1, int biasArg = -1);
  ~Gemm() override;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // args: lhs, rhs, out, then the epilogue's operands; out = act(lhs . rhs + residual + bias)
  // (row-major, as the shape says).
  Status run(const DevicePtr* args, DevicePtr workspace, Stream stream) const override;
  std::string describe() const override;  // "cuBLASLt f32 [128 x 64] . [64 x 32], 1.00 waves"
  StatusOr<std::unique_ptr<LibraryCall>> alone(bool withEpilogue) const override;
  std::vector<int64_t> argBytes() const override;

  struct Plan;

 private:
  Gemm() = default;
  void pickAlgorithm();  // plan_->algo from plan_->candidates
  std::unique_ptr<Plan> plan_;
  GemmShape shape_;
  GemmEpilogue epilogue_;
  int residualArg_ = -1, biasArg_ = -1;
};

}  // namespace kiln::codegen::cuda
