#include "thread_pool.h"

#include <cblas.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "enforce.h"
#include "parse_int.h"
#include "pool_policy.h"
#include "profiler.h"

namespace fl {

namespace {

int64_t ClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sleeps while *word == expected (a spurious or early return is fine: callers re-check in a loop).
void FutexWait(std::atomic<int>* word, int expected) {
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "futex word");
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void FutexWake(std::atomic<int>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int EnvInt(const char* name, int lo, int hi, int fallback) {
  const char* env = std::getenv(name);
  if (!env) return fallback;
  long n = 0;
  if (ParseInt(env, lo, hi, &n)) return static_cast<int>(n);
  std::fprintf(stderr, "fluidlite: ignoring %s='%s': not an integer in [%d, %d]; using %d\n", name, env, lo, hi,
               fallback);
  return fallback;
}

// Chunks per thread a job is cut into where its work allows (FLUIDLITE_POOL_CHUNKS): more chunks than threads
// let a worker that wakes late still take a share and bound how long a descheduled worker holding a chunk
// stalls the caller; each chunk costs a claim and, for a GEMM, one more OpenBLAS call.
constexpr int kDefaultChunksPerThread = 4;
// Workers spin this long for the next job before sleeping (FLUIDLITE_SPIN_US, like OpenMP's KMP_BLOCKTIME): a
// futex wake-up costs tens of microseconds here, as long as a whole batch_norm over a 2 MB tensor, so
// back-to-back parallel ops should find their workers awake. A spinning worker yields its core every
// kYieldEveryNs, so on an oversubscribed machine it gives way to threads that have work.
constexpr int kDefaultSpinUs = 200;
constexpr int64_t kYieldEveryNs = 20'000;
// The caller, its own chunks done, spins for the workers' last chunks at most this long (and about two of its
// own chunks' time) before it sleeps: a worker that holds a chunk but is off the CPU then gets the caller's
// core instead of the caller spinning on it.
constexpr int64_t kMaxCallerSpinNs = 100'000, kMinCallerSpinNs = 2'000;

thread_local bool tl_in_job = false;  // this thread runs a chunk of a job (or is a job's caller)

struct InJob {
  bool saved = tl_in_job;
  InJob() { tl_in_job = true; }
  ~InJob() { tl_in_job = saved; }
};

}  // namespace

struct ThreadPool::Impl {
  explicit Impl(pid_t p) : pid(p) {}

  // The claim word of the running job: job id (32 bits) | chunks (16) | next unclaimed chunk (16). A worker
  // claims with a compare-and-swap on the whole word, so a late worker never takes a chunk of a job that has
  // ended, and the job's function (job) is read only once a chunk of that very job is claimed (the job cannot
  // end before that chunk is done).
  static constexpr uint64_t kChunkBits = 16, kChunkMask = (uint64_t(1) << kChunkBits) - 1;
  std::atomic<uint64_t> claim{0};
  const std::function<void(int)>* job = nullptr;
  uint32_t job_id = 0;

  struct alignas(64) Slot {  // one cache line per worker: its wake-up signal (a futex word)
    std::atomic<int> generation{0};
    std::atomic<int> sleeping{0};
  };

  const pid_t pid;
  size_t workers = 0;  // started worker threads (detached), slots 1..workers
  std::atomic<bool> busy{false};
  std::mutex mu;
  Slot slots[kMaxThreads];
  alignas(64) std::atomic<int> pending{0};  // chunks of the running job not yet finished (a futex word)
  std::atomic<int> caller_waiting{0};       // the caller sleeps on `pending`
  std::mutex error_mu;
  std::exception_ptr error;  // the running job's first exception

  // The back-off: `policy` changes only inside Run (under `busy`); Chunks reads what Run published.
  PoolPolicy policy;
  alignas(64) std::atomic<bool> serial{false};
  std::atomic<int64_t> next_probe_ns{0};
  mutable std::atomic<int64_t> serial_jobs{0};

  std::atomic<int> chunks_per_thread{EnvInt("FLUIDLITE_POOL_CHUNKS", 1, 64, kDefaultChunksPerThread)};
  std::atomic<int> backoff{EnvInt("FLUIDLITE_POOL_BACKOFF", 0, 2, 1)};  // Stats::backoff
  std::atomic<int64_t> spin_ns{int64_t(EnvInt("FLUIDLITE_SPIN_US", 0, 1000000, kDefaultSpinUs)) * 1000};

