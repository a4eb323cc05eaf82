// The CUDA runtime of fluidlite: devices and their streams, the caching device allocator, pinned host memory,
// copies between places, and the CUDA events that time GPU work for the profiler. It fills the CudaApi table
// (csrc/cuda_api.h) from a static initializer, which is how the core finds it.
#include <dlfcn.h>

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "allocator.h"
#include "cuda/device.h"
#include "logging.h"
#include "profiler.h"
#include "tensor.h"

namespace fl {
namespace cuda {

// ------------------------------------------------------------------ devices and streams

int DeviceCount() {
  static const int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {  // no driver, no device: a CUDA build on a CPU machine
      cudaGetLastError();
      c = 0;
    }
    return c;
  }();
  return n;
}

namespace {

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  int sm_count = 0;
};

DeviceState& State(int device) {
  static std::deque<DeviceState>* states = [] {  // lives for the process: tensors may outlive statics
    auto* s = new std::deque<DeviceState>();
    s->resize(DeviceCount());
    return s;
  }();
  return (*states)[device];
}

void CheckDeviceId(int device) {
  const int n = DeviceCount();
  FL_ENFORCE(device >= 0 && device < n, "CUDAPlace(", device, ") does not exist: ", n, " CUDA device(s) are visible");
}

}  // namespace

void SetDevice(int device) {
  thread_local int current = -1;
  if (current == device) return;
  CheckDeviceId(device);
  FL_CUDA_CHECK(cudaSetDevice(device));
  current = device;
}

cudaStream_t Stream(int device) {
  SetDevice(device);
  DeviceState& s = State(device);
  std::call_once(s.once, [&] {
    // Non-blocking: the legacy default stream (which other libraries in the process may use) does not serialise it.
    FL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    FL_CUDA_CHECK(cudaDeviceGetAttribute(&s.sm_count, cudaDevAttrMultiProcessorCount, device));
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
      FL_VLOG(1) << "CUDAPlace(" << device << "): " << prop.name << ", compute capability " << prop.major << "."
                 << prop.minor << ", " << s.sm_count << " SMs, " << (prop.totalGlobalMem >> 20) << " MiB, stream "
                 << static_cast<const void*>(s.stream);
  });
  return s.stream;
}

int MultiprocessorCount(int device) {
  Stream(device);
  return State(device).sm_count;
}

// ------------------------------------------------------------------ errors found by kernels

namespace {

// Per device: one DeviceError in device memory, and the descriptions of the sinks handed out since the last check
// (a sink's code is 1 + its index here). Cleared at every check.
struct ErrorState {
  std::mutex mu;
  DeviceError* slot = nullptr;
  std::vector<std::string> what;
};

ErrorState& Errors(int device) {
  static std::deque<ErrorState>* states = [] {
    auto* s = new std::deque<ErrorState>();
    s->resize(DeviceCount());
    return s;
  }();
  return (*states)[device];
}

// Reads the slot (after the stream is idle) and raises the first error a kernel recorded.
void CheckDeviceErrors(int device) {
  ErrorState& st = Errors(device);
  std::lock_guard<std::mutex> l(st.mu);
  if (st.what.empty()) return;
  DeviceError e{};
  FL_CUDA_CHECK(cudaMemcpy(&e, st.slot, sizeof(e), cudaMemcpyDeviceToHost));
  std::vector<std::string> what;
  what.swap(st.what);
  if (e.code == 0) return;
  FL_CUDA_CHECK(cudaMemset(st.slot, 0, sizeof(DeviceError)));
  const std::string& w = e.code >= 1 && e.code <= static_cast<int>(what.size()) ? what[e.code - 1] : "a kernel";
  if (e.limit <= 0) FL_THROW(w, ": element ", e.index, " is ", e.value);  // no range to name (a zero divisor)
  FL_THROW(w, " is out of range: element ", e.index, " is ", e.value, ", expected [0, ", e.limit, ")");
}

}  // namespace

DeviceErrorSink ErrorSink(const ExecutionContext& ctx, const char* slot, const char* what) {
  const int device = ctx.place().device;
  Stream(device);
  ErrorState& st = Errors(device);
  std::lock_guard<std::mutex> l(st.mu);
  if (!st.slot) {
    FL_CUDA_CHECK(cudaMalloc(&st.slot, sizeof(DeviceError)));
    FL_CUDA_CHECK(cudaMemset(st.slot, 0, sizeof(DeviceError)));
  }
  st.what.push_back(Str("op ", ctx.Type(), ": ", what, " (input ", slot, " '", ctx.InputName(slot), "')"));
  return DeviceErrorSink{st.slot, static_cast<int>(st.what.size())};
}

