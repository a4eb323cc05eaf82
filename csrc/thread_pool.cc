#include "thread_pool.h"

#include <cblas.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "enforce.h"
#include "parse_int.h"
#include "profiler.h"

namespace fl {

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

ThreadPool::ThreadPool(int threads) : pid_(getpid()) { SetSize(threads); }

void ThreadPool::SetSize(int threads) {
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

bool ThreadPool::Run(int parts, const std::function<void(int)>& f) {
  bool idle = false;
  if (getpid() != pid_ || !busy_.compare_exchange_strong(idle, true)) return false;
  pending_.store(parts - 1);  // parts 1.. not yet finished, whoever runs them
  job_ = &f;
  ++job_id_;
  // The profiler sees the job on the caller and every part on the thread that ran it (linked by the job id), so
  // the report can show each op's parallel efficiency and the time cores sat idle.
  RecordEvent job_event("ThreadPool::job", "ThreadPool");
  if (job_event.active()) {
    thread_local int cached_parts = 0, cached_threads = 0;  // a job's args repeat: intern them once
    thread_local const char* cached_args = nullptr;
    if (!cached_args || cached_parts != parts || cached_threads != Size()) {
      cached_parts = parts;
      cached_threads = Size();
      cached_args = Intern(Str("\"parts\":", parts, ",\"threads\":", cached_threads));
    }
    job_event.SetArgs(cached_args);
    job_event.SetValue(job_id_);
  }
  claim_.store((uint64_t(job_id_) << (2 * kPartBits)) | (uint64_t(parts) << kPartBits) | 1, std::memory_order_release);
  for (int i = 1; i < parts; ++i) slots_[i].generation.fetch_add(1);  // wakes worker i
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> l(mu_);
    cv_.notify_all();
  }
  RunPart(f, 0, job_id_);
  // Then whatever parts no worker has claimed yet (only the caller adds to a live job's claim word
  // without a compare-and-swap: the job cannot change under it).
  for (;;) {
    const int part = static_cast<int>(claim_.fetch_add(1, std::memory_order_acq_rel) & kPartMask);
    if (part >= parts) break;
    RunPart(f, part, job_id_);
    pending_.fetch_sub(1, std::memory_order_release);
  }
  for (int64_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) Pause(spins);
  std::exception_ptr error;
  std::swap(error, error_);
  busy_.store(false);
  if (error) std::rethrow_exception(error);
  return true;
}

// Workers spin this long for the next job before sleeping (FLUIDLITE_SPIN_US, like OpenMP's
// KMP_BLOCKTIME): a condition-variable wake-up costs tens of microseconds here, as long as a whole
// batch_norm over a 2 MB tensor, so back-to-back parallel ops should find their workers awake.
std::chrono::microseconds ThreadPool::SpinTime() {
  static const std::chrono::microseconds spin{[] {
    const char* env = std::getenv("FLUIDLITE_SPIN_US");
    return env && std::atoi(env) >= 0 ? std::atoi(env) : kDefaultSpinUs;
  }()};
  return spin;
}

void ThreadPool::Pause(int64_t spins) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if (spins > (int64_t(1) << 16)) std::this_thread::yield();  // oversubscribed: let others run
}

// f(part), keeping the job's first exception for Run to rethrow.
void ThreadPool::RunPart(const std::function<void(int)>& f, int part, uint32_t job) {
  RecordEvent part_event("ThreadPool::part", "ThreadPool");
  part_event.SetValue(job);
  try {
    f(part);
  } catch (...) {
    std::lock_guard<std::mutex> l(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::HelpWithParts() {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t parts = (word >> kPartBits) & kPartMask, next = word & kPartMask;
    if (next >= parts) return;  // nothing left (or the job has ended: its word counts past its parts)
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;  // `word` now holds the current value
    RunPart(*job_, static_cast<int>(next), static_cast<uint32_t>(word >> (2 * kPartBits)));
    pending_.fetch_sub(1, std::memory_order_release);
    word = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::Loop(int index, uint64_t seen) {
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
    HelpWithParts();
  }
}

}  // namespace fl
