// The thread pool that owns every core fluidlite computes on: kernel loops (im2col, batch norm, the
// conv batch split) and every GEMM (kernels/helpers/blas.cc splits large ones into single-threaded
// OpenBLAS calls) run on it, and OpenBLAS itself is set to one thread when the pool starts. One owner
// means no second set of threads spinning on the same cores: with OpenBLAS threading its own GEMMs
// beside this pool, ResNet-20's convolutions ran 2.4x slower on 2 cores.
// Size: FLUIDLITE_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the CPUs this process may run on;
// core.set_num_threads(n) changes it at run time. Jobs never nest: a ParallelFor issued from inside a
// job, while another thread's job runs, or in a forked child (which has no workers) executes serially
// on its caller.
// Under load (other processes hold cores) the pool holds up: a job is cut into chunks that any thread
// takes, the caller included, so a worker the OS has not scheduled leaves its share to the caller; the
// caller sleeps instead of spinning when a worker that took a chunk is off the CPU; and the pool measures
// what its parallel jobs gain over the caller alone and, when they stop paying, runs jobs on the caller
// only, probing now and then whether the workers pay again (thread_pool.cc, csrc/pool_policy.h).
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

  int Size() const { return size_.load(std::memory_order_relaxed); }

  static constexpr int kMaxThreads = 256;
  static constexpr int kMaxChunks = 4096;  // chunks of one job (the claim word has 16 bits for them)

  // How many chunks to cut a job into that could be cut into at most `max_chunks` useful pieces: at most
  // Size() x the chunks per thread (FLUIDLITE_POOL_CHUNKS), and 1 inside a job (jobs never nest). It depends on
  // nothing else, not on the machine's load: a job's chunks, hence a GEMM's tiles and its result's bits, are the
  // same for a given shape and thread count however the chunks are then run.
  int Chunks(int64_t max_chunks) const;

  // Runs f(chunk) for every chunk in [0, chunks) exactly once, returning when all are done. In parallel: the
  // chunks are claimed, not assigned, so the caller and the woken workers take the next unclaimed chunk until
  // none is left, a worker the OS has not scheduled leaves its chunks to the caller, and the caller waits only
  // for chunks a worker has already started. On the caller alone, in chunk order: when the pool has backed off
  // (parallel jobs stopped paying: the machine is oversubscribed), while another thread's job runs, inside a job,
  // and in a forked child (which has no workers). An exception thrown by any chunk (an FL_ENFORCE inside a job)
  // is rethrown here once every chunk has finished, so it reaches Python as EnforceNotMet instead of terminating
  // a worker thread or leaving workers on a dead job.
  void Run(int chunks, const std::function<void(int)>& f);

  // What the pool did since the last ResetStats (core.thread_pool_stats()).
  struct Stats {
    int64_t jobs = 0;           // jobs run in parallel
    int64_t chunks = 0;         // their chunks
    int64_t worker_chunks = 0;  // of which the workers ran
    int64_t serial_jobs = 0;    // jobs whose chunks all ran on the caller: backed off, busy or nested
    int64_t caller_sleeps = 0;  // parallel jobs whose caller slept waiting for a worker's chunk
    int64_t wait_ns = 0;        // time callers waited for workers' chunks after their own
    int64_t backoffs = 0, probes = 0, resumes = 0;
    bool backed_off = false;
    double gain = 0;  // the last window's measured gain (serial estimate / wall time)
    int chunks_per_thread = 0;
    int backoff = 1;  // 0: never back off, 1: back off when parallel jobs stop paying, 2: always on the caller
    int64_t spin_us = 0;
  };
  Stats GetStats() const;
  void ResetStats();
  // Test and benchmark hooks (core.thread_pool_options): < 0 leaves a setting as it is.
  void SetOptions(int chunks_per_thread, int backoff, int64_t spin_us);

  struct Impl;

 private:
  explicit ThreadPool(int threads);
  static ThreadPool* Create();  // sets OpenBLAS to one thread, then starts a pool of DefaultSize()

  std::atomic<int> size_{1};
  Impl* impl_;
};

// Elementwise loops (activations, elementwise ops, batch norm, pooling, sum) go parallel from this many
// elements per thread: below it a second thread costs more than it saves on this machine.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;

// f(begin, end) over contiguous slices of [0, n) that together cover it once, in parallel when n >= 2 * grain
// (slices at least `grain` items, so tiny loops stay on the caller). The slices may be more than the threads
// (ThreadPool::Chunks) and may all run on the caller: f must not assume one slice per thread.
template <typename F>
void ParallelFor(int64_t n, int64_t grain, F f) {
  ThreadPool& pool = ThreadPool::Instance();
  const int chunks = pool.Size() >= 2 && n >= 2 ? pool.Chunks(n / std::max<int64_t>(1, grain)) : 1;
  if (chunks >= 2) {
    pool.Run(chunks, [&](int p) { f(n * p / chunks, n * (p + 1) / chunks); });
  } else if (n > 0) {
    f(0, n);
  }
}

}  // namespace fl
