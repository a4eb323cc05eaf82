// SelectedRows (sparse gradient) helpers shared by sum and the optimizer ops: checking that a sparse gradient
// fits its dense parameter, and Fluid's MergeAdd (repeated rows summed, rows sorted ascending).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "op_context.h"
#include "sparse_rows.h"

namespace fl {

// Elements per row of a SelectedRows value [n, ...] (its dims after the first).
inline int64_t RowWidth(const SelectedRows& sr) {
  const DDim& d = sr.value.dims();
  int64_t w = 1;
  for (int i = 1; i < d.size(); ++i) w *= d[i];
  return w;
}

// Throws unless `sr` (input `slot` of the op) is a sparse form of a tensor with `dense` dims: same height and
// row width, value rows == rows.size(), every row in [0, height).
inline void CheckRowsFit(const ExecutionContext& ctx, const char* slot, const SelectedRows& sr, const DDim& dense,
                         const std::string& dense_what) {
  const std::string what = Str(ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' (SelectedRows, height ", sr.height,
                               ", value ", sr.value.dims(), ")");
  FL_ENFORCE(sr.value.dims().size() >= 1 && sr.value.dims()[0] == static_cast<int64_t>(sr.rows.size()), what, " has ",
             sr.rows.size(), " rows but its value has ", sr.value.dims().size() ? sr.value.dims()[0] : 0);
  FL_ENFORCE(dense.size() >= 1 && dense[0] == sr.height && sr.CompleteDims() == dense, what,
             " does not match the dims ", dense, " of ", dense_what);
  for (size_t i = 0; i < sr.rows.size(); ++i)
    FL_ENFORCE(sr.rows[i] >= 0 && sr.rows[i] < sr.height, what, " has row ", sr.rows[i], " at position ", i,
               ", out of range [0, ", sr.height, ")");
}

// Fluid's MergeAdd: the distinct rows of `sr`, ascending, each with the sum of its value rows.
template <typename T>
struct MergedRows {
  std::vector<int64_t> rows;
  std::vector<T> values;  // rows.size() x width
  int64_t width = 0;
};

template <typename T>
void MergeRows(const SelectedRows& sr, MergedRows<T>* out) {
  SelectedRows m = MergeAdd(sr, "MergeAdd");
  out->width = RowWidth(sr);
  out->rows = std::move(m.rows);
  const T* v = out->rows.empty() ? nullptr : m.value.data<T>();
  out->values.assign(v, v + out->rows.size() * out->width);
}

// dst[rows[i]] += scale * value[i] for every row of `sr` (repeated rows add up); dst is [height, width].
template <typename T>
void AddRowsTo(const SelectedRows& sr, T scale, T* dst) {
  const int64_t w = RowWidth(sr);
  const T* v = sr.rows.empty() ? nullptr : sr.value.data<T>();
  constexpr size_t kAhead = 8;  // rows are scattered over dst: prefetch the ones a few iterations ahead
  for (size_t i = 0; i < sr.rows.size(); ++i) {
    if (i + kAhead < sr.rows.size()) __builtin_prefetch(dst + sr.rows[i + kAhead] * w, 1);
    T* d = dst + sr.rows[i] * w;
    const T* s = v + i * w;
    for (int64_t j = 0; j < w; ++j) d[j] += scale * s[j];
  }
}

}  // namespace fl
