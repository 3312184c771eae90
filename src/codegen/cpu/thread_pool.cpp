// The thread pool: each parallelFor is an OpenMP parallel region whose threads claim chunks
// through an atomic counter.
#include "codegen/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <thread>

// libgomp's entry for `#pragma omp parallel num_threads(n)` (declared here so that no OpenMP
// compile flags are needed; libgomp is linked for oneDNN already). It runs fn(data) on a team of
// n threads, the caller included, and returns when all have returned.
extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned numThreads, unsigned flags);

// ThreadSanitizer does not see libgomp's synchronisation (libgomp is not instrumented), so the
// edges it provides are stated: the region's start orders the caller's writes before the team's
// work, and its end orders the team's work before the caller continues.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#endif
#ifdef KILN_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define KILN_TSAN_ACQUIRE(p) __tsan_acquire(p)
#define KILN_TSAN_RELEASE(p) __tsan_release(p)
#else
#define KILN_TSAN_ACQUIRE(p) ((void)(p))
#define KILN_TSAN_RELEASE(p) ((void)(p))
#endif

namespace kiln::codegen::cpu {
namespace {

struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t numChunks = 0;
  std::atomic<int64_t> next{0};
};

// The body every team thread runs: claim chunks until none is left.
void runChunks(void* data) {
  Job& job = *static_cast<Job*>(data);
  KILN_TSAN_ACQUIRE(&job);
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.numChunks) {
      KILN_TSAN_RELEASE(&job);
      return;
    }
    int64_t begin = c * job.chunk;
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
  }
}

}  // namespace

int threadsFor(int requested) {
  if (requested <= 0) requested = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, requested);
}

ThreadPool::ThreadPool(int numThreads) : numThreads_(threadsFor(numThreads)) {}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  if (numThreads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven chunks without much claiming overhead.
  Job job;
  job.fn = &fn;
  job.n = n;
  job.numChunks = std::min<int64_t>(n, int64_t(numThreads_) * 4);
  job.chunk = (n + job.numChunks - 1) / job.numChunks;
  job.numChunks = (n + job.chunk - 1) / job.chunk;
  auto threads = static_cast<unsigned>(std::min<int64_t>(numThreads_, job.numChunks));
  KILN_TSAN_RELEASE(&job);
  GOMP_parallel(&runChunks, &job, threads, 0);
  KILN_TSAN_ACQUIRE(&job);
}

}  // namespace kiln::codegen::cpu
