// The kiln tool's global operator new: blocks of at least 4 MiB are marked for transparent huge
// pages (madvise MADV_HUGEPAGE over their 2 MiB-aligned interior) before anything touches them.
// Kiln's own large buffers come from allocateLarge (support/large_buffer.h); this covers the
// rest of a compile's copies of the weights, chiefly the raw data the ONNX parser allocates.
// Each 4 KiB page of fresh memory costs a page fault on first touch; on virtual machines whose
// page faults are slow (about 10 us each on the development machine, docs/benchmarks.md) that
// was most of a cold compile. With huge pages
// one fault maps 2 MiB. Everything else is malloc and free, as the default operator new does;
// memory is returned the same way (glibc unmaps a large block whatever its pages are). This
// is the tool's choice of allocator policy: the libraries (libkiln, the C API) do not replace
// operator new for the programs that embed them.
#include <cstdlib>
#include <new>

#include "support/large_buffer.h"

namespace {

void* allocate(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (n >= kiln::kLargeBufferBytes) kiln::adviseHugePages(p, n);
  return p;
}

}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
