// The thread pool that owns every core fluidlite computes on: kernel loops (im2col, batch norm, the
// conv batch split) and every GEMM (kernels/helpers/blas.h splits large ones into single-threaded
// OpenBLAS calls) run on it, and OpenBLAS itself is set to one thread when the pool starts. One owner
// means no second set of threads spinning on the same cores: with OpenBLAS threading its own GEMMs
// beside this pool, ResNet-20's convolutions ran 2.4x slower on 2 cores.
// Size: FLUIDLITE_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the CPUs this process may run on;
// core.set_num_threads(n) changes it at run time. Jobs never nest: a ParallelFor issued from inside a
// job, while another thread's job runs, or in a forked child (which has no workers) executes serially
// on its caller.
#pragma once
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

namespace fl {

class ThreadPool {
 public:
  static ThreadPool& Instance() {
    static ThreadPool* pool = Create();  // never destroyed: detached workers may outlive static destructors
    return *pool;
  }
  static int DefaultSize();

  // Threads jobs may use from now on (the caller included), starting workers if there are too few.
  void SetSize(int threads);

  int Size() const { return size_.load(); }

  static constexpr int kMaxThreads = 256;

  // Runs f(part) for part in [0, parts) with parts <= Size(); part 0 on the caller. Returns false (having
  // run nothing) if the pool is busy, so the caller falls back to a serial loop. An exception thrown by
  // any part (an FL_ENFORCE inside a job) is rethrown here once every part has finished, so it reaches
  // Python as EnforceNotMet instead of terminating a worker thread or leaving workers on a dead job.
  // Parts are claimed, not assigned: the caller and the woken workers take the next unclaimed part until
  // none is left, so a worker the OS has not scheduled (another process, or a DataLoader thread, holds its
  // core) leaves its part to the caller instead of stalling the job; the caller waits only for parts a
  // worker has already started.
  bool Run(int parts, const std::function<void(int)>& f);

 private:
  explicit ThreadPool(int threads);
  static ThreadPool* Create();  // sets OpenBLAS to one thread, then starts a pool of DefaultSize()

  static std::chrono::microseconds SpinTime();
  static constexpr int kDefaultSpinUs = 200;
  static void Pause(int64_t spins);
  void RunPart(const std::function<void(int)>& f, int part, uint32_t job);
  void HelpWithParts();  // a worker: run parts of the current job while any is unclaimed
  void Loop(int index, uint64_t seen);

  // The claim word of the running job: job id (32 bits) | parts (16) | next unclaimed part (16). A worker
  // claims with a compare-and-swap on the whole word, so a late worker never takes a part of a job that
  // has ended, and the job's function (job_) is read only once a part of that very job is claimed (the
  // job cannot end before that part is done).
  static constexpr uint64_t kPartBits = 16, kPartMask = (uint64_t(1) << kPartBits) - 1;
  std::atomic<uint64_t> claim_{0};
  const std::function<void(int)>* job_ = nullptr;
  uint32_t job_id_ = 0;

  struct alignas(64) Slot {  // one cache line per worker: its wake-up signal
    std::atomic<uint64_t> generation{0};
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
