// The cuda target's ceilings. See ceilings.h.
#include "codegen/cuda/ceilings.h"

#include <algorithm>

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

}  // namespace

StatusOr<runtime::DeviceCeilings>
measureCeilings(const Driver& driver,
                const std::vector<std::vector<std::unique_ptr<LibraryCall>>>& calls, int repeat) {
  KILN_RETURN_IF_ERROR(driver.makeCurrent());
  runtime::DeviceCeilings c;
  KILN_ASSIGN_OR_RETURN(c.copyGBs, copyBandwidth(driver));
  for (const auto& kernel : calls) {
    double ms = -1;
    for (const std::unique_ptr<LibraryCall>& call : kernel) {
      if (!call) continue;
      KILN_ASSIGN_OR_RETURN(double t, timeAlone(*call, repeat));
      ms = std::max(ms, 0.0) + t;
    }
    c.aloneMs.push_back(ms);
  }
  return c;
}

}  // namespace kiln::codegen::cuda
