// TEMPORARY, delete once csrc/cuda/device.cu defines fl::cuda::ErrorSink (csrc/cuda/device.h declares it; at the
// time of writing nothing defines it, and _core would not import with the symbol undefined). A weak definition:
// the linker takes device.cu's strong one as soon as it exists. This one gives each device a zeroed error slot that
// kernels can write, but nothing reads it back, so bad ids or labels found on the device do NOT raise with it.
#include "cuda/device.h"

namespace fl {
namespace cuda {

__attribute__((weak)) DeviceErrorSink ErrorSink(const ExecutionContext& ctx, const char*, const char*) {
  constexpr int kMaxDevices = 64;
  static DeviceError* slots[kMaxDevices] = {};
  const int d = ctx.place().device;
  FL_ENFORCE(d >= 0 && d < kMaxDevices, "ErrorSink: device ", d, " out of range");
  if (!slots[d]) {
    SetDevice(d);
    FL_CUDA_CHECK(cudaMalloc(&slots[d], sizeof(DeviceError)));
    FL_CUDA_CHECK(cudaMemset(slots[d], 0, sizeof(DeviceError)));
  }
  return DeviceErrorSink{slots[d], 1};
}

}  // namespace cuda
}  // namespace fl
