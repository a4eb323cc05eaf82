// Direct float32 convolution with AVX-512 register tiles, for conv2d's forward and its stride-1 data
// gradient. No patch matrix: the input is copied once into a zero-padded channels-last image, and each
// tile of R output pixels x 16*NV output channels accumulates in R*NV zmm registers over every kernel tap
// and input channel (per step: NV weight loads, R broadcasts, R*NV FMAs). Im2row + GEMM spends as long
// writing and re-reading the patch matrix as multiplying when C is 16-64 (ResNet-20); this does not.
//
// Used when the CPU has AVX-512F (checked at run time; the rest of the build targets AVX2) and groups == 1;
// everything else takes the patch-row path. Output channels are padded to a multiple of 16 (Mp) with
// zero filters, so LeNet's 20 and 50 channels compute 32 and 64 and keep the first 20 and 50.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "im2row.h"
#include "transpose.h"

namespace fl {
namespace direct_conv {

inline bool Supported() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

// M rounded up to the 16 floats of a zmm register.
inline int64_t PaddedChannels(int64_t m) { return (m + 15) / 16 * 16; }

// Output channels per block of packed filters: the 32 (or last 16) one register tile computes.
constexpr int64_t kBlock = 32;

// Where filter (o, tap, ch) goes in the packed filters: blocks of kBlock output channels, each
// [taps, C, width] (width 32, or 16 for the last block when Mp is an odd multiple of 16), so a tile
// streams its weights from one contiguous run. The last Mp - M outputs have zero filters.
inline int64_t PackedIndex(int64_t o, int64_t tap, int64_t ch, int64_t mp, int64_t c, int64_t taps) {
  const int64_t b = o / kBlock, width = std::min(kBlock, mp - b * kBlock);
  return b * kBlock * taps * c + (tap * c + ch) * width + (o - b * kBlock);
}

// Filters [M, C, kh, kw] -> the packed blocks above.
inline void PackFilters(const float* w, int64_t m, int64_t mp, int64_t c, int64_t taps, float* packed) {
  std::fill(packed, packed + taps * c * mp, 0.f);
  for (int64_t o = 0; o < m; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t t = 0; t < taps; ++t) packed[PackedIndex(o, t, ch, mp, c, taps)] = w[(o * c + ch) * taps + t];
}

// dout of one image [M, P] -> channels last [P, Mp], the padding channels 0.
inline void ToChannelsLast(const float* dout, int64_t m, int64_t p, int64_t mp, float* hwc) {
  detail::Transpose2D(dout, p, hwc, mp, p, m);
  if (mp > m)
    for (int64_t i = 0; i < p; ++i) std::fill(hwc + i * mp + m, hwc + (i + 1) * mp, 0.f);
}

// Padded channels-last size of one image: (H + 2*pad_h) * (W + 2*pad_w) * C.
inline int64_t PaddedSize(const ConvGeometry& g) {
  return (g.height + 2 * g.pad_h) * (g.width + 2 * g.pad_w) * g.channels;
}

// f(std::integral_constant<int, k>) for the one k in [1, R) equal to n (nothing for n == 0): the ragged
// end of a row of tiles, with one instantiation of the tile per width.
template <int R, typename F, int... K>
void ForTailWidth(int64_t n, F f, std::integer_sequence<int, K...>) {
  ((n == K ? (f(std::integral_constant<int, K>{}), 0) : 0), ...);
}
template <int R, typename F>
void ForTailWidth(int64_t n, F f) {
  ForTailWidth<R>(
      n,
      [&](auto k) {
        if constexpr (decltype(k)::value > 0) f(k);
      },
      std::make_integer_sequence<int, R>{});
}

// The register tile both kernels accumulate: acc[r][v] += scalar(r) * vec[16v .. 16v + 15] for r < R,
// v < NV (NV vector loads, R broadcasts, R*NV FMAs), and its store to rows `ld` floats apart.
template <int R, int NV, typename Scalar>
__attribute__((target("avx512f"), always_inline)) inline void RankOneUpdate(__m512 (&acc)[R][NV], const float* vec,
                                                                            Scalar scalar) {
  __m512 vv[NV];
  for (int v = 0; v < NV; ++v) vv[v] = _mm512_loadu_ps(vec + 16 * v);
  for (int r = 0; r < R; ++r) {
    const __m512 sv = _mm512_set1_ps(scalar(r));
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(sv, vv[v], acc[r][v]);
  }
}

template <int R, int NV>
__attribute__((target("avx512f"), always_inline)) inline void StoreTile(const __m512 (&acc)[R][NV], float* out,
                                                                        int64_t ld) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + r * ld + 16 * v, acc[r][v]);
}