  std::atomic<int64_t> jobs{0}, chunks{0}, worker_chunks{0}, caller_sleeps{0}, wait_ns{0};

  void RunChunk(const std::function<void(int)>& f, int chunk, uint32_t id);
  void FinishChunk() {
    if (pending.fetch_sub(1) == 1 && caller_waiting.load()) FutexWake(&pending, 1);
  }
  void HelpWithChunks();  // a worker: run chunks of the current job while any is unclaimed
  void RunSerial(int chunks, const std::function<void(int)>& f);
  void Loop(int index, int seen);
  void Publish() {  // what Chunks reads of the policy (under `busy`)
    const int mode = backoff.load(std::memory_order_relaxed);
    serial.store(mode == 2 || (mode == 1 && policy.serial()), std::memory_order_relaxed);
    next_probe_ns.store(mode == 2 ? INT64_MAX : policy.next_probe_ns(), std::memory_order_relaxed);
  }
};

ThreadPool* ThreadPool::Create() {
  scipy_openblas_set_num_threads(1);
  return new ThreadPool(DefaultSize());
}

int ThreadPool::DefaultSize() {
  int fallback = 0;
  if (const char* env = std::getenv("OPENBLAS_NUM_THREADS")) fallback = std::max(0, std::atoi(env));
  cpu_set_t set;
  if (fallback == 0 && sched_getaffinity(0, sizeof(set), &set) == 0) fallback = std::max(1, CPU_COUNT(&set));
  if (fallback == 0) fallback = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* env = std::getenv("FLUIDLITE_NUM_THREADS")) {
    // Ours: a value that is not a whole positive number is reported, not silently replaced.
    long n = 0;
    if (ParseInt(env, 1, kMaxThreads, &n)) return static_cast<int>(n);
    std::fprintf(stderr,
                 "fluidlite: ignoring FLUIDLITE_NUM_THREADS='%s': not an integer in [1, %d]; using %d threads\n", env,
                 kMaxThreads, fallback);
  }
  return fallback;
}

ThreadPool::ThreadPool(int threads) : impl_(new Impl(getpid())) { SetSize(threads); }

void ThreadPool::SetSize(int threads) {
  Impl& s = *impl_;
  threads = std::min(std::max(1, threads), kMaxThreads);
  bool idle = false;
  while (!s.busy.compare_exchange_weak(idle, true)) {  // wait for a running job to finish
    idle = false;
    std::this_thread::yield();
  }
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (getpid() == s.pid)
      while (static_cast<int>(s.workers) + 1 < threads) {
        const int index = static_cast<int>(++s.workers);
        // The slot's generation now, read before the thread starts: a job published while it starts
        // up must still count as new to it.
        const int start = s.slots[index].generation.load();
        Impl* impl = impl_;
        std::thread([impl, index, start] { impl->Loop(index, start); }).detach();
      }
    size_ = threads;
  }
  s.busy.store(false);
}

int ThreadPool::Chunks(int64_t max_chunks) const {
  const int threads = Size();
  if (max_chunks < 2 || threads < 2 || tl_in_job) return 1;
  const int64_t most = int64_t(threads) * impl_->chunks_per_thread.load(std::memory_order_relaxed);
  return static_cast<int>(std::min<int64_t>({max_chunks, most, kMaxChunks}));
}

void ThreadPool::Impl::RunSerial(int chunks, const std::function<void(int)>& f) {
  serial_jobs.fetch_add(1, std::memory_order_relaxed);
  InJob in_job;
  for (int c = 0; c < chunks; ++c) f(c);
}