void Synchronize(int device, const char* what) {
  cudaError_t e = cudaStreamSynchronize(Stream(device));
  if (e != cudaSuccess)
    FL_THROW(what, " on CUDAPlace(", device, "): ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
             "); a kernel queued earlier on the device failed (GLOG_v=3 or CUDA_LAUNCH_BLOCKING=1 names the op)");
  CheckDeviceErrors(device);
}

void CheckLaunch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    FL_THROW("op ", what, ": CUDA kernel launch failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

std::shared_ptr<Allocation> Scratch(const Place& place, size_t bytes) { return AllocateShared(place, bytes); }

void CopyToHost(const Place& src, const void* device_ptr, void* host, size_t bytes) {
  MemCopy(Place::CPU(), host, src, device_ptr, bytes);  // waits: the destination is pageable host memory
}

void CopyToDevice(const Place& dst, void* device_ptr, const void* host, size_t bytes) {
  MemCopy(dst, device_ptr, Place::CPU(), host, bytes);
}

// ------------------------------------------------------------------ the caching device allocator

namespace {

// Blocks are kept by rounded size after Free and handed to the next Alloc of that size: every user of a device's
// memory queues its work on the device's one stream, so a block freed by the host after queuing its last reader
// may be written by work queued later. cudaMalloc synchronises the device; steady-state steps never call it.
// A failed cudaMalloc gives the cache back and tries once more before raising.
class DeviceAllocator : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* Alloc(size_t bytes) override {
    const size_t rounded = Rounded(bytes);
    void* p = TakeCached(rounded);
    if (!p) {
      SetDevice(device_);
      cudaError_t e = cudaMalloc(&p, rounded);
      if (e != cudaSuccess) {
        cudaGetLastError();
        ReleaseCached();
        e = cudaMalloc(&p, rounded);
      }
      if (e != cudaSuccess) {
        cudaGetLastError();
        FL_THROW("out of memory: CUDAPlace(", device_, ") allocation of ", bytes, " bytes failed (", InUse(),
                 " bytes in use by fluidlite): ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
      }
      system_allocs_.fetch_add(1, std::memory_order_relaxed);
      g_device_memory_used.store(true, std::memory_order_relaxed);
    }
    Count(static_cast<int64_t>(bytes));
    FL_VLOG(5) << "Alloc " << bytes << " bytes on CUDAPlace(" << device_ << ") at " << p;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    FL_VLOG(5) << "Free " << bytes << " bytes on CUDAPlace(" << device_ << ") at " << p;
    Count(-static_cast<int64_t>(bytes));
    const size_t rounded = Rounded(bytes);
    std::lock_guard<std::mutex> l(mu_);
    cache_[rounded].push_back(p);
    cached_.fetch_add(static_cast<int64_t>(rounded));
  }
  void ReleaseCached() override {
    std::lock_guard<std::mutex> l(mu_);
    if (cache_.empty()) return;
    SetDevice(device_);
    cudaStreamSynchronize(Stream(device_));  // a cached block may still be read by queued work
    for (auto& bin : cache_)
      for (void* p : bin.second) cudaFree(p);
    cache_.clear();
    cached_.store(0);
  }
  Place place() const override { return Place::CUDA(device_); }

 private:
  // 512-byte granules up to 1 MiB, then whole MiB: close sizes share blocks, and the waste stays under 1/1024 of a
  // large block plus a MiB.
  static size_t Rounded(size_t bytes) {
    if (bytes == 0) return 512;
    if (bytes < (size_t(1) << 20)) return (bytes + 511) & ~size_t(511);
    return (bytes + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
  }
  void* TakeCached(size_t rounded) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(rounded);
    if (it == cache_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_.fetch_sub(static_cast<int64_t>(rounded));
    return p;
  }
  int device_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> cache_;
};

// Page-locked host memory (CUDAPinnedPlace): copies from it to a device run asynchronously, so a freed block may
// still be the source of a queued copy. Each freed block carries an event recorded on every stream in use at its
// Free, and is handed out again only once the event has completed.
class PinnedAllocator : public Allocator {
 public:
  void* Alloc(size_t bytes) override {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095);
    void* p = TakeCached(rounded);
    if (!p) {
      cudaError_t e = cudaHostAlloc(&p, rounded, cudaHostAllocPortable);
      if (e != cudaSuccess) {
        cudaGetLastError();
        FL_THROW("out of memory: CUDAPinnedPlace allocation of ", bytes, " bytes failed: ", cudaGetErrorName(e), " (",
                 cudaGetErrorString(e), ")");
      }
      system_allocs_.fetch_add(1, std::memory_order_relaxed);
    }
    Count(static_cast<int64_t>(bytes));
    FL_VLOG(5) << "Alloc " << bytes << " bytes on CUDAPinnedPlace at " << p;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    FL_VLOG(5) << "Free " << bytes << " bytes on CUDAPinnedPlace at " << p;
    Count(-static_cast<int64_t>(bytes));
    const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095);
    Block b{p, {}};
    for (int d = 0; d < DeviceCount(); ++d) {
      if (!State(d).stream) continue;
      cudaEvent_t ev;
      SetDevice(d);
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cudaStreamSynchronize(State(d).stream);  // cannot track it: wait instead
        continue;
      }
      cudaEventRecord(ev, State(d).stream);
      b.pending.push_back(ev);
    }
    std::lock_guard<std::mutex> l(mu_);
    cache_[rounded].push_back(std::move(b));
    cached_.fetch_add(static_cast<int64_t>(rounded));
  }
  void ReleaseCached() override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& bin : cache_)
      for (Block& b : bin.second) {
        for (cudaEvent_t ev : b.pending) {
          cudaEventSynchronize(ev);
          cudaEventDestroy(ev);
        }
        cudaFreeHost(b.ptr);
      }
    cache_.clear();
    cached_.store(0);
  }
  Place place() const override { return Place::CUDAPinned(); }

 private:
  struct Block {
    void* ptr;
    std::vector<cudaEvent_t> pending;
  };
  void* TakeCached(size_t rounded) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(rounded);
    if (it == cache_.end()) return nullptr;
    for (size_t i = 0; i < it->second.size(); ++i) {
      Block& b = it->second[i];
      bool done = true;
      for (cudaEvent_t ev : b.pending) done = done && cudaEventQuery(ev) == cudaSuccess;
      if (!done) continue;
      cudaGetLastError();  // cudaEventQuery's cudaErrorNotReady is sticky until read
      for (cudaEvent_t ev : b.pending) cudaEventDestroy(ev);
      void* p = b.ptr;
      it->second.erase(it->second.begin() + i);
      cached_.fetch_sub(static_cast<int64_t>(rounded));
      return p;
    }
    cudaGetLastError();
    return nullptr;
  }
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<Block>> cache_;
};

