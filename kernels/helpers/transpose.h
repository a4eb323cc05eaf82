// N-d transposition: out[i_0, ..., i_{r-1}] = in[i_{inv(0)}, ...], i.e. out.dims[k] = in.dims[perm[k]].
// Size-1 dims are dropped and axes that stay adjacent are merged first, so most permutations become
// a copy, a row shuffle (contiguous runs moved with memcpy) or a batch of blocked 2-D transposes.
#pragma once
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ddim.h"
#include "enforce.h"

namespace fl {

// Checks that `perm` is a permutation of [0, rank); `what` names the op and variable in the error.
inline void CheckPermutation(const std::vector<int32_t>& perm, int rank, const std::string& what) {
  std::vector<int64_t> p(perm.begin(), perm.end());
  FL_ENFORCE(static_cast<int>(perm.size()) == rank, what, ": axis ", DDim(p), " has ", perm.size(),
             " entries, expected one per dim (", rank, ")");
  std::vector<bool> seen(rank, false);
  for (int32_t a : perm) {
    FL_ENFORCE(a >= 0 && a < rank && !seen[a], what, ": axis ", DDim(p), " is not a permutation of [0, ", rank, ")");
    seen[a] = true;
  }
}

namespace detail {

// dst[i * ld_dst + j] = src[j * ld_src + i] for i < rows, j < cols, in cache-sized tiles.
template <typename T>
void Transpose2DScalar(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  constexpr int64_t kB = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kB) {
    const int64_t i1 = std::min(rows, i0 + kB);
    for (int64_t j0 = 0; j0 < cols; j0 += kB) {
      const int64_t j1 = std::min(cols, j0 + kB);
      for (int64_t i = i0; i < i1; ++i) {
        T* d = dst + i * ld_dst;
        const T* s = src + i;
        for (int64_t j = j0; j < j1; ++j) d[j] = s[j * ld_src];
      }
    }
  }
}

#ifdef __AVX2__
// dst[8 x 8] = transpose(src[8 x 8]) with 24 shuffles instead of 64 strided loads (unpack pairs of
// rows, then pairs of pairs, then swap 128-bit halves).
inline void Transpose8x8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld_src);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ld_dst, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ld_dst, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

// dst[i * ld_dst + j] = src[j * ld_src + i] for i < rows, j < cols. Floats go through 8x8 register
// blocks (NCHW <-> NHWC for conv2d is 3-4x faster than the scalar tiles); the ragged edges stay scalar.
template <typename T>
void Transpose2D(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
#ifdef __AVX2__
  if constexpr (std::is_same_v<T, float>) {
    const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    constexpr int64_t kB = 64;  // 64 x 64 floats: both tiles stay in L1
    for (int64_t i0 = 0; i0 < r8; i0 += kB)
      for (int64_t j0 = 0; j0 < c8; j0 += kB)
        for (int64_t j = j0; j < std::min(c8, j0 + kB); j += 8)
          for (int64_t i = i0; i < std::min(r8, i0 + kB); i += 8)
            Transpose8x8(src + j * ld_src + i, ld_src, dst + i * ld_dst + j, ld_dst);
    if (c8 < cols) Transpose2DScalar(src + c8 * ld_src, ld_src, dst + c8, ld_dst, r8, cols - c8);
    if (r8 < rows) Transpose2DScalar(src + r8, ld_src, dst + r8 * ld_dst, ld_dst, rows - r8, cols);
    return;
  }
#endif
  Transpose2DScalar(src, ld_src, dst, ld_dst, rows, cols);
}

// Advances the multi-index `idx` over `dims` (skipping the axes marked in `skip`), updating the two
// offsets; returns false after the last index.
inline bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims, const std::vector<bool>& skip,
                 const std::vector<int64_t>& s_stride, const std::vector<int64_t>& d_stride, int64_t& s_off,
                 int64_t& d_off) {
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    if (skip[k]) continue;
    if (++idx[k] < dims[k]) {
      s_off += s_stride[k];
      d_off += d_stride[k];
      return true;
    }
    s_off -= s_stride[k] * (dims[k] - 1);
    d_off -= d_stride[k] * (dims[k] - 1);
    idx[k] = 0;
  }
  return false;
}

}  // namespace detail

template <typename T>
void Transpose(const T* src, const DDim& in_dims, const std::vector<int32_t>& perm, T* dst) {
  const int64_t numel = in_dims.numel();
  if (numel == 0) return;
  // Drop size-1 dims, then merge runs of input axes that stay consecutive in the output.
  std::vector<int> keep_map(in_dims.size(), -1);
  std::vector<int64_t> dims;
  for (int i = 0; i < in_dims.size(); ++i)
    if (in_dims[i] != 1) {
      keep_map[i] = static_cast<int>(dims.size());
      dims.push_back(in_dims[i]);
    }
  std::vector<int> p;
  for (int32_t a : perm)
    if (keep_map[a] >= 0) p.push_back(keep_map[a]);
  // Merge: output positions k, k+1 with p[k+1] == p[k] + 1 collapse into one axis.
  std::vector<std::vector<int>> groups;  // in output order, each a run of consecutive input axes
  for (size_t k = 0; k < p.size(); ++k) {
    if (!groups.empty() && groups.back().back() + 1 == p[k]) groups.back().push_back(p[k]);
    else groups.push_back({p[k]});
  }
  // Renumber the groups in input order to get the reduced dims and permutation.
  const int r = static_cast<int>(groups.size());
  std::vector<int> order(r);
  for (int g = 0; g < r; ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return groups[a][0] < groups[b][0]; });
  std::vector<int64_t> in(r), rp(r);  // reduced input dims; rp[k] = input axis of output axis k
  for (int i = 0; i < r; ++i) {
    int64_t d = 1;
    for (int a : groups[order[i]]) d *= dims[a];
    in[i] = d;
    rp[order[i]] = i;
  }
  if (r <= 1) {
    std::memcpy(dst, src, numel * sizeof(T));
    return;
  }
  std::vector<int64_t> in_stride(r), out_dims(r), out_stride(r);
  in_stride[r - 1] = 1;
  for (int i = r - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * in[i + 1];
  for (int k = 0; k < r; ++k) out_dims[k] = in[rp[k]];
  out_stride[r - 1] = 1;
  for (int k = r - 2; k >= 0; --k) out_stride[k] = out_stride[k + 1] * out_dims[k + 1];
  // Walk the output index space; src strides follow the permutation.
  std::vector<int64_t> s_stride(r);
  for (int k = 0; k < r; ++k) s_stride[k] = in_stride[rp[k]];
  std::vector<int64_t> idx(r, 0);
  std::vector<bool> skip(r, false);
  int64_t s_off = 0, d_off = 0;
  if (rp[r - 1] == r - 1) {
    // The input's last axis stays last: move contiguous runs.
    skip[r - 1] = true;
    const size_t run = out_dims[r - 1] * sizeof(T);
    do {
      std::memcpy(dst + d_off, src + s_off, run);
    } while (detail::Next(idx, out_dims, skip, s_stride, out_stride, s_off, d_off));
    return;
  }
  // Otherwise the core is a 2-D transpose between output axis q (the input's last axis, src stride 1)
  // and the output's last axis (dst stride 1), repeated over the other axes.
  int q = 0;
  while (rp[q] != r - 1) ++q;
  skip[q] = skip[r - 1] = true;
  do {
    detail::Transpose2D(src + s_off, s_stride[r - 1], dst + d_off, out_stride[q], out_dims[q], out_dims[r - 1]);
  } while (detail::Next(idx, out_dims, skip, s_stride, out_stride, s_off, d_off));
}

}  // namespace fl
