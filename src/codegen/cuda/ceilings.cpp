// The cuda target's ceilings. See ceilings.h.
#include "codegen/cuda/ceilings.h"

#include <algorithm>
#include <map>

namespace kiln::codegen::cuda {
namespace {

// A copy of 512 MiB from one device buffer to another, best of 5: bytes read and written over
// the time (the rate a memory-bound kernel that reads and writes once can reach).
StatusOr<double> copyBandwidth(const Driver& drv) {
  const int64_t bytes = int64_t{512} << 20;
  DevicePtr a = 0, b = 0;
  Stream s = nullptr;
  Event start = nullptr, end = nullptr;
  auto timed = [&]() -> StatusOr<double> {
    KILN_ASSIGN_OR_RETURN(a, drv.allocate(bytes));
    KILN_ASSIGN_OR_RETURN(b, drv.allocate(bytes));
    KILN_ASSIGN_OR_RETURN(s, drv.createStream());
    KILN_ASSIGN_OR_RETURN(start, drv.createEvent());
    KILN_ASSIGN_OR_RETURN(end, drv.createEvent());
    KILN_RETURN_IF_ERROR(drv.copyOnDevice(b, a, bytes, s));  // warm-up
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
      KILN_RETURN_IF_ERROR(drv.record(start, s));
      KILN_RETURN_IF_ERROR(drv.copyOnDevice(b, a, bytes, s));
      KILN_RETURN_IF_ERROR(drv.record(end, s));
      KILN_ASSIGN_OR_RETURN(float ms, drv.elapsed(start, end));
      best = std::min(best, ms);
    }
    return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best) * 1e6);
  };
  StatusOr<double> gbs = timed();
  if (a) drv.free(a);
  if (b) drv.free(b);
  if (start) drv.destroyEvent(start);
  if (end) drv.destroyEvent(end);
  if (s) drv.destroyStream(s);
  return gbs;
}

// Copies of the sizes of `bytes` (read + written: a copy of half as many bytes), each timed by
// timeRuns (copies captured into one graph between events, the median over `repeat` launches):
// what a kernel of that size could reach, its launch and ramp included.
StatusOr<std::vector<double>> copiesOfSize(const Driver& drv, const std::vector<int64_t>& bytes,
                                           int repeat) {
  std::vector<double> out(bytes.size(), -1.0);
  const int64_t most = bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end()) / 2;
  if (most <= 0) return out;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Scratch> buffers, Scratch::make(drv, {most, most}, false));
  const DevicePtr from = buffers->args()[0], to = buffers->args()[1];
  std::map<int64_t, double> bySize;
  for (size_t k = 0; k < bytes.size(); ++k) {
    const int64_t half = bytes[k] / 2;
    if (half <= 0) continue;
    if (!bySize.count(half)) {
      KILN_ASSIGN_OR_RETURN(
          bySize[half],
          timeRuns([&](Stream s) { return drv.copyOnDevice(to, from, half, s); }, repeat));
    }
    out[k] = bySize[half];
  }
  return out;
}

}  // namespace

StatusOr<runtime::DeviceCeilings>
measureCeilings(const Driver& driver, const std::vector<std::vector<const LibraryCall*>>& calls,
                const std::vector<int64_t>& copyBytes, int repeat) {
  KILN_RETURN_IF_ERROR(driver.makeCurrent());
  runtime::DeviceCeilings c;
  KILN_ASSIGN_OR_RETURN(c.copyGBs, copyBandwidth(driver));
  KILN_ASSIGN_OR_RETURN(c.copyMs, copiesOfSize(driver, copyBytes, repeat));
  for (const auto& kernel : calls) {
    double bare = -1, same = -1, cold = -1;
    for (const LibraryCall* call : kernel) {
      if (!call) continue;
      KILN_ASSIGN_OR_RETURN(double t, timeAlone(*call, false, repeat));
      KILN_ASSIGN_OR_RETURN(double e, timeAlone(*call, true, repeat));
      KILN_ASSIGN_OR_RETURN(double m, timeAlone(*call, true, repeat, true));
      bare = std::max(bare, 0.0) + t;
      same = std::max(same, 0.0) + e;
      cold = std::max(cold, 0.0) + m;
    }
    c.aloneMs.push_back(bare);
    c.aloneEpilogueMs.push_back(same);
    c.aloneColdMs.push_back(cold);
  }
  return c;
}

}  // namespace kiln::codegen::cuda