Allocator* DeviceAllocatorFor(int device) {
  CheckDeviceId(device);
  static std::mutex mu;
  static std::vector<Allocator*>* allocators = new std::vector<Allocator*>();  // process lifetime
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(allocators->size()) <= device) allocators->resize(device + 1, nullptr);
  if (!(*allocators)[device]) (*allocators)[device] = new DeviceAllocator(device);
  return (*allocators)[device];
}

Allocator* Pinned() {
  static Allocator* pinned = new PinnedAllocator();
  return pinned;
}

// ------------------------------------------------------------------ profiling: CUDA events on the streams

// While the profiler is on, each op that runs on a GPU and each copy is bracketed by two events on the device's
// stream. Collect waits for the devices and converts the events to the host clock through an anchor event per
// device, recorded and waited for at its first span (so its host time is known to the microsecond).
class Spans {
 public:
  void Start() {
    std::lock_guard<std::mutex> l(mu_);
    active_ = true;
  }
  void Stop() {
    std::lock_guard<std::mutex> l(mu_);
    active_ = false;
  }
  int64_t Begin(int device) {
    std::lock_guard<std::mutex> l(mu_);
    if (!active_) return -1;
    cudaStream_t s = Stream(device);
    Anchor(device, s);
    Span sp{};
    sp.device = device;
    sp.start = TakeEvent();
    sp.end = TakeEvent();
    if (!sp.start || !sp.end) return -1;
    cudaEventRecord(sp.start, s);
    spans_.push_back(sp);
    return static_cast<int64_t>(spans_.size()) - 1 + base_;
  }
  void End(int device, int64_t token, const char* name, const char* category, const char* args, int64_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t i = token - base_;
    if (token < 0 || i < 0 || i >= static_cast<int64_t>(spans_.size())) return;
    Span& sp = spans_[i];
    sp.name = name;
    sp.category = category;
    sp.args = args;
    sp.bytes = bytes;
    cudaEventRecord(sp.end, Stream(device));
    sp.closed = true;
  }
  std::vector<DeviceEvent> Collect() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<DeviceEvent> out;
    for (auto& a : anchors_)
      if (a.second.event) cudaStreamSynchronize(Stream(a.first));
    for (Span& sp : spans_) {
      if (sp.closed) {
        const Anchor_& a = anchors_[sp.device];
        float t0 = 0, t1 = 0;
        if (cudaEventElapsedTime(&t0, a.event, sp.start) == cudaSuccess &&
            cudaEventElapsedTime(&t1, a.event, sp.end) == cudaSuccess) {
          const uint64_t s = a.host_ns + static_cast<uint64_t>(std::max(0.0, double(t0) * 1e6));
          const uint64_t e = a.host_ns + static_cast<uint64_t>(std::max(0.0, double(t1) * 1e6));
          out.push_back(DeviceEvent{sp.name, sp.category, sp.args, s, std::max(s, e), sp.device, sp.bytes});
        } else {
          cudaGetLastError();
        }
      }
      free_.push_back(sp.start);
      free_.push_back(sp.end);
    }
    base_ += static_cast<int64_t>(spans_.size());
    spans_.clear();
    return out;
  }

 private:
  struct Span {
    int device;
    cudaEvent_t start, end;
    const char* name;
    const char* category;
    const char* args;
    int64_t bytes;
    bool closed;
  };
  struct Anchor_ {
    cudaEvent_t event = nullptr;
    uint64_t host_ns = 0;
  };
  void Anchor(int device, cudaStream_t s) {
    Anchor_& a = anchors_[device];
    if (a.event) return;
    if (cudaEventCreate(&a.event) != cudaSuccess) {
      cudaGetLastError();
      a.event = nullptr;
      return;
    }
    cudaEventRecord(a.event, s);
    cudaEventSynchronize(a.event);
    a.host_ns = NowNs();
  }
  cudaEvent_t TakeEvent() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return e;
  }
  std::mutex mu_;
  bool active_ = false;
  std::vector<Span> spans_;
  int64_t base_ = 0;  // token of spans_[0]: tokens from before a Collect are ignored
  std::vector<cudaEvent_t> free_;
  std::unordered_map<int, Anchor_> anchors_;
};

