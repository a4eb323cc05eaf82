// Row-run copies for the sequence ops that move whole rows between sequences (sequence_expand, sequence_expand_as,
// sequence_concat, sequence_slice, sequence_pad / sequence_unpad and the gradients that copy back): the work is a
// list of runs of consecutive rows, each one memcpy. The list is split over the thread pool by rows, not by
// runs, so a batch of ragged sequences (lengths 5 to 100) still gives each thread the same number of bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "thread_pool.h"

namespace fl {

// Rows [src_row, src_row + rows) of the source go to rows [dst_row, dst_row + rows) of the destination.
struct RowRun {
  int64_t src_row, dst_row, rows;
};

// Below this many bytes per thread a copy stays on the calling thread (the elementwise ops' threshold in bytes).
constexpr int64_t kMinParallelCopyBytes = kMinParallelElements * 4;

// f(run, first, count) for the rows [first, first + count) of each run, those rows split over the pool in
// contiguous slices of the runs' concatenation (about `row_bytes` bytes each row).
template <typename F>
void ForEachRunSlice(const std::vector<RowRun>& runs, int64_t row_bytes, F f) {
  std::vector<int64_t> start(runs.size() + 1, 0);  // start[i]: rows before run i
  for (size_t i = 0; i < runs.size(); ++i) start[i + 1] = start[i] + runs[i].rows;
  const int64_t grain = std::max<int64_t>(1, kMinParallelCopyBytes / std::max<int64_t>(1, row_bytes));
  ParallelFor(start.back(), grain, [&](int64_t begin, int64_t end) {
    size_t i = std::upper_bound(start.begin(), start.end(), begin) - start.begin() - 1;
    for (; i < runs.size() && start[i] < end; ++i) {
      const int64_t lo = std::max(begin, start[i]), hi = std::min(end, start[i + 1]);
      if (hi > lo) f(runs[i], lo - start[i], hi - lo);
    }
  });
}

// Copies every run from src to dst (rows of `row_bytes` bytes); runs must not overlap in dst.
inline void CopyRowRuns(const void* src, void* dst, int64_t row_bytes, const std::vector<RowRun>& runs) {
  if (row_bytes <= 0) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  ForEachRunSlice(runs, row_bytes, [&](const RowRun& r, int64_t first, int64_t count) {
    std::memcpy(d + (r.dst_row + first) * row_bytes, s + (r.src_row + first) * row_bytes, count * row_bytes);
  });
}

// Writes source row src_row into every destination row of each run (a row repeated: sequence_expand of a tensor
// without LoD, sequence_expand_as, the pad rows of sequence_pad).
inline void RepeatRowRuns(const void* src, void* dst, int64_t row_bytes, const std::vector<RowRun>& runs) {
  if (row_bytes <= 0) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  ForEachRunSlice(runs, row_bytes, [&](const RowRun& r, int64_t first, int64_t count) {
    char* out = d + (r.dst_row + first) * row_bytes;
    std::memcpy(out, s + r.src_row * row_bytes, row_bytes);
    for (int64_t done = 1; done < count; done *= 2)  // doubling: log2(count) memcpys instead of count
      std::memcpy(out + done * row_bytes, out, std::min(done, count - done) * row_bytes);
  });
}

// Appends a run, merging it into the previous one when both continue it (consecutive sequences copied in order
// become one memcpy). Empty runs are dropped.
inline void AddRun(std::vector<RowRun>& runs, int64_t src_row, int64_t dst_row, int64_t rows) {
  if (rows <= 0) return;
  if (!runs.empty()) {
    RowRun& last = runs.back();
    if (last.src_row + last.rows == src_row && last.dst_row + last.rows == dst_row) {
      last.rows += rows;
      return;
    }
  }
  runs.push_back(RowRun{src_row, dst_row, rows});
}

}  // namespace fl