void ThreadPool::Run(int chunks, const std::function<void(int)>& f) {
  Impl& s = *impl_;
  chunks = std::min(chunks, kMaxChunks);
  if (chunks < 1) return;
  if (chunks == 1) {
    InJob in_job;
    return f(0);
  }
  if (tl_in_job || getpid() != s.pid) return s.RunSerial(chunks, f);
  // Backed off and no probe due: the caller alone, without touching the pool's shared state.
  if (s.serial.load(std::memory_order_relaxed) && ClockNs() < s.next_probe_ns.load(std::memory_order_relaxed))
    return s.RunSerial(chunks, f);
  bool idle = false;
  if (!s.busy.compare_exchange_strong(idle, true)) return s.RunSerial(chunks, f);  // another thread's job runs
  const int64_t t0 = ClockNs();
  const int mode = s.backoff.load(std::memory_order_relaxed);
  if (mode == 2 || (!s.policy.BeginJob(t0) && mode == 1)) {
    // Backed off since this caller looked (another thread's job measured it): the caller alone.
    s.Publish();
    s.busy.store(false);
    return s.RunSerial(chunks, f);
  }
  InJob in_job;
  const int helpers = std::min<int>(std::min(chunks, Size()) - 1, static_cast<int>(s.workers));
  s.pending.store(chunks);
  s.job = &f;
  const uint32_t id = ++s.job_id;
  // The profiler sees the job on the caller and every chunk on the thread that ran it (linked by the job id), so
  // the report can show each op's parallel efficiency and the time cores sat idle.
  RecordEvent job_event("ThreadPool::job", "ThreadPool");
  if (job_event.active()) {
    thread_local int cached_chunks = 0, cached_threads = 0;  // a job's args repeat: intern them once
    thread_local const char* cached_args = nullptr;
    if (!cached_args || cached_chunks != chunks || cached_threads != helpers + 1) {
      cached_chunks = chunks;
      cached_threads = helpers + 1;
      cached_args = Intern(Str("\"parts\":", chunks, ",\"threads\":", cached_threads));
    }
    job_event.SetArgs(cached_args);
    job_event.SetValue(id);
  }
  s.claim.store((uint64_t(id) << (2 * Impl::kChunkBits)) | (uint64_t(chunks) << Impl::kChunkBits),
                std::memory_order_release);
  for (int i = 1; i <= helpers; ++i) {  // wakes worker i
    Impl::Slot& slot = s.slots[i];
    slot.generation.fetch_add(1);
    if (slot.sleeping.load()) FutexWake(&slot.generation, 1);
  }
  // The caller takes chunks like any worker (only the caller adds to a live job's claim word without a
  // compare-and-swap: the job cannot change under it).
  const int64_t t1 = ClockNs();
  int mine = 0;
  for (;;) {
    const int chunk = static_cast<int>(s.claim.fetch_add(1, std::memory_order_acq_rel) & Impl::kChunkMask);
    if (chunk >= chunks) break;
    s.RunChunk(f, chunk, id);
    ++mine;
    s.pending.fetch_sub(1, std::memory_order_release);
  }
  const int64_t t2 = ClockNs();
  if (s.pending.load(std::memory_order_acquire) != 0) {
    // Chunks a worker has started: spin about as long as two of the caller's own chunks took, then sleep.
    const int64_t own = mine > 0 ? (t2 - t1) / mine : kMaxCallerSpinNs;
    const int64_t until = t2 + std::min(kMaxCallerSpinNs, std::max(kMinCallerSpinNs, 2 * own));
    bool done = false;
    for (int spins = 1; !done; ++spins) {
      if (s.pending.load(std::memory_order_acquire) == 0) done = true;
      else if ((spins & 63) == 0 && ClockNs() > until) break;
      else CpuRelax();
    }
    if (!done) {
      s.caller_sleeps.fetch_add(1, std::memory_order_relaxed);
      s.caller_waiting.store(1);
      for (int p; (p = s.pending.load()) != 0;) FutexWait(&s.pending, p);
      s.caller_waiting.store(0, std::memory_order_relaxed);
    }
  }
  const int64_t t3 = ClockNs();
  s.wait_ns.fetch_add(t3 - t2, std::memory_order_relaxed);
  s.jobs.fetch_add(1, std::memory_order_relaxed);
  s.chunks.fetch_add(chunks, std::memory_order_relaxed);
  s.worker_chunks.fetch_add(chunks - mine, std::memory_order_relaxed);
  // The caller's time per chunk times the chunks: what the job would have taken on the caller alone.
  if (mine > 0) s.policy.EndJob(t3, double(t2 - t1) / mine * chunks, double(t3 - t0));
  s.Publish();
  std::exception_ptr error;
  std::swap(error, s.error);
  s.busy.store(false);
  if (error) std::rethrow_exception(error);
}

