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
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
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
    threads = std::min(std::max(1, threads), kMaxThreads);
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
          // The slot's generation now, read before the thread starts: a job published while it starts
          // up must still count as new to it.
          const uint64_t start = slots_[index].generation.load();
          std::thread([this, index, start] { Loop(index, start); }).detach();
        }
      size_ = threads;
    }
    busy_.store(false);
  }

  int Size() const { return size_.load(); }

  static constexpr int kMaxThreads = 256;

  // Runs f(part) for part in [0, parts) with parts <= Size(); part 0 on the caller. Returns false (having
  // run nothing) if the pool is busy, so the caller falls back to a serial loop. An exception thrown by
  // any part (an FL_ENFORCE inside a job) is rethrown here once every part has finished, so it reaches
  // Python as EnforceNotMet instead of terminating a worker thread or leaving workers on a dead job.
  bool Run(int parts, const std::function<void(int)>& f) {
    bool idle = false;
    if (getpid() != pid_ || !busy_.compare_exchange_strong(idle, true)) return false;
    pending_.store(parts - 1);
    for (int i = 1; i < parts; ++i) {  // each worker of the job gets its own slot: no stale reads
      slots_[i].job = &f;
      slots_[i].generation.fetch_add(1);  // publishes `job` to the worker
    }
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> l(mu_);
      cv_.notify_all();
    }
    RunPart(f, 0);
    for (int64_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) Pause(spins);
    std::exception_ptr error;
    std::swap(error, error_);
    busy_.store(false);
    if (error) std::rethrow_exception(error);
    return true;
  }

 private:
  explicit ThreadPool(int threads) : pid_(getpid()) { SetSize(threads); }

  // Workers spin this long for the next job before sleeping (FLUIDLITE_SPIN_US, like OpenMP's
  // KMP_BLOCKTIME): a condition-variable wake-up costs tens of microseconds here, as long as a whole
  // batch_norm over a 2 MB tensor, so back-to-back parallel ops should find their workers awake.
  static std::chrono::microseconds SpinTime() {
    static const std::chrono::microseconds spin{[] {
      const char* env = std::getenv("FLUIDLITE_SPIN_US");
      return env && std::atoi(env) >= 0 ? std::atoi(env) : kDefaultSpinUs;
    }()};
    return spin;
  }
  static constexpr int kDefaultSpinUs = 200;

  static void Pause(int64_t spins) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (spins > (int64_t(1) << 16)) std::this_thread::yield();  // oversubscribed: let others run
  }

  // f(part), keeping the job's first exception for Run to rethrow.
  void RunPart(const std::function<void(int)>& f, int part) {
    try {
      f(part);
    } catch (...) {
      std::lock_guard<std::mutex> l(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void Loop(int index, uint64_t seen) {
    Slot& slot = slots_[index];
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + SpinTime();
      for (int64_t spins = 0; slot.generation.load(std::memory_order_acquire) == seen; ++spins) {
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() > until) {
          std::unique_lock<std::mutex> l(mu_);
          sleepers_.fetch_add(1);
          cv_.wait(l, [&] { return slot.generation.load() != seen; });
          sleepers_.fetch_sub(1);
          break;
        }
        Pause(0);
      }
      seen = slot.generation.load(std::memory_order_acquire);
      RunPart(*slot.job, index);
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  struct alignas(64) Slot {  // one cache line per worker
    std::atomic<uint64_t> generation{0};
    const std::function<void(int)>* job = nullptr;
  };

  size_t workers_ = 0;  // started worker threads (detached); index i runs part i of a job
  std::atomic<int> size_{1};
  const pid_t pid_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Slot slots_[kMaxThreads];
  std::atomic<int> pending_{0}, sleepers_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;  // the running job's first exception
};

// Elementwise loops (activations, elementwise ops, batch norm, pooling, sum) go parallel from this many
// elements per thread: below it a second thread costs more than it saves on this machine.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;

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
