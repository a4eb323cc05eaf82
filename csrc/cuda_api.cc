#include "cuda_api.h"

namespace fl {
namespace {
const CudaApi* g_cuda = nullptr;
}

std::atomic<bool> g_device_memory_used{false};

const CudaApi* Cuda() { return g_cuda; }
void RegisterCudaApi(const CudaApi* api) { g_cuda = api; }

}  // namespace fl
