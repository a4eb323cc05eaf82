// Fluid's sequence2batch: a LoD batch reordered so that each time step is one contiguous block of rows, one
// row per sequence still alive at that step. Sequences are sorted by length, longest first (stable), so the
// sequences alive at step t are the first alive(t) of `order`, and the row of sequence order[k] at step t
// follows its row at step t-1 at the same position k: a recurrent kernel does one GEMM per step over rows
// [step_begin[t], step_begin[t+1]) and reads h_prev from the first alive(t) rows of the previous step.
// dynamic_lstm, dynamic_lstmp and dynamic_gru share it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "tensor.h"  // LoD
#include "thread_pool.h"

namespace fl {

struct SequenceBatch {
  std::vector<int64_t> order;       // sequence indices, longest first (ties keep their input order)
  std::vector<int64_t> step_begin;  // steps() + 1 offsets into the batch rows
  std::vector<int64_t> rows;        // batch row -> input row (is_reverse: each sequence walked from its end)

  int64_t steps() const { return static_cast<int64_t>(step_begin.size()) - 1; }
  int64_t alive(int64_t t) const { return step_begin[t + 1] - step_begin[t]; }
  // The LoD of the batch-ordered outputs the recurrent ops keep for their gradients (BatchGate, ...): the step
  // offsets, so that sequence t of that LoD is time step t.
  LoD StepLoD() const { return LoD{std::vector<size_t>(step_begin.begin(), step_begin.end())}; }
};

// The batch order of the sequences described by LoD `offsets` (one level).
inline SequenceBatch MakeSequenceBatch(const std::vector<size_t>& offsets, bool is_reverse) {
  SequenceBatch b;
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  auto len = [&](int64_t s) { return static_cast<int64_t>(offsets[s + 1] - offsets[s]); };
  b.order.resize(n > 0 ? n : 0);
  std::iota(b.order.begin(), b.order.end(), int64_t{0});
  std::stable_sort(b.order.begin(), b.order.end(), [&](int64_t a, int64_t c) { return len(a) > len(c); });
  const int64_t steps = n > 0 ? len(b.order[0]) : 0;
  b.step_begin.assign(1, 0);
  b.rows.reserve(n > 0 ? offsets[n] - offsets[0] : 0);
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t s : b.order) {
      const int64_t l = len(s);
      if (l <= t) break;  // sorted: every later sequence is shorter too
      b.rows.push_back(static_cast<int64_t>(offsets[s]) + (is_reverse ? l - 1 - t : t));
    }
    b.step_begin.push_back(static_cast<int64_t>(b.rows.size()));
  }
  return b;
}

// Rows per thread for the copies below: they are memory-bound, so a second thread pays from about
// kMinParallelElements per part.
inline int64_t RowCopyGrain(int64_t width) {
  return std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, width));
}

// dst[k] = src[rows[k]] for rows of `width` elements (input order -> batch order).
template <typename T>
void GatherRows(const T* src, int64_t width, const std::vector<int64_t>& rows, T* dst) {
  ParallelFor(static_cast<int64_t>(rows.size()), RowCopyGrain(width), [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) std::memcpy(dst + k * width, src + rows[k] * width, sizeof(T) * width);
  });
}

// dst[rows[k]] = src[k] (batch order -> input order).
template <typename T>
void ScatterRows(const T* src, int64_t width, const std::vector<int64_t>& rows, T* dst) {
  ParallelFor(static_cast<int64_t>(rows.size()), RowCopyGrain(width), [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) std::memcpy(dst + rows[k] * width, src + k * width, sizeof(T) * width);
  });
}

}  // namespace fl
