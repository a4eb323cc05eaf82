#include "profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

namespace fl {

std::atomic<bool> g_profiler_enabled{false};

namespace {

std::atomic<int64_t> g_event_cap{0};
std::atomic<int64_t> g_event_count{0};
std::atomic<int64_t> g_dropped{0};

struct ThreadBuffer {
  std::mutex mu;  // uncontended except while CollectEvents/Reset read it
  std::vector<ProfEvent> events;
  std::vector<int64_t> stack;  // indices of open events
  int32_t thread_index = 0;
  int32_t os_tid = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<ThreadBuffer*> buffers;  // never freed: a thread's events outlive the thread
};

Registry& Reg() {
  static Registry* r = new Registry();
  return *r;
}

ThreadBuffer& LocalBuffer() {
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

template <typename S>
int64_t Open(S&& name, const char* category) {
  int64_t cap = g_event_cap.load(std::memory_order_relaxed);
  if (cap > 0 && g_event_count.fetch_add(1, std::memory_order_relaxed) >= cap) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  ThreadBuffer& b = LocalBuffer();
  std::lock_guard<std::mutex> lock(b.mu);
  ProfEvent e;
  e.name = std::forward<S>(name);
  e.category = category;
  e.thread = b.thread_index;
  e.os_tid = b.os_tid;
  e.depth = static_cast<int32_t>(b.stack.size());
  e.parent = b.stack.empty() ? -1 : b.stack.back();
  int64_t idx = static_cast<int64_t>(b.events.size());
  b.stack.push_back(idx);
  e.start_ns = NowNs();
  b.events.push_back(std::move(e));
  return idx;
}

}  // namespace

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

int64_t OpenEvent(const char* name, const char* category) { return Open(name, category); }
int64_t OpenEvent(const std::string& name, const char* category) { return Open(name, category); }

void CloseEvent(int64_t token, std::string* args, int64_t bytes) {
  uint64_t now = NowNs();
  ThreadBuffer& b = LocalBuffer();
  std::lock_guard<std::mutex> lock(b.mu);
  // A Reset between open and close empties the buffer: the token is then stale and ignored.
  if (token >= static_cast<int64_t>(b.events.size())) return;
  ProfEvent& e = b.events[token];
  e.end_ns = now;
  if (args) e.args = std::move(*args);
  e.bytes = bytes;
  // Pop this event (and anything left open above it, which cannot happen with RAII scopes).
  while (!b.stack.empty()) {
    int64_t top = b.stack.back();
    b.stack.pop_back();
    if (top == token) break;
  }
}

RecordMemcpy::RecordMemcpy(const Place& src, const Place& dst, size_t bytes) {
  if (!ProfilerEnabled()) return;
  direction_ = src.is_cpu() ? (dst.is_cpu() ? "CPU->CPU" : "CPU->GPU") : (dst.is_cpu() ? "GPU->CPU" : "GPU->GPU");
  bytes_ = bytes;
  token_ = OpenEvent(std::string("memcpy:") + direction_, "Memcpy");
}

RecordMemcpy::~RecordMemcpy() {
  if (token_ < 0) return;
  std::string args = std::string("\"direction\":\"") + direction_ + "\",\"bytes\":" + std::to_string(bytes_);
  CloseEvent(token_, &args, static_cast<int64_t>(bytes_));
}

void EnableProfiler() { g_profiler_enabled.store(true, std::memory_order_relaxed); }
void DisableProfiler() { g_profiler_enabled.store(false, std::memory_order_relaxed); }

void ResetProfiler() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  for (ThreadBuffer* b : r.buffers) {
    std::lock_guard<std::mutex> l2(b->mu);
    b->events.clear();
    b->stack.clear();
  }
  g_event_count.store(0);
  g_dropped.store(0);
}

void SetProfilerEventCap(int64_t cap) { g_event_cap.store(cap < 0 ? 0 : cap); }
int64_t ProfilerEventCap() { return g_event_cap.load(); }
int64_t ProfilerDroppedEvents() { return g_dropped.load(); }

std::vector<ProfEvent> CollectEvents() {
  std::vector<ProfEvent> out;
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  for (ThreadBuffer* b : r.buffers) {
    std::lock_guard<std::mutex> l2(b->mu);
    for (const ProfEvent& e : b->events)
      if (e.end_ns != 0) out.push_back(e);
  }
  return out;
}

}  // namespace fl
