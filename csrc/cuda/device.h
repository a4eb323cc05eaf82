// The CUDA side of fluidlite, for .cu files only (it includes the CUDA headers; the core sees csrc/cuda_api.h).
//
// One compute stream per device: every kernel, copy and cuBLAS call of CUDAPlace(d) is queued on Stream(d), so
// work on a device runs in program order and the caching allocator can hand a freed block to the next kernel
// without an event (the block's last reader was queued earlier on the same stream). The host waits only where it
// reads device memory (a fetch, a device-to-host copy, a kernel that needs a size) and at the end of each run.
//
// A kernel file registers kernels for ops defined in kernels/*.cc:
//
//   FL_REGISTER_CUDA_KERNELS(relu) {            // adds CUDA kernels to the op `relu` (its .cc defines the rest)
//     ops.Kernel<float, double>(kRelu);         // f(const ExecutionContext&, TypeTag<T>)
//   }
//
// and launches with Launch(ctx, n, kernel, args...) (a grid-stride 1-D launch on the op's stream, checked).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_api.h"
#include "enforce.h"
#include "op_context.h"
#include "op_registry.h"

namespace fl {
namespace cuda {

// Throws EnforceNotMet naming the call and CUDA's error, e.g. "cudaMalloc(&p, 1024) failed: cudaErrorMemoryAllocation
// (out of memory)".
#define FL_CUDA_CHECK(call)                                                                                      \
  do {                                                                                                           \
    cudaError_t fl_cuda_err_ = (call);                                                                           \
    if (fl_cuda_err_ != cudaSuccess)                                                                             \
      FL_THROW(#call, " failed: ", cudaGetErrorName(fl_cuda_err_), " (", cudaGetErrorString(fl_cuda_err_), ")"); \
  } while (0)

int DeviceCount();
// Makes `device` current on this thread (cheap when it already is) and checks it exists.
void SetDevice(int device);
// The compute stream of CUDAPlace(device), created on first use; sets the device current.
cudaStream_t Stream(int device);
inline cudaStream_t Stream(const ExecutionContext& ctx) { return Stream(ctx.place().device); }
// Waits for the stream; a failed kernel's error surfaces here, naming `what`.
void Synchronize(int device, const char* what = "cudaStreamSynchronize");
int MultiprocessorCount(int device);

// After a launch: a bad configuration (or an earlier asynchronous fault) raises naming the op.
void CheckLaunch(const char* what);

// Grid-stride 1-D launch over n elements: kernel<<<blocks, 256, 0, stream>>>(n, args...). n == 0 launches nothing.
constexpr int kThreads = 256;
inline int BlocksFor(int64_t n, int device) {
  const int64_t max_blocks = int64_t(MultiprocessorCount(device)) * 32;  // enough to fill the device
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, max_blocks)));
}
template <typename Kernel, typename... Args>
void Launch(const ExecutionContext& ctx, int64_t n, Kernel kernel, Args... args) {
  if (n <= 0) return;
  const int device = ctx.place().device;
  kernel<<<BlocksFor(n, device), kThreads, 0, Stream(device)>>>(n, args...);
  CheckLaunch(ctx.Type().c_str());
}
// for (i = first index of this thread; i < n; i += stride) inside a kernel.
#define FL_CUDA_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

// Bad input found on the device (an id out of range, a label past the classes) cannot throw from a kernel. The
// kernel records the first one in the device's error slot and the runtime raises at the next wait (the end of the
// run at the latest, or a copy to the host), naming the op and what it found:
//
//   DeviceErrorSink err = ErrorSink(ctx, "Ids", "an id of Ids");        // host side, before the launch
//   ... in the kernel: if (id < 0 || id >= rows) RaiseDeviceError(err, i, id, rows);
//
// raises "op lookup_table: an id of Ids (input Ids 'ids') is out of range: element 5 is 1000, expected [0, 100)"; a
// limit <= 0 names no range ("op elementwise_div: a divisor in Y (integer division by zero) (input Y 'y'): element 3
// is 0"). Free until a kernel uses it; then one 32-byte copy per wait.
struct DeviceError {
  int code;  // 0: none; else 1 + the index of the sink's description
  int pad;
  int64_t index, value, limit;
};
struct DeviceErrorSink {
  DeviceError* slot;
  int code;
};
DeviceErrorSink ErrorSink(const ExecutionContext& ctx, const char* slot, const char* what);
#ifdef __CUDACC__
__device__ inline void RaiseDeviceError(DeviceErrorSink sink, int64_t index, int64_t value, int64_t limit) {
  if (atomicCAS(&sink.slot->code, 0, sink.code) == 0) {
    sink.slot->index = index;
    sink.slot->value = value;
    sink.slot->limit = limit;
  }
}
#endif

// Device memory for a kernel's temporaries, freed (back to the caching allocator) when the returned holder goes;
// safe to drop right after the launches that use it (stream order, above).
std::shared_ptr<Allocation> Scratch(const Place& place, size_t bytes);

// Copies `bytes` from the device to the host and waits (a kernel that needs a count or a flag on the host). Goes
// through MemCopy, so it is recorded and logged like every copy.
void CopyToHost(const Place& src, const void* device_ptr, void* host, size_t bytes);
void CopyToDevice(const Place& dst, void* device_ptr, const void* host, size_t bytes);

// ---- cuBLAS, opened at first use from the nvidia-cublas wheel or the system (blas.cu). Row-major, as the CPU
// helpers (kernels/helpers/blas.h): C[m, n] = alpha * op(A) op(B) + beta * C, with leading dimensions in elements.
template <typename T>
void Gemm(int device, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);
// `batch` products C_i = op(A_i) op(B_i), the i-th operands `stride_*` elements apart (stride 0: shared).
template <typename T>
void GemmStridedBatched(int device, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                        int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, T beta, T* c,
                        int64_t ldc, int64_t stride_c, int64_t batch);
// Where cuBLAS was loaded from, or why it could not be (loads it).
std::string BlasLibrary();
void AddLibraryDir(const std::string& dir);  // searched before the loader's path

// The core's arithmetic on device memory (place_math.cu, behind csrc/place_math.h).
void ZeroBytesOnDevice(int device, void* dst, size_t bytes);
void SumArraysOnDevice(int device, DType dtype, const void* const* srcs, int n, void* dst, int64_t count);

// Registers CUDA kernels on an op another file defines (order of static initializers does not matter).
struct CudaKernelBuilder {
  explicit CudaKernelBuilder(OpInfo* info) : op(info) {}
  template <typename... Ts, typename F>
  CudaKernelBuilder& Kernel(F f) {
    op.Kernel<Ts...>(PlaceKind::CUDA, f);
    return *this;
  }
  OpBuilder op;
};
struct CudaKernelRegistrar {
  CudaKernelRegistrar(const char* type, void (*body)(CudaKernelBuilder&)) {
    CudaKernelBuilder b(OpRegistry::Instance().GetOrCreate(type));
    body(b);
  }
};

}  // namespace cuda
}  // namespace fl

#define FL_REGISTER_CUDA_KERNELS(type)                                                              \
  static void fl_register_cuda_##type(::fl::cuda::CudaKernelBuilder& ops);                          \
  static ::fl::cuda::CudaKernelRegistrar fl_cuda_registrar_##type(#type, &fl_register_cuda_##type); \
  static void fl_register_cuda_##type(::fl::cuda::CudaKernelBuilder& ops)
