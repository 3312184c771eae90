// The thread pool: a queue of jobs; each job hands out chunks through an atomic counter.
#include "codegen/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace kiln::codegen::cpu {

// One parallelFor call. Chunks are claimed with `next` and counted done with `done`; the job
// leaves the queue when its last chunk is claimed, and its caller waits for `done`.
struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t numChunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable finished;
};

ThreadPool::ThreadPool(int numThreads) {
  if (numThreads <= 0) numThreads = static_cast<int>(std::thread::hardware_concurrency());
  numThreads_ = std::max(1, numThreads);
  workers_.reserve(static_cast<size_t>(numThreads_ - 1));
  for (int i = 1; i < numThreads_; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// Claims and runs one chunk of `job`; false when none was left to claim.
bool ThreadPool::runOneChunk(Job& job) {
  int64_t c = job.next.fetch_add(1);
  if (c >= job.numChunks) return false;
  int64_t begin = c * job.chunk;
  int64_t end = std::min(job.n, begin + job.chunk);
  (*job.fn)(begin, end);
  if (job.done.fetch_add(1) + 1 == job.numChunks) {
    std::lock_guard<std::mutex> lock(job.mu);
    job.finished.notify_all();
  }
  return true;
}

void ThreadPool::workerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and no work left
      job = jobs_.front();
      // A job whose chunks are all claimed needs no more workers.
      if (job->next.load() >= job->numChunks) {
        jobs_.pop_front();
        continue;
      }
    }
    while (runOneChunk(*job)) {}
  }
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (numThreads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven chunks without much claiming overhead.
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->numChunks = std::min<int64_t>(n, int64_t(numThreads_) * 4);
  job->chunk = (n + job->numChunks - 1) / job->numChunks;
  job->numChunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  wake_.notify_all();
  while (runOneChunk(*job)) {}
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
  }
  std::unique_lock<std::mutex> lock(job->mu);
  job->finished.wait(lock, [&] { return job->done.load() == job->numChunks; });
}

}  // namespace kiln::codegen::cpu
