// A library call of a cuda program (a matrix product on cuBLASLt, a convolution on cuDNN): which
// library takes a call is decided from its attributes and shapes alone (no toolkit, so that the
// schedule can say it on a machine without a GPU); the call itself is made once per program on
// the device and run at every launch.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda/driver.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cuda {

// Device memory each library call may use as scratch (cuBLASLt's recommendation for Hopper; it
// also bounds the cuDNN algorithms taken).
inline constexpr int64_t kCallWorkspace = int64_t(32) << 20;

class LibraryCall {
 public:
  virtual ~LibraryCall() = default;
  // Runs on `stream` with the call's buffers (its arguments in order) and the workspace.
  virtual Status run(const DevicePtr* args, DevicePtr workspace, Stream stream) const = 0;
  virtual std::string describe() const = 0;  // "cuDNN f32 [1, 3, 224, 224] * ..., algorithm 1"
  // The same operation made again as the library's call alone (no epilogue), and the bytes of
  // its arguments in order: what `kiln bench --roofline` times a program's call against.
  virtual StatusOr<std::unique_ptr<LibraryCall>> alone() const = 0;
  virtual std::vector<int64_t> argBytes() const = 0;
};

// The median milliseconds of `repeat` runs of call.alone() on fresh device buffers (their
// contents do not change a product's time), by the device's events around a graph of several
// calls back to back (library_call.cpp), as a program's own kernels are timed.
StatusOr<double> timeAlone(const LibraryCall& call, int repeat);

// The library that takes `call` of kernel `k` ("cuBLASLt", "cuDNN"), or nullopt with `why`
// saying, per library, why it does not.
std::optional<std::string> libraryFor(const kernel::Kernel& k, const kernel::Stmt& call,
                                      std::string* why);

// How many leading post-ops of `call` the library libraryFor names applies as it writes its
// result (cuBLASLt's epilogue, gemm.h; cuDNN's fused convolution, conv.h), with `what` naming them
// and `why` saying why the next one is not taken.
size_t libraryEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, std::string* what,
                       std::string* why);

// The call made for the device (the driver's context current); `tf32` puts f32 products and
// convolutions on TF32 tensor cores.
StatusOr<std::unique_ptr<LibraryCall>> makeLibraryCall(const kernel::Kernel& k,
                                                       const kernel::Stmt& call, bool tf32);

// The call made, for a call of symbolic sizes (kernel::isSymbolicCall: cuBLASLt's and cuDNN's
// plans have fixed shapes), for the sizes `sizes` of the kernel's symbols: the static call of those
// sizes.
StatusOr<std::unique_ptr<LibraryCall>>
makeLibraryCallAt(const kernel::Kernel& k, const kernel::Stmt& call, bool tf32,
                  const std::map<std::string, int64_t>& sizes);

}  // namespace kiln::codegen::cuda
