// Row gather / scatter-add shared by lookup_table, gather, gather_nd, scatter, scatter_nd_add and their grads: a table
// seen as [rows, width] and an index vector (int32 or int64). Indices are checked up front so the copy loops stay
// branch-light.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

// Throws unless each of the n index tuples idx[i*k .. i*k+k) addresses an element of `bounds`' first k dims:
// idx[i*k+j] in [0, bounds[j]) (gather_nd, scatter_nd_add). Same wording as CheckRowIndices, with the
// tuple's position and the dim it indexes.
template <typename I>
void CheckNdIndices(const I* idx, int64_t n, int k, const DDim& bounds, const std::string& what,
                    const std::string& table) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < k; ++j) ok &= idx[i * k + j] >= 0 && idx[i * k + j] < bounds[j];
  if (ok) return;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < k; ++j) {
      const int64_t v = static_cast<int64_t>(idx[i * k + j]);
      FL_ENFORCE(v >= 0 && v < bounds[j], what, " has value ", v, " at position ", i, " (coordinate ", j,
                 "), out of range [0, ", bounds[j], ") of dim ", j, " of ", table);
    }
}

// Row offset (in elements of a [prod(bounds[:k]), width] view) of each checked index tuple: the flat row
// number sum_j idx[j] * prod(bounds[j+1:k]).
template <typename I>
void NdRowOffsets(const I* idx, int64_t n, int k, const DDim& bounds, std::vector<int64_t>* rows) {
  rows->resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = 0;
    for (int j = 0; j < k; ++j) r = r * bounds[j] + static_cast<int64_t>(idx[i * k + j]);
    (*rows)[i] = r;
  }
}

// An index input (slot `slot`, [.., k]) of gather_nd / scatter_nd_add seen against a tensor of dims `bounds`:
// n k-tuples, each addressing a row of `width` elements in the [prod(bounds[:k]), width] view; `rows` are the
// checked row numbers. `table` names the indexed tensor in errors.
struct NdIndexRows {
  int k = 0;
  int64_t n = 0, width = 0;
  std::vector<int64_t> rows;
};
inline NdIndexRows CheckedNdRows(const ExecutionContext& ctx, const char* slot, const DDim& bounds,
                                 const std::string& table) {
  const Tensor& index = ctx.Input(slot);
  const DDim id = index.dims();
  NdIndexRows r;
  r.k = static_cast<int>(id[id.size() - 1]);
  FL_ENFORCE(r.k >= 0 && r.k <= bounds.size(), ctx.Type(), ": the last dim of ", slot, " '", ctx.InputName(slot), "' ",
             id, " must be in [0, ", bounds.size(), "] for ", table);
  r.n = id.Product(0, id.size() - 1);
  r.width = bounds.Product(r.k, bounds.size());
  VisitIndexDType(index.dtype(), Str(ctx.Type(), ": ", slot), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* p = index.data<I>();
    CheckNdIndices(p, r.n, r.k, bounds, Str(ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "'"), table);
    NdRowOffsets(p, r.n, r.k, bounds, &r.rows);
  });
  return r;
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
