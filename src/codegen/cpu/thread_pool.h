// Kiln's thread pool for the parallel loops of CPU kernels.
//
// A pool of N threads is N-1 worker threads plus the thread that calls parallelFor, which works
// on its own loop too. parallelFor(n, fn) splits [0, n) into contiguous chunks and calls
// fn(begin, end) once per chunk, on any of the N threads, and returns when every chunk is done.
// Calls are independent: several threads may call parallelFor on one pool at once, and fn may
// itself call parallelFor (the calling thread always makes progress on its own loop, so nesting
// cannot deadlock). A pool of 1 thread runs fn(0, n) inline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::codegen::cpu {

class ThreadPool {
 public:
  // numThreads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int numThreads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int numThreads() const { return numThreads_; }

  // Calls fn(begin, end) over chunks covering [0, n) exactly once; returns when all are done.
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  void workerLoop();
  static bool runOneChunk(Job& job);

  int numThreads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with chunks left to claim
  bool stopping_ = false;
};

}  // namespace kiln::codegen::cpu
