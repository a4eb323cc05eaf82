// Tensor dimensions: a fixed-capacity inline array, so shapes never touch the heap on the hot path.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "enforce.h"

namespace fl {

class DDim {
 public:
  static constexpr int kMaxRank = 9;

  DDim() = default;
  DDim(std::initializer_list<int64_t> dims) { Assign(dims.begin(), dims.size()); }
  explicit DDim(const std::vector<int64_t>& dims) { Assign(dims.data(), dims.size()); }
  DDim(const int64_t* dims, size_t n) { Assign(dims, n); }

  int size() const { return rank_; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  const int64_t* data() const { return d_; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + rank_; }

  // Product of dims; -1 if any dim is unknown (negative).
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) {
      if (d_[i] < 0) return -1;
      n *= d_[i];
    }
    return n;
  }
  // Product of dims in [begin, end).
  int64_t Product(int begin, int end) const {
    int64_t n = 1;
    for (int i = begin; i < end; ++i) n *= d_[i];
    return n;
  }
  void push_back(int64_t v) {
    FL_ENFORCE(rank_ < kMaxRank, "tensor rank exceeds ", kMaxRank);
    d_[rank_++] = v;
  }
  std::vector<int64_t> ToVector() const { return std::vector<int64_t>(d_, d_ + rank_); }
  bool operator==(const DDim& o) const {
    if (rank_ != o.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (d_[i] != o.d_[i]) return false;
    return true;
  }
  bool operator!=(const DDim& o) const { return !(*this == o); }
  // "[2, 3]"
  std::string ToString() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(d_[i]);
    }
    return s + "]";
  }

 private:
  void Assign(const int64_t* p, size_t n) {
    FL_ENFORCE(n <= static_cast<size_t>(kMaxRank), "tensor rank ", n, " exceeds the maximum ", kMaxRank);
    rank_ = static_cast<int>(n);
    for (size_t i = 0; i < n; ++i) d_[i] = p[i];
  }
  int64_t d_[kMaxRank] = {0};
  int rank_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const DDim& d) { return os << d.ToString(); }

// d with a new dim of size v at position axis (0 <= axis <= rank): stack's and tensor_array_to_tensor's output.
inline DDim InsertDim(const DDim& d, int axis, int64_t v) {
  DDim out;
  for (int i = 0; i < d.size(); ++i) {
    if (i == axis) out.push_back(v);
    out.push_back(d[i]);
  }
  if (axis == d.size()) out.push_back(v);
  return out;
}

}  // namespace fl
