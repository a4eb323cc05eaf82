// The thread pool that owns every core fluidlite computes on: kernel loops (im2col, batch norm, the
// conv batch split) and every GEMM (helpers/blas.h splits large ones into single-threaded OpenBLAS
// calls) run on it, and OpenBLAS itself is set to one thread when the pool starts. One owner means no
// second set of threads spinning on the same cores: with OpenBLAS threading its own GEMMs beside this
// pool, ResNet-20's convolutions ran 2.4x slower on 2 cores.
// Size: FLUIDLITE_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the CPUs this process may run on;
// core.set_num_threads(n) changes it at run time. Jobs never nest: a ParallelFor issued from inside a
// job, while another thread's job runs, or in a forked child (which has no workers) executes serially
// on its caller.
#pragma once
#include <cblas.h>
#include <sched.h>
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
      scipy_openblas_set_num_threads(1);
      return new ThreadPool(DefaultSize());
    }();
    return *pool;
  }

  static int DefaultSize() {
    for (const char* name : {"FLUIDLITE_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
      const char* env = std::getenv(name);
      if (env && std::atoi(env) > 0) return std::atoi(env);
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
  }

  // Threads jobs may use from now on (the caller included), starting workers if there are too few.
  void SetSize(int threads) {
    threads = std::max(1, threads);
    bool idle = false;
    while (!busy_.compare_exchange_weak(idle, true)) {  // wait for a running job to finish
      idle = false;
      std::this_thread::yield();
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      if (getpid() == pid_)
        while (static_cast<int>(workers_) + 1 < threads) {
          const int index = static_cast<int>(++workers_);
          std::thread([this, index] { Loop(index); }).detach();
        }
      size_ = threads;
    }
    busy_.store(false);
  }

  int Size() const { return size_.load(); }

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
  explicit ThreadPool(int threads) : pid_(getpid()) { SetSize(threads); }

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

  size_t workers_ = 0;  // started worker threads (detached); index i runs part i of a job
  std::atomic<int> size_{1};
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
