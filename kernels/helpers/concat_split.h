// Shared by concat, split and their gradients: both are one memory movement along an axis. A tensor
// of dims D seen at `axis` is [outer, width] with outer = prod(D[:axis]) and width = D[axis] *
// prod(D[axis+1:]); concat copies each part's rows next to each other, split copies them back out.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "op_context.h"

namespace fl {

// Normalises a possibly negative axis for a rank-`rank` tensor, or throws naming the op.
inline int NormalizeAxis(int axis, int rank, const std::string& op, const std::string& what) {
  FL_ENFORCE(axis >= -rank && axis < rank, op, ": axis ", axis, " is out of range [", -rank, ", ", rank, ") for ",
             what);
  return axis < 0 ? axis + rank : axis;
}

// Dense parts along an axis: parts[i] (or null: zeros / skipped) is [outer, widths[i]] in bytes.
struct AxisParts {
  int64_t outer = 1;
  std::vector<int64_t> widths;  // bytes per outer row of each part
};

inline AxisParts MakeAxisParts(const DDim& whole, int axis, const std::vector<int64_t>& sizes, size_t elem) {
  AxisParts p;
  p.outer = whole.Product(0, axis);
  const int64_t inner = whole.Product(axis + 1, whole.size()) * static_cast<int64_t>(elem);
  p.widths.reserve(sizes.size());
  for (int64_t s : sizes) p.widths.push_back(s * inner);
  return p;
}

// dst[outer, sum(widths)] = the parts side by side; a null part is written as zeros.
inline void ConcatParts(const AxisParts& p, const std::vector<const void*>& parts, void* dst) {
  int64_t total = 0;
  for (int64_t w : p.widths) total += w;
  char* d = static_cast<char*>(dst);
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t w = p.widths[i];
    const char* s = static_cast<const char*>(parts[i]);
    for (int64_t r = 0; r < p.outer; ++r) {
      if (s) std::memcpy(d + r * total + off, s + r * w, w);
      else std::memset(d + r * total + off, 0, w);
    }
    off += w;
  }
}

// The inverse: part i = columns of src; null parts are skipped.
inline void SplitParts(const AxisParts& p, const void* src, const std::vector<void*>& parts) {
  int64_t total = 0;
  for (int64_t w : p.widths) total += w;
  const char* s = static_cast<const char*>(src);
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t w = p.widths[i];
    if (char* d = static_cast<char*>(parts[i]))
      for (int64_t r = 0; r < p.outer; ++r) std::memcpy(d + r * w, s + r * total + off, w);
    off += w;
  }
}

}  // namespace fl
