// A box (sub-tensor) of an N-d row-major tensor: copying one between a small tensor and the region of a big
// one that starts at `offset` (the small tensor's dims end at offset + small <= big on every axis). Shared
// by pad / pad_constant_like (embed, and their gradients' extract) and crop (extract, its gradient embed).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ddim.h"

namespace fl {

// kEmbed: big[offset + i] = small[i]; otherwise small[i] = big[offset + i]. Runs along the last axis are
// copied whole.
template <bool kEmbed, typename T>
void BoxCopy(const DDim& small_dims, const DDim& big_dims, const std::vector<int64_t>& offset, T* small, T* big) {
  const int rank = small_dims.size();
  const int64_t n = small_dims.numel();
  if (n == 0) return;
  if (rank == 0) {
    if (kEmbed) *big = *small;
    else *small = *big;
    return;
  }
  std::vector<int64_t> big_stride(rank, 1);
  for (int i = rank - 2; i >= 0; --i) big_stride[i] = big_stride[i + 1] * big_dims[i + 1];
  const int64_t run = small_dims[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t start = 0; start < n; start += run) {
    int64_t b = 0;
    for (int i = 0; i < rank; ++i) b += (idx[i] + offset[i]) * big_stride[i];
    if (kEmbed) std::memcpy(big + b, small + start, run * sizeof(T));
    else std::memcpy(small + start, big + b, run * sizeof(T));
    for (int i = rank - 2; i >= 0; --i) {  // next run: odometer over the leading axes
      if (++idx[i] < small_dims[i]) break;
      idx[i] = 0;
    }
  }
}

}  // namespace fl
