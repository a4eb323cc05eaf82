#include "place_math.h"

#include <cstring>

#include "cuda_api.h"
#include "enforce.h"
#include "sum_into.h"

namespace fl {

void ZeroBytes(const Place& place, void* dst, size_t bytes) {
  if (bytes == 0) return;
  if (place.is_host()) {
    std::memset(dst, 0, bytes);
    return;
  }
  const CudaApi* cuda = Cuda();
  FL_ENFORCE(cuda != nullptr, "zeroing memory on ", place.ToString(), " needs a CUDA build");
  cuda->zero_bytes(place.device, dst, bytes);
}

void SumArrays(const Place& place, DType dtype, const std::vector<const void*>& srcs, void* dst, int64_t n) {
  FL_ENFORCE(dtype == DType::FP32 || dtype == DType::FP64, "SumArrays: float32 or float64, got ", DTypeName(dtype));
  FL_ENFORCE(!srcs.empty(), "SumArrays: nothing to add");
  if (n == 0) return;
  if (!place.is_host()) {
    const CudaApi* cuda = Cuda();
    FL_ENFORCE(cuda != nullptr, "adding arrays on ", place.ToString(), " needs a CUDA build");
    cuda->sum_arrays(place.device, dtype, srcs.data(), static_cast<int>(srcs.size()), dst, n);
    return;
  }
  if (srcs.size() == 1) {
    if (srcs[0] != dst) std::memcpy(dst, srcs[0], n * SizeOf(dtype));
    return;
  }
  auto sum = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    std::vector<const T*> in;
    for (const void* s : srcs) in.push_back(static_cast<const T*>(s));
    SumInto<T>(in, out, n);
  };
  if (dtype == DType::FP32) sum(static_cast<float*>(dst));
  else sum(static_cast<double*>(dst));
}

}  // namespace fl
