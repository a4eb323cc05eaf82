// A dense tensor: dims, dtype, place, a ref-counted buffer (shared by slices and views) and an optional
// LoD. Buffers are reused across runs when the new size fits, so steady-state runs do not allocate.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "allocator.h"
#include "ddim.h"
#include "dtype.h"
#include "enforce.h"
#include "place.h"

namespace fl {

using LoD = std::vector<std::vector<size_t>>;

class Tensor {
 public:
  Tensor() = default;

  const DDim& dims() const { return dims_; }
  void Resize(const DDim& dims) { dims_ = dims; }
  int64_t numel() const { return dims_.numel(); }
  int rank() const { return dims_.size(); }
  DType dtype() const { return dtype_; }
  const Place& place() const { return place_; }
  bool IsInitialized() const { return holder_ != nullptr; }
  size_t nbytes() const { return dtype_ == DType::UNDEFINED ? 0 : numel() * SizeOf(dtype_); }

  // Allocates (or reuses) storage for dims() elements of `dtype` on `place` and returns it.
  void* mutable_data(const Place& place, DType dtype);
  // Identifies the buffer's contents: it changes whenever any tensor sharing the buffer asks for write access
  // (mutable_data) or the tensor gets another buffer. {nullptr, 0} when uninitialized.
  std::pair<const void*, uint64_t> data_version() const {
    return holder_ ? std::pair<const void*, uint64_t>{holder_.get(), holder_->writes()}
                   : std::pair<const void*, uint64_t>{nullptr, 0};
  }
  template <typename T>
  T* mutable_data(const Place& place = Place::CPU()) {
    return static_cast<T*>(mutable_data(place, DTypeOf<T>::value));
  }
  template <typename T>
  T* mutable_data(const DDim& dims, const Place& place = Place::CPU()) {
    dims_ = dims;
    return mutable_data<T>(place);
  }

  // Throws unless the buffer covers dims() (dims can be ahead of the buffer when a Resize was not
  // followed by a successful mutable_data, e.g. after an error): reads never run past the buffer.
  const void* raw_data() const {
    FL_ENFORCE(holder_ != nullptr, "tensor holds no memory (it was never written)");
    FL_ENFORCE(dims_.numel() >= 0 && offset_ + nbytes() <= holder_->size(), "tensor dims ", dims_.ToString(), " (",
               DTypeName(dtype_), ") do not fit its buffer of ", holder_->size() - offset_,
               " bytes (it was resized but not rewritten)");
    return static_cast<const char*>(holder_->ptr()) + offset_;
  }
  void* raw_mutable() const { return const_cast<void*>(raw_data()); }
  template <typename T>
  const T* data() const {
    FL_ENFORCE(DTypeOf<T>::value == dtype_, "tensor holds ", DTypeName(dtype_), ", not ", DTypeName(DTypeOf<T>::value));
    return static_cast<const T*>(raw_data());
  }

  // Shares the buffer (no copy): the Fluid ShareDataWith used by reshape, views and step inputs.
  void ShareDataWith(const Tensor& src) {
    holder_ = src.holder_;
    offset_ = src.offset_;
    dims_ = src.dims_;
    dtype_ = src.dtype_;
    place_ = src.place_;
  }
  // Rows [begin, end) of dim 0, sharing memory.
  Tensor Slice(int64_t begin, int64_t end) const;

  const LoD& lod() const { return lod_; }
  // A new LoD (an equal one is not rewritten). Each change takes a process-unique version (0: no LoD), copied with
  // the tensor, so equal versions mean equal LoDs: the profiler compares versions, not offsets.
  void set_lod(const LoD& lod) {
    if (lod == lod_) return;
    lod_ = lod;
    lod_version_ = lod_.empty() ? 0 : NextLoDVersion();
  }
  uint64_t lod_version() const { return lod_version_; }
  std::string LoDString() const;  // Fluid's "{}" / "{{0, 2, 5}}" / "{{0, 1, 2}{0, 2, 5}}"

  const std::shared_ptr<Allocation>& holder() const { return holder_; }
  size_t offset() const { return offset_; }
  // Wraps external memory (a numpy buffer) without copying; `keep_alive` owns it.
  void ResetHolder(std::shared_ptr<Allocation> holder, size_t offset, DType dtype, const Place& place) {
    holder_ = std::move(holder);
    offset_ = offset;
    dtype_ = dtype;
    place_ = place;
  }
  void Clear() {
    holder_.reset();
    offset_ = 0;
    dtype_ = DType::UNDEFINED;
  }

 private:
  DDim dims_;
  DType dtype_ = DType::UNDEFINED;
  Place place_;
  std::shared_ptr<Allocation> holder_;
  size_t offset_ = 0;
  LoD lod_;
  uint64_t lod_version_ = 0;
  static uint64_t NextLoDVersion();
};

// Fluid's spelling of a LoD (its operator<<): "{}", "{{0, 2, 5}}", "{{0, 1, 2}{0, 2, 5}}". With max_offsets > 0, a
// level of more offsets is shortened to its first max_offsets - 2, ", ..." and its last (profiler args).
std::string LoDString(const LoD& lod, size_t max_offsets = 0);

// Why `lod` is not a valid LoD (Fluid's CheckLoD), or "" if it is: every level has at least 2 offsets,
// starts at 0 and never decreases; level i ends at the entry count of level i+1; with rows >= 0 the last
// level ends at rows (the tensor's dims[0]), with rows < 0 only the structure is checked.
std::string LoDProblem(const LoD& lod, int64_t rows);
// Lengths per level ({{2, 3}}) to offsets ({{0, 2, 5}}) and back.
LoD LengthsToOffsets(const std::vector<std::vector<size_t>>& lengths);
std::vector<std::vector<size_t>> OffsetsToLengths(const LoD& lod);

// Copies src (all of it, any place) into dst on dst_place, resizing dst; records a memcpy event and
// logs `memory::Copy N Bytes from A to B` at VLOG(4).
void TensorCopy(const Tensor& src, const Place& dst_place, Tensor* dst);

// Raw copy between places with the same instrumentation. Every byte fluidlite moves goes through here.
void MemCopy(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t bytes);

}  // namespace fl