struct Tile {
  const float* in;               // padded input at the tile's first pixel's window origin
  const float* w;                // the packed block of the tile's output channels
  float* out;                    // [pixels, M] output at the tile's first pixel and channel
  int64_t c, m;                  // input channels; output channels (the row length of w and out)
  int64_t kh, kw, tap_h, tap_w;  // kernel taps and their offsets in the padded image (floats)
  int64_t pixel;                 // floats between the windows of neighbouring output pixels (stride_w * C)
};

template <int R, int NV>
__attribute__((target("avx512f"))) void RunTile(const Tile& t) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t ki = 0; ki < t.kh; ++ki)
    for (int64_t kj = 0; kj < t.kw; ++kj) {
      const float* x = t.in + ki * t.tap_h + kj * t.tap_w;
      const float* w = t.w + (ki * t.kw + kj) * t.c * (16 * NV);
      for (int64_t ch = 0; ch < t.c; ++ch)
        RankOneUpdate<R, NV>(acc, w + ch * (16 * NV), [&](int r) { return x[r * t.pixel + ch]; });
    }
  StoreTile<R, NV>(acc, t.out, t.m);
}

// A row of `n` output pixels: full tiles of R, then one narrower tile for the rest.
template <int R, int NV>
void RunRow(Tile t, int64_t n) {
  for (; n >= R; n -= R) {
    RunTile<R, NV>(t);
    t.in += R * t.pixel;
    t.out += R * t.m;
  }
  ForTailWidth<R>(n, [&](auto k) { RunTile<decltype(k)::value, NV>(t); });
}

// image [C, H, W] (NCHW) -> the zero-padded channels-last copy [H + 2ph, W + 2pw, C].
inline void PadToChannelsLast(const ConvGeometry& g, const float* image, float* padded) {
  const int64_t c = g.channels, wp = g.width + 2 * g.pad_w, hw = g.height * g.width;
  std::fill(padded, padded + g.pad_h * wp * c, 0.f);
  std::fill(padded + (g.pad_h + g.height) * wp * c, padded + PaddedSize(g), 0.f);
  for (int64_t h = 0; h < g.height; ++h) {
    float* row = padded + (g.pad_h + h) * wp * c;
    std::fill(row, row + g.pad_w * c, 0.f);
    std::fill(row + (g.pad_w + g.width) * c, row + wp * c, 0.f);
    detail::Transpose2D(image + h * g.width, hw, row + g.pad_w * c, c, g.width, c);
  }
}

// Output rows [ho0, ho1) of one image: out [Ho*Wo, M] (channels last) from the padded input and the
// packed filters [taps, C, M]; M is a multiple of 16.
inline void ConvolveRows(const ConvGeometry& g, int64_t m, const float* padded, const float* packed, float* out,
                         int64_t ho0, int64_t ho1) {
  const int64_t c = g.channels, wp = g.width + 2 * g.pad_w;
  Tile t{};
  t.c = c;
  t.m = m;
  t.kh = g.kernel_h;
  t.kw = g.kernel_w;
  t.tap_h = g.dilation_h * wp * c;
  t.tap_w = g.dilation_w * c;
  t.pixel = g.stride_w * c;
  for (int64_t m0 = 0; m0 < m; m0 += kBlock)  // one block of filters stays in cache across the rows
    for (int64_t ho = ho0; ho < ho1; ++ho) {
      t.in = padded + ho * g.stride_h * wp * c;
      t.w = packed + m0 * g.Taps() * c;
      t.out = out + ho * g.out_w * m + m0;
      // 8 pixels x 32 channels in 16 accumulators (8 divides the 32-, 16- and 8-wide rows of CIFAR
      // nets), or 12 pixels x the last 16 channels (measured on ResNet-20's layers: 16 x 16 was 5%
      // slower at M = 16, 6 x 32 up to 20% slower at M = 64).
      if (m - m0 >= kBlock) RunRow<8, 2>(t, g.out_w);
      else RunRow<12, 1>(t, g.out_w);
    }
}

