// One allocator per place. Counts bytes in use and the peak, so `fluid.core.memory_stats()` and the
// benchmarks can report memory, and VLOG(5) traces every allocation and free. The CPU allocator keeps
// freed blocks of 64 KiB and more for reuse by size (the executor frees large temporaries after their
// last use in every run, and the next run asks for the same sizes again): at most as many bytes as the
// peak in use, all returned by `core.release_cached_memory()`.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "place.h"

namespace fl {

struct MemoryStats {
  int64_t bytes_in_use = 0;       // in live allocations
  int64_t peak_bytes = 0;         // the most bytes_in_use since the last ResetPeak
  int64_t num_allocs = 0;         // Alloc calls (served from the cache or the system)
  int64_t num_frees = 0;          // Free calls
  int64_t bytes_cached = 0;       // freed blocks kept for reuse (CPU: blocks of 64 KiB and more)
  int64_t num_system_allocs = 0;  // blocks taken from the system (not from the cache)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Alloc(size_t bytes) = 0;
  virtual void Free(void* p, size_t bytes) = 0;
  virtual Place place() const = 0;
  MemoryStats Stats() const;
  void ResetPeak();
  // For the profiler's memory fields: bytes in use now, and the most since ResetProfilePeak (a peak of its own,
  // so profiling does not reset the one memory_stats() reports).
  int64_t InUse() const { return in_use_.load(std::memory_order_relaxed); }
  int64_t ProfilePeak() const { return profile_peak_.load(std::memory_order_relaxed); }
  void ResetProfilePeak() { profile_peak_.store(in_use_.load()); }
  virtual void ReleaseCached() {}  // give cached blocks back to the system

 protected:
  void Count(int64_t delta);
  std::atomic<int64_t> in_use_{0}, peak_{0}, profile_peak_{0}, allocs_{0}, frees_{0}, cached_{0}, system_allocs_{0};
};

Allocator& GetAllocator(const Place& place);

// A block of device memory owned by a shared_ptr; tensors share it by reference count.
class Allocation {
 public:
  Allocation(void* ptr, size_t size, Place place, Allocator* owner)
      : ptr_(ptr), size_(size), place_(place), owner_(owner) {}
  ~Allocation() {
    if (owner_) owner_->Free(ptr_, size_);
  }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  const Place& place() const { return place_; }
  bool owned() const { return owner_ != nullptr; }
  // Bumped by every Tensor::mutable_data on this buffer (every kernel output, feed, load, set): a pass that
  // caches values computed from a parameter (folded batch_norm weights) recomputes them when it changed.
  uint64_t writes() const { return writes_; }
  void NoteWrite() { ++writes_; }

 private:
  uint64_t writes_ = 0;
  void* ptr_;
  size_t size_;
  Place place_;
  Allocator* owner_;  // null: borrowed memory (e.g. a numpy buffer during feed), not freed here
};

std::shared_ptr<Allocation> AllocateShared(const Place& place, size_t bytes);

}  // namespace fl
