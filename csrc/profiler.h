// Event recording for the built-in profiler.
//
// A RecordEvent is an RAII scope. Off: one relaxed atomic load, no strings, no clock read. On: two
// timestamp reads (the TSC on x86, converted to ns when collected) and one append to a per-thread buffer
// of fixed-size chunks -- no lock and no atomic read-modify-write on the hot path. The parent of an event
// comes from an explicit per-thread stack, so nesting (and self time) is exact, never guessed from
// overlapping intervals. Names must outlive the profile: op types and literals do; other strings go
// through Intern(). A cap on recorded events keeps long runs bounded; drops are counted and reported.
//
// Beside wall time each event carries what the tune loop needs to explain it (docs/profiling.md):
// - thread CPU time, for spotting preempted samples. Reading the thread's CPU clock is a system call (~0.5 us
//   here), too slow for every event: it is read about once per millisecond of a thread's time at most, and an event
//   longer than that gets its CPU time (an upper bound; shorter ones: -1);
// - the CPU allocator's bytes in use at its close and the peak so far (two relaxed loads);
// - an integer `value` (a thread-pool job id links the job's parts on other threads to it).
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

// Interned `"key":k` (a loop step's args: `"step":3`, `"iteration":3`).
const char* IndexArgs(const char* key, int64_t k);

// Opens an event on this thread; returns a token for CloseEvent (-1 when off or dropped).
int64_t OpenEvent(const char* name, const char* category);
// Closes it. `args` (interned JSON object body, e.g. "\"X\":\"[2, 3]\""), `bytes` and `value` are optional.
void CloseEvent(int64_t token, const char* args = nullptr, int64_t bytes = -1, int64_t value = -1);

// Fluid's tracer_option: with OpDetail (or AllOpDetail) each op event gets children `<type>/infer_shape` and
// `<type>/compute`, so the op's own self time is the executor's framework time around its kernel.
void SetProfilerOpDetail(bool on);

// Timestamp-sharing variants for tight loops (the executor's op loop): the end of one event is the
// start of the next, so a profiled op costs one clock read instead of two.
// `buffer` (from ProfilerThreadBuffer(), valid for the calling thread) saves the thread-local lookup.
struct ThreadBuffer;
ThreadBuffer* ProfilerThreadBuffer();
uint64_t ProfilerTicks();
int64_t OpenEventAt(ThreadBuffer* buffer, const char* name, const char* category, uint64_t start_ticks);
void CloseEventAt(ThreadBuffer* buffer, int64_t token, uint64_t end_ticks, const char* args = nullptr,
                  int64_t bytes = -1, int64_t value = -1);

class RecordEvent {
 public:
  RecordEvent(const char* name, const char* category) {
    if (ProfilerEnabled()) token_ = OpenEvent(name, category);
  }
  RecordEvent(const char* name, const char* category, bool on) {  // records only when `on`
    if (on && ProfilerEnabled()) token_ = OpenEvent(name, category);
  }
  ~RecordEvent() {
    if (token_ >= 0) CloseEvent(token_, args_, bytes_, value_);
  }
  bool active() const { return token_ >= 0; }
  void SetArgs(const char* interned_args) { args_ = interned_args; }
  void SetBytes(int64_t b) { bytes_ = b; }
  void SetValue(int64_t v) { value_ = v; }
  RecordEvent(const RecordEvent&) = delete;
  RecordEvent& operator=(const RecordEvent&) = delete;

 private:
  int64_t token_ = -1;
  const char* args_ = nullptr;
  int64_t bytes_ = -1;
  int64_t value_ = -1;
};

// Why a copy is made, for its profiler event and its `memory::Copy` log line: set by the code that knows (a
// recurrent step copying its output out, a feed op) around the MemCopy/TensorCopy calls it makes. Without one,
// MemCopy derives the cause from the running op's type (feed, fetch, assign-like ops, tensor arrays) and finds
// the variables among the running op's arguments by their tensors. Costs nothing unless the profiler is on or
// some module logs at level 4.
class CopyCause {
 public:
  CopyCause(const char* cause, const std::string* src = nullptr, const std::string* dst = nullptr, int64_t step = -1);
  ~CopyCause();
  CopyCause(const CopyCause&) = delete;
  CopyCause& operator=(const CopyCause&) = delete;

  const char* cause;
  const std::string* src;
  const std::string* dst;
  int64_t step;
  static const CopyCause* Current();

 private:
  const CopyCause* prev_;
};

// What MemCopy puts in a copy's event args and log line (DescribeCopy, in operator.cc: it reads the running op's
// arguments): the cause, the op, the source and destination variables ("" when unknown), the loop step or -1.
struct CopyAttribution {
  const char* cause = "other";
  std::string op, src, dst;
  int64_t step = -1;
  std::string Json() const;  // "cause":"feed","op":"feed","src":"x","dst":"feed"[,"step":3]
  std::string Text() const;  // " for feed x -> feed (op feed)"
};
CopyAttribution DescribeCopy(const void* src, const void* dst);
// DescribeCopy's Json(), interned, for the copy's profiler event. The same copy repeats every run (a feed, a step
// output): the answer is cached per thread by the running op, the given cause and the two addresses.
const char* CopyArgs(const void* src, const void* dst);

// The op whose kernel runs on this thread (set by the executor's op loop while the profiler is on or level-4
// logs are; restored when a nested block's loop returns), for attributing copies to ops.
class PreparedOp;
const PreparedOp* CurrentOp();
class CurrentOpScope {
 public:
  explicit CurrentOpScope(bool on);
  ~CurrentOpScope();
  void Set(const PreparedOp* op);

 private:
  bool on_;
  const PreparedOp* prev_;
};

// A memory copy: name "memcpy:CPU->GPU" etc., category "Memcpy", with its byte count.
class RecordMemcpy {
 public:
  RecordMemcpy(const Place& src, const Place& dst, size_t bytes);
  ~RecordMemcpy();
  bool active() const { return token_ >= 0; }
  void SetArgs(const char* interned_args) { args_ = interned_args; }

 private:
  int64_t token_ = -1;
  int64_t bytes_ = 0;
  const char* args_ = nullptr;
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
  int64_t parent;      // index into the returned vector, -1 at top level
  int64_t cpu_ns;      // thread CPU time inside the event (an upper bound), -1 when not measured (a short event)
  int64_t mem_in_use;  // CPU allocator bytes in use at the close
  int64_t mem_peak;    // the most bytes in use since the profile started, as of the close
  int64_t value;       // -1 unless set (thread-pool job id)
};

extern std::atomic<bool> g_profiler_op_detail;
inline bool ProfilerOpDetail() { return g_profiler_op_detail.load(std::memory_order_relaxed); }

void EnableProfiler();
void DisableProfiler();
void ResetProfiler();                   // drops all recorded events (and the drop counter)
void SetProfilerEventCap(int64_t cap);  // 0 = unlimited
int64_t ProfilerEventCap();
int64_t ProfilerDroppedEvents();
// Every closed event of every thread, grouped by thread in record order, parents remapped.
std::vector<ProfEvent> CollectEvents();

}  // namespace fl
