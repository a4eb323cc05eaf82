// One-pass n-ary addition shared by the `sum` op and recurrent_grad's parameter-gradient aggregation.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace fl {

// Out[i] = sum_k in[k][i]; `out` may alias any input (each block is fully read before it is written).
template <typename T>
inline void SumInto(const std::vector<const T*>& in, T* out, int64_t n) {
  constexpr int64_t kBlock = 2048 / sizeof(T) * 2;  // 4 KiB of accumulators
  alignas(64) T acc[kBlock];
  const size_t k_in = in.size();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
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

}  // namespace fl
