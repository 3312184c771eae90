// A library call of a cuda program (a matrix product on cuBLASLt, a convolution on cuDNN): which
// library takes a call is decided from its attributes and shapes alone (no toolkit, so that the
// schedule can say it on a machine without a GPU); the call itself is made once per program on
// the device and run at every launch.
#pragma once

#include <functional>
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
  // The same operation made again as the library's call alone, with this call's epilogue or
  // bare, and the bytes of its arguments in order (the epilogue's operands after the result):
  // what `kiln bench --roofline` times a program's call against.
  virtual StatusOr<std::unique_ptr<LibraryCall>> alone(bool withEpilogue) const = 0;
  virtual std::vector<int64_t> argBytes() const = 0;
};

// The bytes of a call's arguments: `bytes` (its operands, then its result) and the epilogue's
// operands at their argument indices, a residual of the result's size and a bias of
// `biasElements` (f32 at most); 0 at any other index.
std::vector<int64_t> withEpilogueOperands(std::vector<int64_t> bytes, int residualArg, int biasArg,
                                          int64_t biasElements);

// Fresh device buffers of the given sizes, then a call workspace (unless `workspace` is false),
// freed with it.
class Scratch {
 public:
  static StatusOr<std::unique_ptr<Scratch>>
  make(const Driver& driver, const std::vector<int64_t>& bytes, bool workspace = true);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const DevicePtr* args() const { return ptrs_.data(); }
  DevicePtr workspace() const { return ptrs_.back(); }

 private:
  explicit Scratch(const Driver& d) : driver_(d) {}
  const Driver& driver_;
  std::vector<DevicePtr> ptrs_;
};

// The median milliseconds of one `run` on a stream of its own: after a warm-up, several runs
// captured into one graph and launched back to back between the device's events (as a program's
// graph runs its calls), `repeat` times; one run between events where the runs cannot be captured.
// Runs captured back to back into that graph (`runsPerGraph`, by default kRunsPerGraph: enough
// that the launch's own cost is a small share of each).
inline constexpr int kRunsPerGraph = 10;
using CallRun = std::function<Status(Stream)>;
StatusOr<double> timeRuns(const CallRun& run, int repeat, int runsPerGraph = kRunsPerGraph);

// Bytes a graph of runs reads from copies of a call's operands (OperandCopies), at least: over
// the L2 of an H100 (50 MiB) or H200 (60 MiB).
inline constexpr int64_t kColdBytes = int64_t(128) << 20;

// Fresh copies of a call's arguments (`bytes`), as many as read kColdBytes in all (at most
// kMaxCopies), and a workspace; each run takes the next copy, and a graph of count() runs reads
// each once. A program's calls read their weights from memory, not from L2: timed on one set of
// operands, run after run, a call would read them from L2.
inline constexpr int64_t kMaxCopies = 64;
class OperandCopies {
 public:
  static StatusOr<OperandCopies> make(const Driver& driver, const std::vector<int64_t>& bytes);
  // `call` on the next copy.
  Status run(const LibraryCall& call, Stream stream);
  int count() const { return static_cast<int>(copies_.size()); }

 private:
  std::vector<std::unique_ptr<Scratch>> copies_;
  std::unique_ptr<Scratch> workspace_;
  size_t next_ = 0;
};

// timeRuns of call.alone(withEpilogue) on fresh device buffers (their contents do not change a
// product's time): one set of them, hot in L2 after the first run, or (`cold`) OperandCopies.
StatusOr<double> timeAlone(const LibraryCall& call, bool withEpilogue, int repeat,
                           bool cold = false);

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
