#include "support/large_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <sys/mman.h>

namespace kiln {
namespace {

constexpr uintptr_t kHuge = uintptr_t(2) << 20;

}  // namespace

void adviseHugePages(void* p, size_t bytes) {
  uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

std::shared_ptr<std::byte> allocateLarge(size_t bytes) {
  if (bytes < kLargeBufferBytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0));
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                      [](std::byte* q) { std::free(q); });
  }
  // Mapped with a huge page of slack so that the block starts on a 2 MiB boundary.
  size_t length = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;
  void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* start =
      reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1));
  adviseHugePages(start, (bytes + kHuge - 1) / kHuge * kHuge);
  return std::shared_ptr<std::byte>(start, [m, length](std::byte*) { ::munmap(m, length); });
}

}  // namespace kiln
