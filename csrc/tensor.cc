#include "tensor.h"

#include <atomic>
#include <cstring>

#include "cuda_api.h"
#include "logging.h"
#include "profiler.h"

namespace fl {

void* Tensor::mutable_data(const Place& place, DType dtype) {
  int64_t n = dims_.numel();
  FL_ENFORCE(n >= 0, "cannot allocate a tensor with unknown dims ", dims_.ToString());
  // dims come from user attrs/feeds: an overflowing size would allocate a tiny buffer and the kernel
  // would then write far past it.
  size_t bytes = SizeOf(dtype);
  for (int64_t d : dims_)
    FL_ENFORCE(!__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes), "tensor dims ", dims_.ToString(), " of ",
               DTypeName(dtype), " are too large to allocate");
  if (!holder_ || holder_->place() != place || holder_->size() < offset_ + bytes || !holder_->owned()) {
    holder_ = AllocateShared(place, bytes);
    offset_ = 0;
  }
  dtype_ = dtype;
  place_ = place;
  holder_->NoteWrite();
  return static_cast<char*>(holder_->ptr()) + offset_;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  FL_ENFORCE(holder_ != nullptr, "cannot slice an uninitialized tensor");
  FL_ENFORCE(dims_.size() >= 1 && begin >= 0 && begin <= end && end <= dims_[0], "slice [", begin, ", ", end,
             ") is out of range for dims ", dims_.ToString());
  Tensor t;
  t.holder_ = holder_;
  t.dtype_ = dtype_;
  t.place_ = place_;
  int64_t row = dims_[0] == 0 ? 0 : numel() / dims_[0];
  t.offset_ = offset_ + static_cast<size_t>(begin * row) * SizeOf(dtype_);
  t.dims_ = dims_;
  t.dims_[0] = end - begin;
  return t;
}

uint64_t Tensor::NextLoDVersion() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string LoDString(const LoD& lod, size_t max_offsets) {
  std::string s = "{";
  for (size_t l = 0; l < lod.size(); ++l) {  // no separator between levels, as Fluid's operator<<
    s += "{";
    const bool shorten = max_offsets > 2 && lod[l].size() > max_offsets;
    for (size_t i = 0; i < lod[l].size(); ++i) {
      if (shorten && i == max_offsets - 2) {
        s += ", ...";
        i = lod[l].size() - 1;
      }
      if (i) s += ", ";
      s += std::to_string(lod[l][i]);
    }
    s += "}";
  }
  return s + "}";
}

std::string Tensor::LoDString() const { return fl::LoDString(lod_); }

std::string LoDProblem(const LoD& lod, int64_t rows) {
  for (size_t l = 0; l < lod.size(); ++l) {
    const auto& level = lod[l];
    if (level.size() < 2) return Str("level ", l, " has ", level.size(), " offsets (at least 2 are needed)");
    if (level.front() != 0) return Str("level ", l, " starts at ", level.front(), ", not 0");
    for (size_t i = 1; i < level.size(); ++i)
      if (level[i] < level[i - 1])
        return Str("level ", l, " decreases at position ", i, " (", level[i - 1], " then ", level[i], ")");
  }
  for (size_t l = 0; l + 1 < lod.size(); ++l)  // each level indexes the entries of the next one
    if (lod[l].back() != lod[l + 1].size() - 1)
      return Str("level ", l, " ends at ", lod[l].back(), " but level ", l + 1, " has ", lod[l + 1].size() - 1,
                 " entries");
  if (rows >= 0 && !lod.empty() && lod.back().back() != static_cast<size_t>(rows))
    return Str("the last level ends at ", lod.back().back(), " but the tensor has ", rows, " rows");
  return "";
}

LoD LengthsToOffsets(const std::vector<std::vector<size_t>>& lengths) {
  LoD lod;
  for (const auto& level : lengths) {
    std::vector<size_t> offsets{0};
    for (size_t n : level) offsets.push_back(offsets.back() + n);
    lod.push_back(std::move(offsets));
  }
  return lod;
}

std::vector<std::vector<size_t>> OffsetsToLengths(const LoD& lod) {
  std::vector<std::vector<size_t>> lengths;
  for (const auto& level : lod) {
    std::vector<size_t> l;
    for (size_t i = 1; i < level.size(); ++i) l.push_back(level[i] - level[i - 1]);
    lengths.push_back(std::move(l));
  }
  return lengths;
}

void MemCopy(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t bytes) {
  if (bytes == 0) return;
  RecordMemcpy rec(src_place, dst_place, bytes);
  const bool log = FL_VLOG_IS_ON(4);
  if (log) {  // say why: the cause, the variables, the op (profiler.h: CopyCause)
    const CopyAttribution why = DescribeCopy(src, dst);
    if (rec.active()) rec.SetArgs(Intern(why.Json()));
    // Fluid's line: "memory::Copy 4 Bytes from CPUPlace to CUDAPlace(0) by stream(0x...)", then the cause.
    const CudaApi* cuda = src_place.is_gpu() || dst_place.is_gpu() ? Cuda() : nullptr;
    std::string by;
    if (cuda) by = Str(" by stream(", cuda->stream(src_place.is_gpu() ? src_place.device : dst_place.device), ")");
    FL_VLOG(4) << "memory::Copy " << bytes << " Bytes from " << src_place.ToString() << " to " << dst_place.ToString()
               << by << why.Text();
  } else if (rec.active()) {
    rec.SetArgs(CopyArgs(src, dst));
  }
  if (src_place.is_host() && dst_place.is_host()) {
    std::memcpy(dst, src, bytes);
  } else {
    const CudaApi* cuda = Cuda();
    FL_ENFORCE(cuda != nullptr, "copy from ", src_place.ToString(), " to ", dst_place.ToString(),
               " needs a CUDA build");
    cuda->memcpy(dst_place, dst, src_place, src, bytes);
  }
}

void TensorCopy(const Tensor& src, const Place& dst_place, Tensor* dst) {
  FL_ENFORCE(src.IsInitialized(), "cannot copy an uninitialized tensor");
  if (&src == dst) return;
  dst->Resize(src.dims());
  void* out = dst->mutable_data(dst_place, src.dtype());
  MemCopy(dst_place, out, src.place(), src.raw_data(), src.nbytes());
  dst->set_lod(src.lod());
}

}  // namespace fl
