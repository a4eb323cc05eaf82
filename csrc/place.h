// Where a tensor lives. Kernels are keyed by the place's kind; the device id picks the GPU.
#pragma once
#include <string>

namespace fl {

// CUDAPinned is page-locked host memory (cudaHostAlloc): host code reads it like CPU memory and copies from it to a
// GPU run asynchronously. Kernels are keyed by CPU and CUDA only: a pinned tensor is read by CPU kernels.
enum class PlaceKind : int { CPU = 0, CUDA = 1, CUDAPinned = 2 };
constexpr int kNumPlaceKinds = 2;  // the kinds kernels are registered for

struct Place {
  PlaceKind kind = PlaceKind::CPU;
  int device = 0;

  static Place CPU() { return Place{PlaceKind::CPU, 0}; }
  static Place CUDA(int dev) { return Place{PlaceKind::CUDA, dev}; }
  static Place CUDAPinned() { return Place{PlaceKind::CUDAPinned, 0}; }
  bool is_cpu() const { return kind == PlaceKind::CPU; }
  bool is_gpu() const { return kind == PlaceKind::CUDA; }
  bool is_pinned() const { return kind == PlaceKind::CUDAPinned; }
  bool is_host() const { return kind != PlaceKind::CUDA; }  // the host can read it (CPU or pinned)
  bool operator==(const Place& o) const { return kind == o.kind && (!is_gpu() || device == o.device); }
  bool operator!=(const Place& o) const { return !(*this == o); }
  // Fluid's spelling: "CPUPlace", "CUDAPlace(0)".
  std::string ToString() const {
    return is_cpu() ? "CPUPlace" : is_pinned() ? "CUDAPinnedPlace" : "CUDAPlace(" + std::to_string(device) + ")";
  }
  // Short form for memcpy directions: "CPU" (pinned memory too), "GPU".
  const char* ShortName() const { return is_gpu() ? "GPU" : "CPU"; }
};

}  // namespace fl