// f(chunk), keeping the job's first exception for Run to rethrow.
void ThreadPool::Impl::RunChunk(const std::function<void(int)>& f, int chunk, uint32_t id) {
  RecordEvent part_event("ThreadPool::part", "ThreadPool");
  part_event.SetValue(id);
  try {
    f(chunk);
  } catch (...) {
    std::lock_guard<std::mutex> l(error_mu);
    if (!error) error = std::current_exception();
  }
}

void ThreadPool::Impl::HelpWithChunks() {
  InJob in_job;
  uint64_t word = claim.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t total = (word >> kChunkBits) & kChunkMask, next = word & kChunkMask;
    if (next >= total) return;  // nothing left (or the job has ended: its word counts past its chunks)
    if (!claim.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;  // `word` now holds the current value
    RunChunk(*job, static_cast<int>(next), static_cast<uint32_t>(word >> (2 * kChunkBits)));
    FinishChunk();
    word = claim.load(std::memory_order_acquire);
  }
}

void ThreadPool::Impl::Loop(int index, int seen) {
  Slot& slot = slots[index];
  for (;;) {
    const int64_t start = ClockNs(), until = start + spin_ns.load(std::memory_order_relaxed);
    int64_t next_yield = start + kYieldEveryNs;
    for (int spins = 1; slot.generation.load(std::memory_order_acquire) == seen; ++spins) {
      if ((spins & 63) == 0) {
        const int64_t now = ClockNs();
        if (now > until) {
          slot.sleeping.store(1);
          while (slot.generation.load() == seen) FutexWait(&slot.generation, seen);
          slot.sleeping.store(0, std::memory_order_relaxed);
          break;
        }
        if (now > next_yield) {  // let a thread with work have this core if the machine is oversubscribed
          sched_yield();
          next_yield = now + kYieldEveryNs;
        }
      }
      CpuRelax();
    }
    seen = slot.generation.load(std::memory_order_acquire);
    HelpWithChunks();
  }
}

ThreadPool::Stats ThreadPool::GetStats() const {
  Impl& s = *impl_;
  bool idle = false;
  while (!s.busy.compare_exchange_weak(idle, true)) {  // the policy changes only between jobs
    idle = false;
    std::this_thread::yield();
  }
  Stats r;
  r.jobs = s.jobs.load();
  r.chunks = s.chunks.load();
  r.worker_chunks = s.worker_chunks.load();
  r.serial_jobs = s.serial_jobs.load();
  r.caller_sleeps = s.caller_sleeps.load();
  r.wait_ns = s.wait_ns.load();
  r.backoffs = s.policy.backoffs();
  r.probes = s.policy.probes();
  r.resumes = s.policy.resumes();
  r.backed_off = s.policy.backed_off();
  r.gain = s.policy.gain();
  r.chunks_per_thread = s.chunks_per_thread.load();
  r.backoff = s.backoff.load();
  r.spin_us = s.spin_ns.load() / 1000;
  s.busy.store(false);
  return r;
}

void ThreadPool::ResetStats() {
  Impl& s = *impl_;
  s.jobs = s.chunks = s.worker_chunks = s.serial_jobs = s.caller_sleeps = s.wait_ns = 0;
}

void ThreadPool::SetOptions(int chunks_per_thread, int backoff, int64_t spin_us) {
  Impl& s = *impl_;
  bool idle = false;
  while (!s.busy.compare_exchange_weak(idle, true)) {  // the policy changes only between jobs
    idle = false;
    std::this_thread::yield();
  }
  if (chunks_per_thread > 0) s.chunks_per_thread = std::min(chunks_per_thread, 64);
  if (backoff >= 0 && std::min(backoff, 2) != s.backoff.load()) {
    s.backoff = std::min(backoff, 2);
    s.policy = PoolPolicy();  // a fresh start: not backed off
  }
  if (spin_us >= 0) s.spin_ns = spin_us * 1000;
  s.Publish();
  s.busy.store(false);
}

}  // namespace fl