Spans& TheSpans() {
  static Spans* s = new Spans();
  return *s;
}

// ------------------------------------------------------------------ copies

void Copy(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t bytes) {
  const int device = dst_place.is_gpu() ? dst_place.device : src_place.device;
  cudaStream_t s = Stream(device);
  const bool profiled = ProfilerEnabled();
  const int64_t span = profiled ? TheSpans().Begin(device) : -1;
  if (src_place.is_gpu() && dst_place.is_gpu() && src_place.device != dst_place.device) {
    Synchronize(src_place.device, "memcpy GPU->GPU");  // the source's writers are on its own stream
    FL_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_place.device, src, src_place.device, bytes, s));
  } else {
    // From pageable host memory the call returns once the source is staged, so the caller may reuse it at once;
    // from pinned memory it is asynchronous (the pinned allocator keeps a freed source until the copy is done).
    FL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  }
  if (span >= 0) {
    static const char* names[2][2] = {{"memcpy:CPU->CPU", "memcpy:CPU->GPU"}, {"memcpy:GPU->CPU", "memcpy:GPU->GPU"}};
    TheSpans().End(device, span, names[src_place.is_gpu()][dst_place.is_gpu()], "GPUMemcpy", nullptr,
                   static_cast<int64_t>(bytes));
  }
  // The host reads what it copied to itself next (a fetch, a kernel's count): wait.
  if (dst_place.is_host()) Synchronize(device, "memcpy GPU->CPU");
}

// ------------------------------------------------------------------ the table

std::string DeviceName(int device) {
  CheckDeviceId(device);
  cudaDeviceProp prop;
  FL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

const CudaApi kApi = {
    /*device_count=*/&DeviceCount,
    /*device_name=*/&DeviceName,
    /*device_allocator=*/&DeviceAllocatorFor,
    /*pinned_allocator=*/&Pinned,
    /*memcpy=*/&Copy,
    /*stream=*/[](int device) -> const void* { return Stream(device); },
    /*synchronize=*/[](int device) { Synchronize(device); },
    /*profile_start=*/[]() { TheSpans().Start(); },
    /*profile_stop=*/[]() { TheSpans().Stop(); },
    /*span_begin=*/[](int device) { return TheSpans().Begin(device); },
    /*span_end=*/
    [](int device, int64_t token, const char* name, const char* category, const char* args, int64_t bytes) {
      TheSpans().End(device, token, name, category, args, bytes);
    },
    /*collect=*/[]() { return TheSpans().Collect(); },
    /*add_library_dir=*/&AddLibraryDir,
    /*blas_library=*/&BlasLibrary,
    /*zero_bytes=*/&ZeroBytesOnDevice,
    /*sum_arrays=*/&SumArraysOnDevice,
};

struct Registrar {
  Registrar() { RegisterCudaApi(&kApi); }
} registrar;

}  // namespace
}  // namespace cuda
}  // namespace fl
