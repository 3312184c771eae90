// Convolutions through cuDNN 9 (cudnn.cpp is the one translation unit that includes its
// headers): descriptors made once per program on the device, with the fastest algorithm of
// cuDNN's heuristic that fits the workspace and keeps the precision asked for.
#pragma once

#include <memory>
#include <string>

#include "codegen/cuda/conv.h"
#include "codegen/cuda/library_call.h"

namespace kiln::codegen::cuda {

class Conv final : public LibraryCall {
 public:
  // Needs the driver's context current (Driver::get). With an epilogue (convEpilogue), the
  // call is cuDNN's fused convolution; zArg and biasArg are its operands' argument indices.
  static StatusOr<std::unique_ptr<Conv>> create(const ConvShape& shape,
                                                const ConvEpilogue& epilogue = {}, int zArg = -1,
                                                int biasArg = -1);
  ~Conv() override;
  // args: input, kernel, result, then the epilogue's operands.
  Status run(const DevicePtr* args, DevicePtr workspace, Stream stream) const override;
  std::string describe() const override;
  StatusOr<std::unique_ptr<LibraryCall>> alone(bool withEpilogue) const override;
  std::vector<int64_t> argBytes() const override;

  struct Plan;

 private:
  Conv() = default;
  std::unique_ptr<Plan> plan_;
  ConvShape shape_;
  ConvEpilogue epilogue_;
  int zArg_ = -1, biasArg_ = -1;
};

// "cuDNN 9.19.0", or why this build has none.
std::string cudnnVersionString();

}  // namespace kiln::codegen::cuda
