// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), so that everything but
// running code works on a machine with no driver or no GPU. One process-wide instance; the
// primary context of device 0 (CUDA_VISIBLE_DEVICES picks another).
#pragma once

#include <cstdint>
#include <string>

#include "support/status.h"

namespace kiln::codegen::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr
using Stream = void*;        // CUstream
using GpuFunction = void*;   // CUfunction
using GpuModule = void*;     // CUmodule
using Event = void*;         // CUevent
using GraphExec = void*;     // CUgraphExec

// The alignment of device buffers: cuMemAlloc's, and what cuBLASLt's algorithms assume of every
// matrix (a product given a less aligned pointer fails with CUBLAS_STATUS_INVALID_VALUE).
inline constexpr int64_t kCudaAlignment = 256;

struct DeviceInfo {
  std::string name;  // "NVIDIA H200"
  std::string arch;  // "sm_90"
  int sms = 0;       // multiprocessors
  int64_t memory = 0;
  int driverVersion = 0;  // 13000 for CUDA 13.0
};

class Driver {
 public:
  // The loaded driver with device 0's primary context current on the calling thread, or an error
  // that says why there is none (no libcuda.so.1, no device, ...).
  static StatusOr<const Driver*> get();
  const DeviceInfo& device() const { return device_; }

  // Makes the context current on the calling thread (each thread that calls the driver).
  Status makeCurrent() const;
  StatusOr<GpuModule> loadModule(const std::string& image) const;
  void unloadModule(GpuModule m) const;
  StatusOr<GpuFunction> function(GpuModule m, const std::string& name) const;
  // Registers, local and static shared bytes of a loaded function.
  StatusOr<int> registers(GpuFunction f) const;
  StatusOr<int> sharedBytes(GpuFunction f) const;
  StatusOr<int> localBytes(GpuFunction f) const;
  std::string describeFunction(GpuFunction f) const;  // "32 registers, 1024 B shared"
  Status launch(GpuFunction f, int64_t grid, int64_t block, Stream s, void** args) const;

  // An allocation of `bytes`; an error names the size asked for and the memory free.
  StatusOr<DevicePtr> allocate(int64_t bytes) const;
  void free(DevicePtr p) const;
  Status copyToDevice(DevicePtr dst, const void* src, int64_t bytes, Stream s) const;
  Status copyToHost(void* dst, DevicePtr src, int64_t bytes, Stream s) const;
  Status copyOnDevice(DevicePtr dst, DevicePtr src, int64_t bytes, Stream s) const;

  StatusOr<Stream> createStream() const;
  void destroyStream(Stream s) const;
  Status synchronize(Stream s) const;
  StatusOr<Event> createEvent() const;
  void destroyEvent(Event e) const;
  Status record(Event e, Stream s) const;
  // Under a capture (beginCapture): a node of the graph that records `e` when a launch of the
  // graph reaches it, so that events time the graph's work as it replays.
  Status recordInGraph(Event e, Stream s) const;
  // Work issued on `s` after this waits for what `e` recorded (no wait on the host).
  Status wait(Stream s, Event e) const;
  // Milliseconds between two recorded events (waits for the second).
  StatusOr<float> elapsed(Event start, Event end) const;

  // CUDA graphs: work issued on `s` between beginCapture and endCapture (by this thread) is
  // recorded, not run; endCapture returns it instantiated, to be launched any number of times.
  Status beginCapture(Stream s) const;
  StatusOr<GraphExec> endCapture(Stream s) const;
  // Ends a capture whose work was issued with status `issued`: the graph, or the first error
  // (the issue's, then the capture's), with no graph left behind.
  StatusOr<GraphExec> endCapture(Stream s, const Status& issued) const;
  Status launchGraph(GraphExec g, Stream s) const;
  void destroyGraph(GraphExec g) const;

  // The driver's message for a result code, prefixed by what failed.
  Status check(int result, const std::string& what) const;

  struct Api;  // the entry points (driver.cpp)

 private:
  Driver() = default;
  Api* api_ = nullptr;
  void* context_ = nullptr;  // CUcontext
  DeviceInfo device_;
  friend struct DriverLoader;
};

}  // namespace kiln::codegen::cuda
