// Row gather / scatter-add shared by lookup_table, gather and their grads: a table seen as [rows, width]
// and an index vector (int32 or int64). Indices are checked up front so the copy loops stay branch-light.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "op_context.h"

namespace fl {

// Calls f(TypeTag<I>{}) for an int32 or int64 index tensor; anything else is an error naming the op.
template <typename F>
auto VisitIndexDType(DType t, const std::string& what, F&& f) {
  if (t == DType::INT32) return f(TypeTag<int32_t>{});
  FL_ENFORCE(t == DType::INT64, what, " must be int32 or int64, got ", DTypeName(t));
  return f(TypeTag<int64_t>{});
}

// `skip` value meaning "no index is skipped" (no int32/int64 index equals it after the range check).
constexpr int64_t kNoSkip = std::numeric_limits<int64_t>::min();

// Throws unless every idx[i] is in [0, rows) or equals `skip`. `what` names the op, slot and variable;
// `table` the indexed tensor.
template <typename I>
void CheckRowIndices(const I* idx, int64_t n, int64_t rows, int64_t skip, const std::string& what,
                     const std::string& table) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= (idx[i] >= 0 && idx[i] < rows) || idx[i] == skip;
  if (ok) return;
  for (int64_t i = 0; i < n; ++i) {
    FL_ENFORCE((idx[i] >= 0 && idx[i] < rows) || idx[i] == skip, what, " has value ", static_cast<int64_t>(idx[i]),
               " at position ", i, ", out of range [0, ", rows, ") of ", table);
  }
}

// dst[i] = src[idx[i]] (a row of `width` elements), or zeros where idx[i] == skip.
template <typename T, typename I>
void GatherRows(const T* src, int64_t width, const I* idx, int64_t n, int64_t skip, T* dst) {
  const size_t bytes = static_cast<size_t>(width) * sizeof(T);
  for (int64_t i = 0; i < n; ++i) {
    T* d = dst + i * width;
    if (idx[i] == skip) std::memset(d, 0, bytes);
    else std::memcpy(d, src + static_cast<int64_t>(idx[i]) * width, bytes);
  }
}

// dst[idx[i]] += src[i] for every i with idx[i] != skip (dst already zeroed or accumulating).
template <typename T, typename I>
void ScatterAddRows(const T* src, int64_t width, const I* idx, int64_t n, int64_t skip, T* dst) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] == skip) continue;
    T* d = dst + static_cast<int64_t>(idx[i]) * width;
    const T* s = src + i * width;
    for (int64_t j = 0; j < width; ++j) d[j] += s[j];
  }
}

}  // namespace fl
