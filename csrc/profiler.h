// Event recording for the built-in profiler. A RecordEvent is an RAII scope: when the profiler is off
// it costs one relaxed atomic load and builds no strings; when on, it appends to a per-thread buffer
// (no lock on the hot path) with its parent taken from an explicit per-thread stack, so nesting and
// self time come from the recorder, never from interval guessing.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "place.h"

namespace fl {

extern std::atomic<bool> g_profiler_enabled;

inline bool ProfilerEnabled() { return g_profiler_enabled.load(std::memory_order_relaxed); }

struct ProfEvent {
  std::string name;
  std::string category;  // "Operator", "Executor", "Memcpy", "Scope", "User", ...
  std::string args;      // JSON object body, e.g. "\"X\":\"[2, 3]\"", built only while recording
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  int64_t bytes = -1;    // memcpy bytes, -1 when not a copy
  int32_t thread = 0;    // fluidlite thread index (0 = first thread that recorded)
  int32_t os_tid = 0;
  int32_t depth = 0;
  int64_t parent = -1;   // index of the enclosing event in the same thread's list, -1 at top level
};

uint64_t NowNs();

// Opens an event now; returns a token (or -1 if dropped/off) that CloseEvent uses.
int64_t OpenEvent(const char* name, const char* category);
int64_t OpenEvent(const std::string& name, const char* category);
void CloseEvent(int64_t token, std::string* args = nullptr, int64_t bytes = -1);

class RecordEvent {
 public:
  RecordEvent(const char* name, const char* category) {
    if (ProfilerEnabled()) token_ = OpenEvent(name, category);
  }
  RecordEvent(const std::string& name, const char* category) {
    if (ProfilerEnabled()) token_ = OpenEvent(name, category);
  }
  ~RecordEvent() {
    if (token_ >= 0) CloseEvent(token_, args_.empty() ? nullptr : &args_);
  }
  bool active() const { return token_ >= 0; }
  // Attach args (JSON object body); call only when active() to keep the off path free.
  void SetArgs(std::string args) { args_ = std::move(args); }
  RecordEvent(const RecordEvent&) = delete;
  RecordEvent& operator=(const RecordEvent&) = delete;

 private:
  int64_t token_ = -1;
  std::string args_;
};

// A memory copy: name "memcpy", args with direction ("CPU->GPU"), bytes and GB/s.
class RecordMemcpy {
 public:
  RecordMemcpy(const Place& src, const Place& dst, size_t bytes);
  ~RecordMemcpy();

 private:
  int64_t token_ = -1;
  const char* direction_ = "";
  size_t bytes_ = 0;
};

void EnableProfiler();
void DisableProfiler();
void ResetProfiler();  // drops all recorded events
void SetProfilerEventCap(int64_t cap);  // 0 = unlimited
int64_t ProfilerEventCap();
int64_t ProfilerDroppedEvents();
// All recorded events (closed ones), every thread, in per-thread record order.
std::vector<ProfEvent> CollectEvents();

}  // namespace fl
