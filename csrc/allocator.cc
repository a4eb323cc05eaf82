#include "allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "cuda_api.h"
#include "enforce.h"
#include "logging.h"

namespace fl {

MemoryStats Allocator::Stats() const {
  MemoryStats s;
  s.bytes_in_use = in_use_.load(std::memory_order_relaxed);
  s.peak_bytes = peak_.load(std::memory_order_relaxed);
  s.num_allocs = allocs_.load(std::memory_order_relaxed);
  s.num_frees = frees_.load(std::memory_order_relaxed);
  s.bytes_cached = cached_.load(std::memory_order_relaxed);
  s.num_system_allocs = system_allocs_.load(std::memory_order_relaxed);
  return s;
}

void Allocator::ResetPeak() { peak_.store(in_use_.load()); }

void Allocator::Count(int64_t delta) {
  int64_t now = in_use_.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (delta > 0) {
    allocs_.fetch_add(1, std::memory_order_relaxed);
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
    peak = profile_peak_.load(std::memory_order_relaxed);
    while (now > peak && !profile_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  } else {
    frees_.fetch_add(1, std::memory_order_relaxed);
  }
}

namespace {

class CPUAllocator : public Allocator {
 public:
  void* Alloc(size_t bytes) override {
    // 64-byte alignment: whole cache lines, and aligned AVX-512 loads.
    const size_t rounded = Rounded(bytes);
    void* p = rounded >= kCacheMin ? TakeCached(rounded) : nullptr;
    if (!p) {
      p = std::aligned_alloc(64, rounded);
      FL_ENFORCE(p != nullptr, "out of memory: CPU allocation of ", bytes, " bytes failed");
      system_allocs_.fetch_add(1, std::memory_order_relaxed);
    }
    Count(static_cast<int64_t>(bytes));
    FL_VLOG(5) << "Alloc " << bytes << " bytes on CPUPlace at " << p;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    FL_VLOG(5) << "Free " << bytes << " bytes on CPUPlace at " << p;
    const size_t rounded = Rounded(bytes);
    Count(-static_cast<int64_t>(bytes));
    if (rounded >= kCacheMin && Keep(p, rounded)) return;
    std::free(p);
  }
  void ReleaseCached() override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& bin : cache_)
      for (void* p : bin.second) std::free(p);
    cache_.clear();
    cached_.store(0);
  }
  Place place() const override { return Place::CPU(); }

 private:
  static constexpr size_t kCacheMin = size_t(64) << 10;
  static size_t Rounded(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) & ~size_t(63); }

  void* TakeCached(size_t rounded) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(rounded);
    if (it == cache_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_.fetch_sub(static_cast<int64_t>(rounded));
    return p;
  }
  // Caches the block unless the cache would outgrow the peak in use (then the caller frees it).
  bool Keep(void* p, size_t rounded) {
    std::lock_guard<std::mutex> l(mu_);
    if (cached_.load() + static_cast<int64_t>(rounded) > peak_.load(std::memory_order_relaxed)) return false;
    cache_[rounded].push_back(p);
    cached_.fetch_add(static_cast<int64_t>(rounded));
    return true;
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> cache_;  // rounded size -> free blocks
};

}  // namespace

Allocator& GetAllocator(const Place& place) {
  static CPUAllocator* cpu = new CPUAllocator();  // lives for the process: tensors may outlive statics
  if (place.is_cpu()) return *cpu;
  const CudaApi* cuda = Cuda();
  FL_ENFORCE(cuda != nullptr, "fluidlite was built without CUDA; ", place.ToString(), " is not available");
  if (place.is_pinned()) return *cuda->pinned_allocator();
  return *cuda->device_allocator(place.device);  // checks the device id
}

std::shared_ptr<Allocation> AllocateShared(const Place& place, size_t bytes) {
  Allocator& a = GetAllocator(place);
  void* p = a.Alloc(bytes);
  return std::make_shared<Allocation>(p, bytes, place, &a);
}

}  // namespace fl
