// One-pass n-ary addition shared by the `sum` op (kernels/sum.cc) and the step-block runner's
// parameter-gradient aggregation (csrc/step_block_runner.cc).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "thread_pool.h"

namespace fl {

namespace sum_detail {

constexpr int64_t kBlock = 1024;  // elements per block of stack accumulators (4 KiB of float)

// out[i] = sum_k in[k][i] for i in [begin, end), one block of accumulators at a time.
template <typename T>
inline void SumBlocks(const std::vector<const T*>& in, T* out, int64_t begin, int64_t end) {
  alignas(64) T acc[kBlock];
  const size_t k_in = in.size();
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t m = std::min(kBlock, end - b);
    const T* p0 = in[0] + b;
    const T* p1 = in[1] + b;
    for (int64_t j = 0; j < m; ++j) acc[j] = p0[j] + p1[j];
    for (size_t k = 2; k < k_in; ++k) {
      const T* pk = in[k] + b;
      for (int64_t j = 0; j < m; ++j) acc[j] += pk[j];
    }
    std::memcpy(out + b, acc, m * sizeof(T));
  }
}

}  // namespace sum_detail

// Out[i] = sum_k in[k][i] (at least two inputs); `out` may alias any input (each block is fully read
// before it is written). Blocks are split across the thread pool for large n.
template <typename T>
inline void SumInto(const std::vector<const T*>& in, T* out, int64_t n) {
  using sum_detail::kBlock;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ParallelFor(blocks, std::max<int64_t>(1, kMinParallelElements / kBlock),
              [&](int64_t b0, int64_t b1) { sum_detail::SumBlocks(in, out, b0 * kBlock, std::min(n, b1 * kBlock)); });
}

}  // namespace fl
