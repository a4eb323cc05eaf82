#include "profiler.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "allocator.h"
#include "cuda_api.h"
#include "enforce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define FL_HAVE_TSC 1
#endif

namespace fl {

std::atomic<bool> g_profiler_enabled{false};
std::atomic<bool> g_profiler_op_detail{false};

namespace {

inline uint64_t Ticks() {
#ifdef FL_HAVE_TSC
  return __rdtsc();
#else
  return NowNs();
#endif
}

struct RawEvent {
  const char* name;
  const char* category;
  const char* args;
  uint64_t start;
  uint64_t end;
  int64_t bytes;
  int64_t value;
  uint64_t cpu_mark_ticks;  // the thread's CPU-time checkpoint at the open
  int64_t cpu_mark_ns;
  int64_t cpu_end_ns;  // the thread's CPU time at the close, -1 when not read (a short event)
  int64_t mem_in_use, mem_peak;
  int32_t parent;
  int32_t depth;
  std::atomic<uint32_t> done;  // release-stored by CloseEvent; the collector reads only done events
};

constexpr int64_t kChunk = 1024;
constexpr int kMaxDepth = 256;

std::atomic<int64_t> g_event_cap{5'000'000};
std::atomic<int64_t> g_reserved{0};  // events reserved by all threads (whole chunks)
std::atomic<int64_t> g_dropped{0};
std::atomic<uint64_t> g_epoch{0};  // bumped by Reset: buffers from an older epoch restart

}  // namespace

struct ThreadBuffer {
  std::mutex chunks_mu;  // taken only to add a chunk or to collect
  std::vector<std::unique_ptr<RawEvent[]>> chunks;
  std::atomic<int64_t> size{0};  // events written (open or closed)
  int64_t capacity = 0;          // slots allocated (chunks are kept across resets)
  int64_t limit = 0;             // slots this thread may use under the global cap
  uint64_t epoch = 0;
  int32_t stack[kMaxDepth];
  int depth = 0;
  int32_t thread_index = 0;
  int32_t os_tid = 0;
  uint64_t cpu_mark_ticks = 0;  // the thread's CPU-time checkpoint: when it was read (ticks) and its value
  int64_t cpu_mark_ns = 0;
};

namespace {

struct Registry {
  std::mutex mu;
  std::vector<ThreadBuffer*> buffers;  // never freed: a thread's events outlive the thread
};

Registry& Reg() {
  static Registry* r = new Registry();
  return *r;
}

ThreadBuffer& Local() {
  thread_local ThreadBuffer* buf = [] {
    auto* b = new ThreadBuffer();
    b->os_tid = static_cast<int32_t>(syscall(SYS_gettid));
    Registry& r = Reg();
    std::lock_guard<std::mutex> lock(r.mu);
    b->thread_index = static_cast<int32_t>(r.buffers.size());
    r.buffers.push_back(b);
    return b;
  }();
  return *buf;
}

// Lets `b` use up to one more chunk of slots, as far as the global cap allows.
bool Grow(ThreadBuffer& b) {
  int64_t cap = g_event_cap.load(std::memory_order_relaxed);
  int64_t allowed = kChunk;
  if (cap > 0) {
    int64_t prev = g_reserved.fetch_add(kChunk, std::memory_order_relaxed);
    allowed = std::max<int64_t>(0, std::min<int64_t>(kChunk, cap - prev));
    g_reserved.fetch_sub(kChunk - allowed, std::memory_order_relaxed);
    if (allowed == 0) return false;
  }
  if (b.capacity < b.limit + allowed) {
    std::lock_guard<std::mutex> lock(b.chunks_mu);
    b.chunks.emplace_back(new RawEvent[kChunk]);
    b.capacity += kChunk;
  }
  b.limit += allowed;
  return true;
}

RawEvent& At(ThreadBuffer& b, int64_t i) { return b.chunks[i / kChunk][i % kChunk]; }

// The TSC's rate, measured by spinning `window_ns` on the steady clock (ns per tick; 1 without a TSC).
double MeasureNsPerTick(uint64_t window_ns) {
#ifdef FL_HAVE_TSC
  const uint64_t ta = Ticks(), na = NowNs();
  while (NowNs() - na < window_ns) {}
  const uint64_t tb = Ticks(), nb = NowNs();
  return double(nb - na) / double(tb - ta);
#else
  (void)window_ns;
  return 1.0;
#endif
}

// Maps TSC ticks to steady-clock ns: two (ticks, ns) anchors, the second refreshed at each collect.
struct Clock {
  uint64_t t0 = 0, n0 = 0;
  double ns_per_tick = 1.0;
  void Anchor() {
    t0 = Ticks();
    n0 = NowNs();
  }
  void Calibrate() {
#ifdef FL_HAVE_TSC
    uint64_t t1 = Ticks(), n1 = NowNs();
    if (n1 - n0 < 20'000'000) {  // too short an interval for a precise rate: measure 20 ms once
      ns_per_tick = MeasureNsPerTick(20'000'000);
    } else {
      ns_per_tick = double(n1 - n0) / double(t1 - t0);
    }
#endif
  }
  uint64_t ToNs(uint64_t t) const {
#ifdef FL_HAVE_TSC
    return n0 + static_cast<uint64_t>((double(int64_t(t - t0))) * ns_per_tick);
#else
    return t;
#endif
  }
};

Clock& TheClock() {
  static Clock c;
  return c;
}

// Thread CPU time, for spotting preempted samples. Reading the thread's CPU clock is a system call (~0.5 us here), so
// it is read at most about twice per check interval (1 ms) of a thread's wall time: at an open when the thread's
// checkpoint is older than that (refreshing it), and at the close of an event that began more than that after its
// checkpoint. Such an event's CPU time is the clock's advance since the checkpoint (capped at its wall time): an upper
// bound, so a sample is flagged only when really preempted (a 20 us op that took 4 ms shows ~1 ms of CPU at most).
// Shorter events get -1. FLUIDLITE_PROFILER_CPU_CHECK_US sets the interval (default 1000); 0 turns the reads off.
int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t CpuCheckNs() {
  static const int64_t ns = [] {
    const char* v = std::getenv("FLUIDLITE_PROFILER_CPU_CHECK_US");
    int64_t us = 1000;
    if (v && *v) us = std::max<int64_t>(0, std::atoll(v));
    return us * 1000;
  }();
  return ns;
}

uint64_t g_cpu_check_ticks = ~uint64_t(0);  // the interval in ticks (set when the profiler starts; ~0: off)

Allocator* g_cpu_allocator = nullptr;  // for the memory fields (set when the profiler starts)

}  // namespace

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const char* Intern(const std::string& s) {
  static std::mutex mu;
  static auto* pool = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return pool->insert(s).first->c_str();
}

const char* IndexArgs(const char* key, int64_t k) {
  // Per thread, per key: the strings of the steps seen so far (a loop asks for the same ones every run).
  thread_local std::unordered_map<const char*, std::vector<const char*>> cache;
  auto& strings = cache[key];
  if (k >= 0 && k < 1'000'000) {
    if (static_cast<size_t>(k) >= strings.size()) strings.resize(static_cast<size_t>(k) + 1, nullptr);
    const char*& s = strings[static_cast<size_t>(k)];
    if (!s) s = Intern(Str("\"", key, "\":", k));
    return s;
  }
  return Intern(Str("\"", key, "\":", k));
}

uint64_t ProfilerTicks() { return Ticks(); }
ThreadBuffer* ProfilerThreadBuffer() { return &Local(); }

int64_t OpenEvent(const char* name, const char* category) { return OpenEventAt(&Local(), name, category, 0); }

int64_t OpenEventAt(ThreadBuffer* buffer, const char* name, const char* category, uint64_t start_ticks) {
  ThreadBuffer& b = *buffer;
  uint64_t epoch = g_epoch.load(std::memory_order_relaxed);
  if (b.epoch != epoch) {  // a Reset happened: start this thread's buffer over
    b.size.store(0, std::memory_order_relaxed);
    b.depth = 0;
    b.limit = 0;
    b.epoch = epoch;
  }
  int64_t i = b.size.load(std::memory_order_relaxed);
  if (i == b.limit && !Grow(b)) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  if (b.depth >= kMaxDepth) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  RawEvent& e = At(b, i);
  e.name = name;
  e.category = category;
  e.args = nullptr;
  e.bytes = -1;
  e.parent = b.depth ? b.stack[b.depth - 1] : -1;
  e.depth = b.depth;
  e.done.store(0, std::memory_order_relaxed);
  b.stack[b.depth++] = static_cast<int32_t>(i);
  b.size.store(i + 1, std::memory_order_release);
  const uint64_t start = start_ticks ? start_ticks : Ticks();
  if (start - b.cpu_mark_ticks > g_cpu_check_ticks) {
    b.cpu_mark_ns = ThreadCpuNs();
    b.cpu_mark_ticks = start;
  }
  e.cpu_mark_ticks = b.cpu_mark_ticks;
  e.cpu_mark_ns = b.cpu_mark_ns;
  e.start = start;
  return i;
}

void CloseEvent(int64_t token, const char* args, int64_t bytes, int64_t value) {
  CloseEventAt(&Local(), token, Ticks(), args, bytes, value);
}

void CloseEventAt(ThreadBuffer* buffer, int64_t token, uint64_t t, const char* args, int64_t bytes, int64_t value) {
  ThreadBuffer& b = *buffer;
  if (b.epoch != g_epoch.load(std::memory_order_relaxed) || token >= b.size.load(std::memory_order_relaxed))
    return;  // reset while open: drop
  RawEvent& e = At(b, token);
  e.end = t;
  e.args = args;
  e.bytes = bytes;
  e.value = value;
  if (t - e.cpu_mark_ticks > g_cpu_check_ticks) {  // long enough for a CPU-clock read to be noise
    e.cpu_end_ns = b.cpu_mark_ns = ThreadCpuNs();
    b.cpu_mark_ticks = t;
  } else {
    e.cpu_end_ns = -1;
  }
  e.mem_in_use = g_cpu_allocator->InUse();
  e.mem_peak = g_cpu_allocator->ProfilePeak();
  e.done.store(1, std::memory_order_release);
  while (b.depth > 0 && b.stack[b.depth - 1] != token) --b.depth;  // RAII keeps this a plain pop
  if (b.depth > 0) --b.depth;
}

RecordMemcpy::RecordMemcpy(const Place& src, const Place& dst, size_t bytes) {
  if (!ProfilerEnabled()) return;
  static const char* names[2][2] = {{"memcpy:CPU->CPU", "memcpy:CPU->GPU"}, {"memcpy:GPU->CPU", "memcpy:GPU->GPU"}};
  bytes_ = static_cast<int64_t>(bytes);
  token_ = OpenEvent(names[src.is_gpu()][dst.is_gpu()], "Memcpy");
}

RecordMemcpy::~RecordMemcpy() {
  if (token_ >= 0) CloseEvent(token_, args_, bytes_);
}

namespace {
thread_local const CopyCause* t_copy_cause = nullptr;
thread_local const PreparedOp* t_current_op = nullptr;
}  // namespace

CopyCause::CopyCause(const char* c, const std::string* s, const std::string* d, int64_t k)
    : cause(c), src(s), dst(d), step(k), prev_(t_copy_cause) {
  t_copy_cause = this;
}
CopyCause::~CopyCause() { t_copy_cause = prev_; }
const CopyCause* CopyCause::Current() { return t_copy_cause; }

const PreparedOp* CurrentOp() { return t_current_op; }

const char* CopyArgs(const void* src, const void* dst) {
  struct Entry {
    const PreparedOp* op;
    const char* cause;
    const std::string *src_name, *dst_name;
    int64_t step;
    const void *src, *dst;
    const char* args;
  };
  thread_local Entry cache[64] = {};
  const CopyCause* given = CopyCause::Current();
  const Entry key{CurrentOp(),
                  given ? given->cause : nullptr,
                  given ? given->src : nullptr,
                  given ? given->dst : nullptr,
                  given ? given->step : -1,
                  src,
                  dst,
                  nullptr};
  Entry& slot = cache[(reinterpret_cast<uintptr_t>(dst) >> 4 ^ reinterpret_cast<uintptr_t>(key.op) >> 6 ^
                       static_cast<uintptr_t>(key.step)) %
                      64];
  if (!(slot.args && slot.op == key.op && slot.cause == key.cause && slot.src_name == key.src_name &&
        slot.dst_name == key.dst_name && slot.step == key.step && slot.src == src && slot.dst == dst)) {
    slot = key;
    slot.args = Intern(DescribeCopy(src, dst).Json());
  }
  return slot.args;
}

CurrentOpScope::CurrentOpScope(bool on) : on_(on), prev_(t_current_op) {}
CurrentOpScope::~CurrentOpScope() {
  if (on_) t_current_op = prev_;
}
void CurrentOpScope::Set(const PreparedOp* op) {
  if (on_) t_current_op = op;
}

void SetProfilerOpDetail(bool on) { g_profiler_op_detail.store(on); }

void EnableProfiler() {
  if (!g_profiler_enabled.load()) {
    TheClock().Anchor();
    g_cpu_allocator = &GetAllocator(Place::CPU());
    g_cpu_allocator->ResetProfilePeak();
    static const uint64_t check_ticks = [] {  // the CPU-time check interval in ticks (a rough rate is enough)
      if (CpuCheckNs() == 0) return ~uint64_t(0);
      return static_cast<uint64_t>(double(CpuCheckNs()) / MeasureNsPerTick(200'000));
    }();
    g_cpu_check_ticks = check_ticks;
  }
  g_profiler_enabled.store(true, std::memory_order_release);
  if (const CudaApi* cuda = Cuda()) cuda->profile_start();  // anchors the GPU event clocks to NowNs
}

void DisableProfiler() {
  g_profiler_enabled.store(false, std::memory_order_release);
  if (const CudaApi* cuda = Cuda()) cuda->profile_stop();
}

void ResetProfiler() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  g_epoch.fetch_add(1, std::memory_order_relaxed);
  g_dropped.store(0);
  g_reserved.store(0);  // each buffer restarts (size and limit 0) at its next event
}

void SetProfilerEventCap(int64_t cap) { g_event_cap.store(cap < 0 ? 0 : cap); }
int64_t ProfilerEventCap() { return g_event_cap.load(); }
int64_t ProfilerDroppedEvents() { return g_dropped.load(); }

std::vector<ProfEvent> CollectEvents() {
  Clock& clock = TheClock();
  clock.Calibrate();
  std::vector<ProfEvent> out;
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  uint64_t epoch = g_epoch.load();
  for (ThreadBuffer* b : r.buffers) {
    std::lock_guard<std::mutex> l2(b->chunks_mu);
    if (b->epoch != epoch) continue;
    int64_t n = b->size.load(std::memory_order_acquire);
    std::vector<int64_t> remap(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i) {
      RawEvent& e = At(*b, i);
      if (!e.done.load(std::memory_order_acquire)) continue;  // still open (or half-written)
      remap[i] = static_cast<int64_t>(out.size());
      ProfEvent p;
      p.name = e.name;
      p.category = e.category;
      p.args = e.args;
      p.start_ns = clock.ToNs(e.start);
      p.end_ns = clock.ToNs(e.end);
      if (p.end_ns < p.start_ns) p.end_ns = p.start_ns;
      p.bytes = e.bytes;
      p.thread = b->thread_index;
      p.os_tid = b->os_tid;
      p.depth = e.depth;
      p.parent = e.parent >= 0 ? remap[e.parent] : -1;
      p.cpu_ns =
          e.cpu_end_ns >= 0 ? std::min<int64_t>(e.cpu_end_ns - e.cpu_mark_ns, int64_t(p.end_ns - p.start_ns)) : -1;
      p.mem_in_use = e.mem_in_use;
      p.mem_peak = e.mem_peak;
      p.value = e.value;
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace fl
