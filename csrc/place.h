// Where a tensor lives. Kernels are keyed by the place's kind; the device id picks the GPU.
#pragma once
#include <string>

namespace fl {

enum class PlaceKind : int { CPU = 0, CUDA = 1 };
constexpr int kNumPlaceKinds = 2;

struct Place {
  PlaceKind kind = PlaceKind::CPU;
  int device = 0;

  static Place CPU() { return Place{PlaceKind::CPU, 0}; }
  static Place CUDA(int dev) { return Place{PlaceKind::CUDA, dev}; }
  bool is_cpu() const { return kind == PlaceKind::CPU; }
  bool is_gpu() const { return kind == PlaceKind::CUDA; }
  bool operator==(const Place& o) const { return kind == o.kind && (is_cpu() || device == o.device); }
  bool operator!=(const Place& o) const { return !(*this == o); }
  // Fluid's spelling: "CPUPlace", "CUDAPlace(0)".
  std::string ToString() const { return is_cpu() ? "CPUPlace" : "CUDAPlace(" + std::to_string(device) + ")"; }
  // Short form for memcpy directions: "CPU", "GPU".
  const char* ShortName() const { return is_cpu() ? "CPU" : "GPU"; }
};

}  // namespace fl