// ---------------------------------------------------------------- filter gradient
// dW[k, m] += sum over output pixels p of x_padded[window(p) + offset(k)] * dout[p, m], k = (tap, c) the
// rows of the packed [taps*C, Mp] gradient: per tile of RC rows x 16*NV output channels, RC*NV
// accumulators over every output pixel of the image. Tiling rows of K (not channels of one tap) keeps
// RC accumulators busy when C is small (LeNet's first layer has C = 1 and 25 taps).

struct WeightTile {
  const float* in;     // padded input at the first output pixel's window origin
  const int64_t* off;  // offsets in `in` of the tile's RC rows k
  const float* dy;     // dout, channels last [Ho*Wo, Mp], at the tile's first output channel
  float* dw;           // packed gradient at (the tile's first row, first output channel)
  int64_t m;           // Mp, the row length of dy and dw
  int64_t out_h, out_w;
  int64_t row, pixel;  // floats between the windows of neighbouring output rows / pixels
};

template <int RC, int NV>
__attribute__((target("avx512f"))) void RunWeightTile(const WeightTile& t) {
  __m512 acc[RC][NV];
  int64_t off[RC];
  for (int r = 0; r < RC; ++r) {
    off[r] = t.off[r];
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_loadu_ps(t.dw + r * t.m + 16 * v);
  }
  for (int64_t ho = 0; ho < t.out_h; ++ho) {
    const float* x = t.in + ho * t.row;
    const float* dy = t.dy + ho * t.out_w * t.m;
    for (int64_t wo = 0; wo < t.out_w; ++wo, x += t.pixel)
      RankOneUpdate<RC, NV>(acc, dy + wo * t.m, [&](int r) { return x[off[r]]; });
  }
  StoreTile<RC, NV>(acc, t.dw, t.m);
}

// Rows [0, k) of the tile's block: full tiles of RC rows, then one shorter tile.
template <int RC, int NV>
void RunWeightRows(WeightTile t, int64_t k) {
  for (; k >= RC; k -= RC) {
    RunWeightTile<RC, NV>(t);
    t.off += RC;
    t.dw += RC * t.m;
  }
  ForTailWidth<RC>(k, [&](auto w) { RunWeightTile<decltype(w)::value, NV>(t); });
}

// Offsets in the padded channels-last image of the K = taps*C rows of the packed gradient.
inline std::vector<int64_t> RowOffsets(const ConvGeometry& g) {
  const int64_t c = g.channels, wp = g.width + 2 * g.pad_w;
  std::vector<int64_t> off(g.PatchSize());
  for (int64_t ki = 0; ki < g.kernel_h; ++ki)
    for (int64_t kj = 0; kj < g.kernel_w; ++kj)
      for (int64_t ch = 0; ch < c; ++ch)
        off[(ki * g.kernel_w + kj) * c + ch] = ki * g.dilation_h * wp * c + kj * g.dilation_w * c + ch;
  return off;
}

constexpr int64_t kWeightRowBlock = 24;  // rows of K per parallel work item (a multiple of 8 and 12)

// packed [taps*C, Mp] += the filter gradient of one image for rows [k0, k1) of K (k0 a multiple of
// kWeightRowBlock), from its padded channels-last input and its channels-last dout [Ho*Wo, Mp].
inline void AccumulateFilterGrad(const ConvGeometry& g, int64_t mp, const float* padded, const float* dout_hwc,
                                 const int64_t* offsets, float* packed, int64_t k0, int64_t k1) {
  const int64_t c = g.channels, wp = g.width + 2 * g.pad_w;
  WeightTile t{};
  t.in = padded;
  t.m = mp;
  t.out_h = g.out_h;
  t.out_w = g.out_w;
  t.row = g.stride_h * wp * c;
  t.pixel = g.stride_w * c;
  for (int64_t m0 = 0; m0 < mp; m0 += 32) {
    t.off = offsets + k0;
    t.dy = dout_hwc + m0;
    t.dw = packed + k0 * mp + m0;
    if (mp - m0 >= 32) RunWeightRows<8, 2>(t, k1 - k0);
    else RunWeightRows<12, 1>(t, k1 - k0);
  }
}

// The inverse of PackFilters: packed [taps, C, Mp] -> w [M, C, kh, kw].
inline void UnpackFilters(const float* packed, int64_t m, int64_t mp, int64_t c, int64_t taps, float* w) {
  for (int64_t o = 0; o < m; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t t = 0; t < taps; ++t) w[(o * c + ch) * taps + t] = packed[(t * c + ch) * mp + o];
}

}  // namespace direct_conv
}  // namespace fl
