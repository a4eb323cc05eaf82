// ParallelFor over a small persistent thread pool, for kernel loops outside BLAS (im2col, depthwise
// convolution). The pool has as many threads as OpenBLAS uses (OPENBLAS_NUM_THREADS, default: the
// cores), so OPENBLAS_NUM_THREADS=1 makes every kernel single-threaded; FLUIDLITE_NUM_THREADS overrides
// the pool size alone. Jobs never nest: a ParallelFor
// issued from inside a job, while another thread's job runs, or in a forked child (which has no
// workers) executes serially on its caller.
#pragma once
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fl {

class ThreadPool {
 public:
  static ThreadPool& Instance() {
    static ThreadPool* pool = [] {  // never destroyed: detached workers may outlive static destructors
      const char* env = std::getenv("FLUIDLITE_NUM_THREADS");
      const int n = env && std::atoi(env) > 0 ? std::atoi(env) : scipy_openblas_get_num_threads();
      return new ThreadPool(std::max(1, n));
    }();
    return *pool;
  }

  int Size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs f(part) for part in [0, parts) with parts <= Size(); part 0 on the caller. Returns false (having
  // run nothing) if the pool is busy, so the caller falls back to a serial loop.
  bool Run(int parts, const std::function<void(int)>& f) {
    bool idle = false;
    if (getpid() != pid_ || !busy_.compare_exchange_strong(idle, true)) return false;
    {
      std::lock_guard<std::mutex> l(mu_);
      job_ = &f;
      parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    cv_.notify_all();
    f(0);
    std::unique_lock<std::mutex> l(mu_);
    done_.wait(l, [&] { return pending_ == 0; });
    job_ = nullptr;
    busy_.store(false);
    return true;
  }

 private:
  explicit ThreadPool(int threads) : pid_(getpid()) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { Loop(i); });
    for (auto& t : workers_) t.detach();
  }

  void Loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= parts_) continue;
      const std::function<void(int)>* f = job_;
      l.unlock();
      (*f)(index);
      l.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  const pid_t pid_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;
  std::condition_variable cv_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int parts_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
};

// f(begin, end) over contiguous slices of [0, n), in parallel when n >= 2 * grain (items per thread at
// least `grain`, so tiny loops stay on the caller).
template <typename F>
void ParallelFor(int64_t n, int64_t grain, F f) {
  ThreadPool& pool = ThreadPool::Instance();
  const int parts = static_cast<int>(std::min<int64_t>(pool.Size(), n / std::max<int64_t>(1, grain)));
  if (parts >= 2) {
    const std::function<void(int)> job = [&](int p) { f(n * p / parts, n * (p + 1) / parts); };
    if (pool.Run(parts, job)) return;
  }
  if (n > 0) f(0, n);
}

}  // namespace fl
