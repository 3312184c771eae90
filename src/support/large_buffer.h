// Memory for large data that is written whole right after it is allocated (folded constants,
// the packed weights of library kernels): 64-byte aligned, and from 4 MiB on mapped with the
// advice MADV_HUGEPAGE, so that filling it faults once per 2 MiB instead of once per 4 KiB page.
// On the development machine's virtual machine a page fault costs about 10 us: filling 100 MB
// of fresh 4 KiB pages took 0.26 s, with huge pages 0.01 s (bench/results/cpu-history.md, "Compile
// time"). Where the kernel has no transparent huge pages the advice changes nothing.
#pragma once

#include <cstddef>
#include <memory>

namespace kiln {

// From this size on, memory is worth advising for huge pages (two of them at least, so that a
// block that does not start on a 2 MiB boundary still holds a whole one).
inline constexpr size_t kLargeBufferBytes = size_t(4) << 20;

// `bytes` bytes (at least one), uninitialised; the memory is released when the last owner goes.
// Throws std::bad_alloc when there is no memory.
std::shared_ptr<std::byte> allocateLarge(size_t bytes);

// Advises huge pages over the 2 MiB-aligned interior of [p, p + bytes) (no-op for less).
void adviseHugePages(void* p, size_t bytes);

}  // namespace kiln
