// Event recording for the built-in profiler.
//
// A RecordEvent is an RAII scope. Off: one relaxed atomic load, no strings, no clock read. On: two
// timestamp reads (the TSC on x86, converted to ns when collected) and one append to a per-thread buffer
// of fixed-size chunks -- no lock and no atomic read-modify-write on the hot path. The parent of an event
// comes from an explicit per-thread stack, so nesting (and self time) is exact, never guessed from
// overlapping intervals. Names must outlive the profile: op types and literals do; other strings go
// through Intern(). A cap on recorded events keeps long runs bounded; drops are counted and reported.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "place.h"

namespace fl {

extern std::atomic<bool> g_profiler_enabled;
inline bool ProfilerEnabled() { return g_profiler_enabled.load(std::memory_order_relaxed); }

uint64_t NowNs();  // steady clock, ns

// Returns a pointer to a process-lifetime copy of `s` (same string -> same pointer).
const char* Intern(const std::string& s);

// Opens an event on this thread; returns a token for CloseEvent (-1 when off or dropped).
int64_t OpenEvent(const char* name, const char* category);
// Closes it. `args` (interned JSON object body, e.g. "\"X\":\"[2, 3]\"") and `bytes` are optional.
void CloseEvent(int64_t token, const char* args = nullptr, int64_t bytes = -1);

// Timestamp-sharing variants for tight loops (the executor's op loop): the end of one event is the
// start of the next, so a profiled op costs one clock read instead of two.
// `buffer` (from ProfilerThreadBuffer(), valid for the calling thread) saves the thread-local lookup.
struct ThreadBuffer;
ThreadBuffer* ProfilerThreadBuffer();
uint64_t ProfilerTicks();
int64_t OpenEventAt(ThreadBuffer* buffer, const char* name, const char* category, uint64_t start_ticks);
void CloseEventAt(ThreadBuffer* buffer, int64_t token, uint64_t end_ticks, const char* args = nullptr,
                  int64_t bytes = -1);

class RecordEvent {
 public:
  RecordEvent(const char* name, const char* category) {
    if (ProfilerEnabled()) token_ = OpenEvent(name, category);
  }
  ~RecordEvent() {
    if (token_ >= 0) CloseEvent(token_, args_, bytes_);
  }
  bool active() const { return token_ >= 0; }
  void SetArgs(const char* interned_args) { args_ = interned_args; }
  void SetBytes(int64_t b) { bytes_ = b; }
  RecordEvent(const RecordEvent&) = delete;
  RecordEvent& operator=(const RecordEvent&) = delete;

 private:
  int64_t token_ = -1;
  const char* args_ = nullptr;
  int64_t bytes_ = -1;
};

// A memory copy: name "memcpy:CPU->GPU" etc., category "Memcpy", with its byte count.
class RecordMemcpy {
 public:
  RecordMemcpy(const Place& src, const Place& dst, size_t bytes);
  ~RecordMemcpy();

 private:
  int64_t token_ = -1;
  int64_t bytes_ = 0;
};

struct ProfEvent {
  const char* name;
  const char* category;
  const char* args;  // may be null
  uint64_t start_ns;
  uint64_t end_ns;
  int64_t bytes;   // -1 unless a memcpy
  int32_t thread;  // fluidlite thread index (0 = first thread that recorded)
  int32_t os_tid;
  int32_t depth;
  int64_t parent;  // index into the returned vector, -1 at top level
};

void EnableProfiler();
void DisableProfiler();
void ResetProfiler();                   // drops all recorded events (and the drop counter)
void SetProfilerEventCap(int64_t cap);  // 0 = unlimited
int64_t ProfilerEventCap();
int64_t ProfilerDroppedEvents();
// Every closed event of every thread, grouped by thread in record order, parents remapped.
std::vector<ProfEvent> CollectEvents();

}  // namespace fl
