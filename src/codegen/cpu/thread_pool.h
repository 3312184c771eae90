// Kiln's thread pool for the parallel loops of CPU kernels.
//
// parallelFor(n, fn) splits [0, n) into contiguous chunks and calls fn(begin, end) once per
// chunk, on any of the pool's N threads (the calling thread among them), and returns when every
// chunk is done. The threads are an OpenMP team (libgomp's GOMP_parallel): the same threads that
// run oneDNN's library calls, so a model alternating Kiln loops and library calls keeps N
// threads busy instead of handing work between two pools (measured on the transformer models at
// 2 threads: see docs/codegen.md, "Threads"). Team threads spin briefly after a region before
// they sleep, so back-to-back kernels start without a wake-up.
// Calls are independent: several threads may call parallelFor on one pool at once (each leads
// its own team), and fn may itself call parallelFor (a nested region runs on the calling thread,
// as OpenMP runs nested regions by default). A pool of 1 thread runs fn(0, n) inline.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::codegen::cpu {

class ThreadPool {
 public:
  // numThreads <= 0 means std::thread::hardware_concurrency() (threadsFor).
  explicit ThreadPool(int numThreads = 0);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int numThreads() const { return numThreads_; }

  // Calls fn(begin, end) over chunks covering [0, n) exactly once; returns when all are done.
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) const;

 private:
  int numThreads_ = 1;
};

// The threads a pool of `requested` runs: every hardware thread for requested <= 0, at least 1.
int threadsFor(int requested);

}  // namespace kiln::codegen::cpu
