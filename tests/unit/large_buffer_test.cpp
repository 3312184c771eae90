// allocateLarge: aligned, writable memory of the size asked for, released with its last owner;
// from 4 MiB on, mapped with the huge-page advice (the VmFlags of its mapping say "hg").
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/mman.h>

#include "support/large_buffer.h"

namespace kiln {
namespace {

// The VmFlags line of the mapping of this process that contains `p`, or "" if none does.
std::string vmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-' &&
        line.find(':') > line.find(' ')) {
      inside = begin <= a && a < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(LargeBuffer, AlignedWritableAndAdvised) {
  for (size_t bytes :
       {size_t(0), size_t(1), size_t(1000), size_t(4) << 20, (size_t(9) << 20) + 3}) {
    std::shared_ptr<std::byte> p = allocateLarge(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << bytes;
    std::memset(p.get(), 0x5a, bytes);
    if (bytes > 0) {
      EXPECT_EQ(p.get()[bytes - 1], std::byte{0x5a});
    }
  }
  std::shared_ptr<std::byte> large = allocateLarge(size_t(8) << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.get()) % (size_t(2) << 20), 0u);
  // Whether this kernel takes the advice at all: on a page-aligned mapping of our own.
  void* probe =
      ::mmap(nullptr, size_t(4) << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  bool thp = ::madvise(probe, size_t(4) << 20, MADV_HUGEPAGE) == 0;
  ::munmap(probe, size_t(4) << 20);
  if (!thp) GTEST_SKIP() << "this kernel has no transparent huge pages (madvise refused)";
  std::string flags = vmFlagsAt(large.get());
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

}  // namespace
}  // namespace kiln
