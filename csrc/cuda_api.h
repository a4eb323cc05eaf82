// What a CUDA build adds to the core. The core (csrc/*.cc, kernels/*.cc) compiles the same with and without CUDA;
// the CUDA runtime (csrc/cuda/*.cu, built by nvcc when setup.py finds it) fills this table from a static
// initializer, so `is_compiled_with_cuda()` means "the table is set" and a CPU-only build is today's build.
// Everything that needs the CUDA headers lives behind it: the core calls these pointers and nothing else.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtype.h"
#include "place.h"

namespace fl {

class Allocator;

// A span of work on a device's stream, timed by CUDA events: an op's kernels (category "GPUKernel") or a copy
// ("GPUMemcpy"). Times are on the host's NowNs clock (csrc/cuda/profiling.cu anchors the events to it).
struct DeviceEvent {
  const char* name;      // the op type, or "memcpy:CPU->GPU" (interned)
  const char* category;  // "GPUKernel" or "GPUMemcpy"
  const char* args;      // interned JSON object body or null
  uint64_t start_ns, end_ns;
  int device;
  int64_t bytes;  // a copy's bytes, else -1
};

struct CudaApi {
  int (*device_count)();  // visible devices; 0 without a driver or device
  std::string (*device_name)(int device);
  Allocator* (*device_allocator)(int device);  // the caching allocator of CUDAPlace(device)
  Allocator* (*pinned_allocator)();            // CUDAPinnedPlace's
  // A copy where at least one side is a GPU (MemCopy calls it after recording and logging): asynchronous on the
  // stream of the GPU side; returns when the host may reuse or read host memory (a copy to pageable host memory
  // waits for the stream).
  void (*memcpy)(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t bytes);
  const void* (*stream)(int device);  // the device's compute stream, for log lines ("by stream(0x...)")
  void (*synchronize)(int device);    // waits for everything queued on the device's stream
  // Profiling: while on, the executor brackets each op that runs on a GPU with begin/end (CUDA events on the
  // stream); collect waits for the devices and hands over the recorded spans (and forgets them).
  void (*profile_start)();
  void (*profile_stop)();
  int64_t (*span_begin)(int device);
  void (*span_end)(int device, int64_t token, const char* name, const char* category, const char* args, int64_t bytes);
  std::vector<DeviceEvent> (*collect)();
  // cuBLAS is opened at first use: where to look first (the nvidia-cublas wheel's folder, from Python), and where it
  // was found or why not.
  void (*add_library_dir)(const std::string& dir);
  std::string (*blas_library)();
  // The core's own arithmetic on device memory (place_math.h), queued on the device's stream.
  void (*zero_bytes)(int device, void* dst, size_t bytes);
  void (*sum_arrays)(int device, DType dtype, const void* const* srcs, int n, void* dst, int64_t count);
};

const CudaApi* Cuda();  // null in a CPU-only build
void RegisterCudaApi(const CudaApi* api);

// Set by the device allocator's first allocation and by the first DLPack import of device memory: until then no
// tensor can live on a GPU, and the executor skips looking for inputs to transfer between places.
extern std::atomic<bool> g_device_memory_used;
inline bool DeviceMemoryUsed() { return g_device_memory_used.load(std::memory_order_relaxed); }

}  // namespace fl
