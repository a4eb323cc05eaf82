// conv2d (and depthwise_conv2d, the type Fluid picks when groups == channels): NCHW convolution with
// stride, padding, dilation and groups, as im2col + GEMM. Small images are batched: the column matrices
// of several images sit side by side so one wide GEMM replaces many thin ones. Depthwise convolutions
// (one input channel per group) skip the GEMM for a direct loop over output rows.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "helpers/bias_act.h"
#include "helpers/blas.h"
#include "helpers/conv_shape.h"
#include "helpers/direct_conv.h"
#include "helpers/im2row.h"
#include "helpers/scratch.h"
#include "helpers/transpose.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// conv2d_fusion's epilogue: Output = act(conv + Bias[m]), applied to each output tile right after the GEMM or
// the direct kernel wrote it (before it goes back to NCHW), or to each depthwise output plane.
template <typename T>
struct ConvEpilogue {
  BiasAct<T> act;
  const T* bias = nullptr;  // [M] or null
  // ResidualData (NCHW, Output's shape) or null. With it the tile epilogue adds the bias only, and `post` (the
  // activation) runs with the residual add over each image or chunk right after it is back in NCHW.
  const T* residual = nullptr;
  BiasAct<T> post;
  // out[i] = post(out[i] + residual[offset + i]) for n values.
  void Residual(T* out, int64_t offset, int64_t n) const {
    const T* r = residual + offset;
    post.Each(out, n, [r](int64_t i, T v) { return v + r[i]; });
  }
};

// conv2d_fusion's filters in PatchConv's layouts (patch order, and packed for the direct kernel), kept across runs
// in the op's state and made again when the filter tensor's data_version() (or its shape) changes: conv2d re-lays
// its filters out on every call, which at batch 1 costs as much as a small convolution itself.
template <typename T>
struct PackedFilters {
  std::pair<const void*, uint64_t> version{nullptr, 0};
  DDim dims;
  int64_t groups = 0;
  bool direct = false;
  std::vector<T> wp;
  std::vector<float> wd;
  // The pointwise micro-kernel's filters in blocks of 16 output channels, each block [C, 16] (PointwiseTiles).
  std::pair<const void*, uint64_t> wt_version{nullptr, 0};
  DDim wt_dims;
  std::vector<float> wt;
};

void ConvInferShape(InferShapeContext& ctx) {
  const std::string& op = ctx.Type();
  const ConvAttrs a = ConvAttrs::From(ctx);
  const DDim in = ctx.InputDim("Input"), filter = ctx.InputDim("Filter");
  FL_ENFORCE(in.size() == 4, op, ": ", ctx.Describe("Input"), " must be 4-D [N, C, H, W]");
  FL_ENFORCE(filter.size() == 4, op, ": ", ctx.Describe("Filter"), " must be 4-D [M, C/groups, kh, kw]");
  ctx.EnforceSameDType("Input", "Filter");
  const int64_t c = in[1], m = filter[0], g = a.groups;
  FL_ENFORCE(c < 0 || c % g == 0, op, ": ", c, " input channels of ", ctx.Describe("Input"),
             " are not divisible by groups = ", g);
  FL_ENFORCE(m < 0 || m % g == 0, op, ": ", m, " output channels of ", ctx.Describe("Filter"),
             " are not divisible by groups = ", g);
  FL_ENFORCE(c < 0 || filter[1] < 0 || filter[1] * g == c, op, ": ", ctx.Describe("Filter"), " has ", filter[1],
             " channels but ", ctx.Describe("Input"), " with groups = ", g, " needs C/groups = ", c / g);
  DDim out{in[0], m, -1, -1};
  for (int i = 0; i < 2; ++i) {
    const int64_t size = in[2 + i], k = filter[2 + i];
    FL_ENFORCE(k != 0, op, ": ", ctx.Describe("Filter"), " has an empty kernel");
    if (size < 0 || k < 0) continue;
    const int64_t o = ConvOutSize(size, k, a.strides[i], a.paddings[i], a.dilations[i]);
    FL_ENFORCE(o >= 1, op, ": the ", k, "-wide kernel (dilation ", a.dilations[i], ") of ", ctx.Describe("Filter"),
               " is larger than ", i == 0 ? "height" : "width", " ", size, " + 2 * padding ", a.paddings[i], " of ",
               ctx.Describe("Input"));
    out[2 + i] = o;
  }
  ctx.SetOutput("Output", out, ctx.InputDType("Input"));
}

// How many images share one patch matrix: images with few output pixels (ResNet's 8x8 stage) are
// stacked to ~1024 rows so one tall GEMM replaces many short ones, within an 8 MiB buffer.
int64_t ImagesPerChunk(const ConvShape& s, size_t elem) {
  constexpr int64_t kTargetRows = 1024, kMaxPatchBytes = int64_t(8) << 20;
  const int64_t p = s.geom.OutSize();
  int64_t nb = (kTargetRows + p - 1) / std::max<int64_t>(1, p);
  nb = std::min(nb, kMaxPatchBytes / std::max<int64_t>(1, s.geom.PatchSize() * p * static_cast<int64_t>(elem)));
  return std::max<int64_t>(1, std::min(nb, s.batch));
}

// [M, n, P] (dout of n images side by side) <- [n, M, P] (NCHW): contiguous runs of P.
template <typename T>
void ToWide(const T* images, int64_t m, int64_t n, int64_t p, T* wide) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < m; ++r) std::memcpy(wide + (r * n + i) * p, images + (i * m + r) * p, p * sizeof(T));
}

// n images [rows, cols] -> [cols, rows] each (NCHW <-> NHWC with rows = C, cols = H*W or back).
template <typename T>
void TransposeImages(const T* src, int64_t n, int64_t rows, int64_t cols, T* dst) {
  ParallelFor(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      detail::Transpose2D(src + i * rows * cols, cols, dst + i * rows * cols, rows, cols, rows);
  });
}

// Filters [M, Cg, kh, kw] -> patch order [M, kh, kw, Cg] (the column order of the patch rows), and back.
template <typename T>
void ToPatchOrder(const T* w, int64_t m, int64_t cg, int64_t taps, T* wp) {
  for (int64_t o = 0; o < m; ++o)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t t = 0; t < taps; ++t) wp[(o * taps + t) * cg + c] = w[(o * cg + c) * taps + t];
}
template <typename T>
void FromPatchOrder(const T* wp, int64_t m, int64_t cg, int64_t taps, T* w) {
  for (int64_t o = 0; o < m; ++o)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t t = 0; t < taps; ++t) w[(o * cg + c) * taps + t] = wp[(o * taps + t) * cg + c];
}

// Scratch slots: per thread 0 = patch rows, 1 = channels-last images, 3 = GEMM output before it goes
// back to NCHW; on the calling thread 2 = dW partial sums, 4 = patch-order filters, 5 = the filters of
// the data-gradient convolution, 6 and 7 = the same packed for the direct kernel.
enum Slot {
  kRows = 0,
  kChannelsLast = 1,
  kPartials = 2,
  kGemmOut = 3,
  kFilters = 4,
  kGradFilters = 5,
  kDirectFilters = 6,
  kDirectGradFilters = 7
};

// The direct AVX-512 kernel (helpers/direct_conv.h) for float, one group and M >= 8, unless
// FLUIDLITE_CONV_DIRECT=0 (read per call, so a benchmark or test can compare both paths in one process).
template <typename T>
bool UseDirect(const ConvShape& s) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    const char* env = std::getenv("FLUIDLITE_CONV_DIRECT");
    // Padding M to 16 may waste at most half the work (LeNet's 20 -> 32 is fine; the 1-channel data
    // gradient of a grey image is not).
    return (!env || std::strcmp(env, "0") != 0) && direct_conv::Supported() && s.groups == 1 && s.consistent &&
           direct_conv::PaddedChannels(s.out_channels) <= 2 * s.out_channels;
  }
}

// The direct filter gradient too (when the direct kernel is used), up to K = C*kh*kw = 1152 (3x3 over
// 128 channels): past it OpenBLAS's GEMM on patch rows wins (VGG's 256 -> 256 layer at 8x8: 12.6 ms
// forward + backward against 14.5 with the direct filter gradient, benchmarks/conv.py), while the direct
// forward stays as fast or faster.
constexpr int64_t kMaxDirectFilterGradPatch = 1152;

// The GEMM path, on channels-last patch rows. For a chunk of n images (R = n*P rows) and group g:
//   out_g [R, Mg]  = rows_g [R, Kg] @ Wp_g^T           (then [P, M] -> [M, P] per image)
//   dWp_g [Mg, Kg] += dout'_g [Mg, R] @ rows_g          (dout' = dout of the chunk as [M, n*P])
//   dx: with stride 1, the convolution of dout with the flipped, transposed filters (padding
//       dilation*(k-1) - pad), which is this same forward path; otherwise
//       drows_g [R, Kg] = dout^T_g [R, Mg] @ Wp_g, scattered back by Row2Im.
// With several threads and at least one chunk per thread, each pool thread takes a contiguous run of
// chunks (its own patch rows, its own dW partial sum): the per-image GEMMs of small images are too small
// to split well. Otherwise (batch 1) blas::Gemm splits each GEMM and the pool splits the patch building.
template <typename T>
class PatchConv {
 public:
  // w: the filters [M, C/groups, kh, kw] as Fluid stores them.
  // cache (conv2d_fusion): the filters' layouts made once per version of the filter tensor (`version`, `dims`).
  PatchConv(const ConvShape& s, const T* w, Slot filter_slot, Slot direct_slot, PackedFilters<T>* cache = nullptr,
            std::pair<const void*, uint64_t> version = {}, const DDim& dims = DDim{})
      : s_(s),
        p_(s.geom.OutSize()),
        k_(s.geom.PatchSize()),
        kg_(s.PatchPerGroup()),
        mg_(s.OutPerGroup()),
        image_(s.geom.ImageSize()),
        nb_(ImagesPerChunk(s, sizeof(T))),
        parts_(1),
        direct_(UseDirect<T>(s)),
        direct_dw_(direct_ && s.geom.PatchSize() <= kMaxDirectFilterGradPatch),
        mp_(direct_conv::PaddedChannels(s.out_channels)) {
    const bool cached = cache && version.first && cache->version == version && cache->dims == dims &&
                        cache->groups == s.groups && cache->direct == direct_;
    if (cached) {
      wp_ = cache->wp.data();
      wd_ = direct_ ? cache->wd.data() : nullptr;
    } else {
      T* wp = cache ? (cache->wp.resize(s.out_channels * kg_), cache->wp.data())
                    : Scratch<T>(filter_slot, s.out_channels * kg_);
      ToPatchOrder(w, s.out_channels, s.geom.channels / s.groups, s.geom.Taps(), wp);
      wp_ = wp;
      if constexpr (std::is_same_v<T, float>) {
        if (direct_) {
          wd_ = cache ? (cache->wd.resize(mp_ * kg_), cache->wd.data()) : Scratch<float>(direct_slot, mp_ * kg_);
          direct_conv::PackFilters(w, s.out_channels, mp_, s.geom.channels, s.geom.Taps(), wd_);
        }
      }
      if (cache) {
        cache->version = version;
        cache->dims = dims;
        cache->groups = s.groups;
        cache->direct = direct_;
      }
    }
    const int64_t threads = ThreadPool::Instance().Size(), chunks = (s.batch + nb_ - 1) / nb_;
    if (threads > 1 && chunks >= threads) {
      // Equal chunks, a whole number per thread: 32 images of 8x8 go 16 + 16, not 16 + 16 + 0.
      const int64_t per_thread = (chunks + threads - 1) / threads;
      nb_ = (s.batch + threads * per_thread - 1) / (threads * per_thread);
      parts_ = threads;
    }
  }

  void Forward(const T* x, T* out, const ConvEpilogue<T>* epi = nullptr) const {
    ForParts([&](int64_t b0, int64_t b1, int) {
      for (int64_t c0 = b0; c0 < b1; c0 += nb_) ForwardChunk(x, c0, std::min(nb_, b1 - c0), out, epi);
    });
  }

  // dx and dw may each be null (not wanted). w: the filters as given to the constructor.
  void Backward(const T* x, const T* w, const T* dout, T* dx, T* dw) const {
    const ConvGeometry& g = s_.geom;
    const int64_t wsize = s_.out_channels * kg_, psize = (direct_dw_ ? mp_ : s_.out_channels) * kg_;
    // The data gradient as a convolution of dout when the forward had stride 1.
    std::unique_ptr<ConvShape> tshape;
    std::unique_ptr<PatchConv> transposed;
    if (dx && g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= g.dilation_h * (g.kernel_h - 1) &&
        g.pad_w <= g.dilation_w * (g.kernel_w - 1)) {
      tshape.reset(new ConvShape(TransposedShape()));
      T* wt = Scratch<T>(kTransposedSource, wsize);
      FlipTranspose(w, wt);
      transposed.reset(new PatchConv(*tshape, wt, kGradFilters, kDirectGradFilters));
      transposed->nb_ = nb_;
      transposed->parts_ = parts_;
    }
    // Filter gradient partial sums, one per part (direct: packed [taps, C, Mp]; else patch order).
    T* partials = dw ? Scratch<T>(kPartials, parts_ * psize) : nullptr;
    ForParts([&](int64_t b0, int64_t b1, int part) {
      T* dwp = dw ? partials + part * psize : nullptr;
      if (dwp && (b0 == b1 || direct_dw_)) std::fill(dwp, dwp + psize, T(0));
      for (int64_t c0 = b0; c0 < b1; c0 += nb_) {
        const int64_t n = std::min(nb_, b1 - c0);
        if (dwp) FilterGradChunk(x, dout, c0, n, c0 == b0, dwp);
        if (transposed) transposed->ForwardChunk(dout, c0, n, dx);
        else if (dx) DataGradChunk(dout, c0, n, dx);
      }
    });
    if (dw) {
      for (int64_t p = 1; p < parts_; ++p)
        for (int64_t i = 0; i < psize; ++i) partials[i] += partials[p * psize + i];
      if constexpr (std::is_same_v<T, float>) {
        if (direct_dw_) {
          direct_conv::UnpackFilters(partials, s_.out_channels, mp_, g.channels, g.Taps(), dw);
          return;
        }
      }
      FromPatchOrder(partials, s_.out_channels, g.channels / s_.groups, g.Taps(), dw);
    }
  }

 private:
  // The source of the flipped filters (the calling thread's slot; PatchConv reorders it into kGradFilters).
  static constexpr Slot kTransposedSource = kGemmOut;

  // f(first image, end image, part) for each part's run of whole chunks, the parts in parallel.
  template <typename F>
  void ForParts(F f) const {
    if (parts_ == 1) {
      f(0, s_.batch, 0);
      return;
    }
    const int64_t chunks = (s_.batch + nb_ - 1) / nb_;
    ParallelFor(parts_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part)
        f(std::min(s_.batch, chunks * part / parts_ * nb_), std::min(s_.batch, chunks * (part + 1) / parts_ * nb_),
          static_cast<int>(part));
    });
  }

  // The patch rows [n*P, K] of images [b0, b0 + n) of x (NCHW).
  const T* PatchRows(const T* x, int64_t b0, int64_t n) const {
    const ConvGeometry& g = s_.geom;
    const int64_t hw = g.height * g.width;
    T* hwc = Scratch<T>(kChannelsLast, n * image_);
    TransposeImages(x + b0 * image_, n, g.channels, hw, hwc);
    if (g.IsPointwise()) return hwc;
    T* rows = Scratch<T>(kRows, n * p_ * k_);
    ParallelFor(n * g.out_h, std::max<int64_t>(1, (int64_t(1) << 14) / (g.out_w * k_)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e;) {
        const int64_t i = r / g.out_h, ho0 = r % g.out_h, ho1 = std::min(g.out_h, ho0 + (e - r));
        Im2Row(g, s_.groups, hwc + i * image_, rows + i * p_ * k_, ho0, ho1);
        r += ho1 - ho0;
      }
    });
    return rows;
  }

  void ForwardChunk(const T* x, int64_t b0, int64_t n, T* out, const ConvEpilogue<T>* epi = nullptr) const {
    if constexpr (std::is_same_v<T, float>) {
      if (direct_) {
        for (int64_t i = b0; i < b0 + n; ++i) {
          const int64_t at = i * s_.out_channels * p_;
          DirectForwardImage(x + i * image_, out + at, epi);
          if (epi && epi->residual) epi->Residual(out + at, at, s_.out_channels * p_);  // the image is in cache
        }
        return;
      }
    }
    const int64_t m = s_.out_channels, r = n * p_;
    const T* rows = PatchRows(x, b0, n);
    T* y = Scratch<T>(kGemmOut, r * m);
    for (int64_t g = 0; g < s_.groups; ++g)
      blas::Gemm<T>(false, true, r, mg_, kg_, T(1), rows + g * kg_, k_, wp_ + g * mg_ * kg_, kg_, T(0), y + g * mg_, m);
    if (epi) epi->act.Rows(y, r, m, m, epi->bias);  // [R, M]: bias per column, while the tile is in cache
    TransposeImages(y, n, p_, m, out + b0 * m * p_);
    if (epi && epi->residual) epi->Residual(out + b0 * m * p_, b0 * m * p_, n * m * p_);  // the chunk, in cache
  }

  // One image through the direct kernel: pad to channels last, convolve row by row, back to NCHW.
  void DirectForwardImage(const float* x, float* out, const ConvEpilogue<float>* epi) const {
    const ConvGeometry& g = s_.geom;
    const int64_t m = s_.out_channels;
    float* padded = Scratch<float>(kChannelsLast, direct_conv::PaddedSize(g));
    direct_conv::PadToChannelsLast(g, x, padded);
    float* y = Scratch<float>(kGemmOut, p_ * mp_);
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, g.out_w * mp_ * k_));
    ParallelFor(g.out_h, grain, [&](int64_t b, int64_t e) {
      direct_conv::ConvolveRows(g, mp_, padded, wd_, y, b, e);
      // The rows' tile [(e - b) * Wo, Mp] is still in cache: bias and activation on its M real channels.
      if (epi) epi->act.Rows(y + b * g.out_w * mp_, (e - b) * g.out_w, m, mp_, epi->bias);
    });
    detail::Transpose2D(y, mp_, out, p_, m, p_);
  }

  // `first`: dwp is overwritten rather than added to (the direct kernel always adds: dwp starts at 0).
  void FilterGradChunk(const T* x, const T* dout, int64_t b0, int64_t n, bool first, T* dwp) const {
    const int64_t m = s_.out_channels, r = n * p_;
    if constexpr (std::is_same_v<T, float>) {
      if (direct_dw_) {
        const ConvGeometry& g = s_.geom;
        const std::vector<int64_t> offsets = direct_conv::RowOffsets(g);
        const int64_t k = g.PatchSize(), blocks = (k + direct_conv::kWeightRowBlock - 1) / direct_conv::kWeightRowBlock;
        for (int64_t i = b0; i < b0 + n; ++i) {
          float* padded = Scratch<float>(kChannelsLast, direct_conv::PaddedSize(g));
          direct_conv::PadToChannelsLast(g, x + i * image_, padded);
          float* dy = Scratch<float>(kGemmOut, p_ * mp_);
          direct_conv::ToChannelsLast(dout + i * m * p_, m, p_, mp_, dy);
          ParallelFor(blocks, 1, [&](int64_t b, int64_t e) {  // serial inside a part
            direct_conv::AccumulateFilterGrad(g, mp_, padded, dy, offsets.data(), dwp, b * direct_conv::kWeightRowBlock,
                                              std::min(k, e * direct_conv::kWeightRowBlock));
          });
        }
        return;
      }
    }
    const T* rows = PatchRows(x, b0, n);
    const T* wide = dout + b0 * m * p_;
    if (n > 1) {
      T* t = Scratch<T>(kGemmOut, m * r);
      ToWide(wide, m, n, p_, t);
      wide = t;
    }
    for (int64_t g = 0; g < s_.groups; ++g)
      blas::Gemm<T>(false, false, mg_, kg_, r, T(1), wide + g * mg_ * r, r, rows + g * kg_, k_, first ? T(0) : T(1),
                    dwp + g * mg_ * kg_, kg_);
  }

  // dx of images [b0, b0 + n) through patch-row gradients (any stride).
  void DataGradChunk(const T* dout, int64_t b0, int64_t n, T* dx) const {
    const ConvGeometry& g = s_.geom;
    const int64_t m = s_.out_channels, r = n * p_, hw = g.height * g.width;
    T* dout_t = Scratch<T>(kChannelsLast, r * m);
    TransposeImages(dout + b0 * m * p_, n, m, p_, dout_t);
    T* drows = Scratch<T>(kRows, r * k_);
    for (int64_t grp = 0; grp < s_.groups; ++grp)
      blas::Gemm<T>(false, false, r, kg_, mg_, T(1), dout_t + grp * mg_, m, wp_ + grp * mg_ * kg_, kg_, T(0),
                    drows + grp * kg_, k_);
    T* dx_hwc = Scratch<T>(kGemmOut, n * image_);
    ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) Row2Im(g, s_.groups, drows + i * p_ * k_, dx_hwc + i * image_);
    });
    TransposeImages(dx_hwc, n, hw, g.channels, dx + b0 * image_);
  }

  // The stride-1 data gradient's convolution: dout [M channels, Ho, Wo] -> dx [C, H, W].
  ConvShape TransposedShape() const {
    const ConvGeometry& g = s_.geom;
    ConvShape t;
    t.geom = {s_.out_channels,
              g.out_h,
              g.out_w,
              g.kernel_h,
              g.kernel_w,
              1,
              1,
              g.dilation_h * (g.kernel_h - 1) - g.pad_h,
              g.dilation_w * (g.kernel_w - 1) - g.pad_w,
              g.dilation_h,
              g.dilation_w,
              g.height,
              g.width};
    t.batch = s_.batch;
    t.out_channels = g.channels;
    t.groups = s_.groups;
    t.consistent = s_.consistent;
    return t;
  }

  // wt[c, m', kh-1-ki, kw-1-kj] = w[g*Mg + m', c - g*Cg, ki, kj] for c in group g: [C, Mg, kh, kw].
  void FlipTranspose(const T* w, T* wt) const {
    const int64_t cg = s_.geom.channels / s_.groups, taps = s_.geom.Taps();
    for (int64_t grp = 0; grp < s_.groups; ++grp)
      for (int64_t mo = 0; mo < mg_; ++mo)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < taps; ++t)
            wt[((grp * cg + c) * mg_ + mo) * taps + (taps - 1 - t)] = w[((grp * mg_ + mo) * cg + c) * taps + t];
  }

  const ConvShape& s_;
  const int64_t p_, k_, kg_, mg_, image_;
  int64_t nb_, parts_;
  const bool direct_;     // forward (and a stride-1 data gradient's convolution) by the direct kernel
  const bool direct_dw_;  // the filter gradient by the direct kernel
  const int64_t mp_;      // output channels rounded up to 16 (the direct kernel's packed filters and outputs)
  const T* wp_;
  float* wd_ = nullptr;  // filters packed for the direct kernel (direct_conv::PackFilters)
};

// Depthwise convolution (one input channel per group, `mult` output channels per input channel) as
// direct loops: for every output row and kernel tap, one contiguous run of output columns whose input
// lies inside the image (the padding is skipped, never read), so no column matrix is built.
template <typename T>
class DepthwiseConv {
 public:
  explicit DepthwiseConv(const ConvShape& s) : s_(s), g_(s.geom), mult_(s.out_channels / s.geom.channels) {
    hlo_.resize(g_.kernel_h);
    hhi_.resize(g_.kernel_h);
    wlo_.resize(g_.kernel_w);
    whi_.resize(g_.kernel_w);
    for (int64_t ki = 0; ki < g_.kernel_h; ++ki)
      ValidRange(g_.out_h, g_.height, g_.stride_h, ki * g_.dilation_h - g_.pad_h, &hlo_[ki], &hhi_[ki]);
    for (int64_t kj = 0; kj < g_.kernel_w; ++kj)
      ValidRange(g_.out_w, g_.width, g_.stride_w, kj * g_.dilation_w - g_.pad_w, &wlo_[kj], &whi_[kj]);
  }

  void Forward(const T* x, const T* w, T* out, const ConvEpilogue<T>* epi = nullptr) const {
    const int64_t sw = g_.stride_w, p = g_.OutSize(), hw = g_.height * g_.width, m_all = s_.out_channels;
    ParallelFor(s_.batch * m_all, Grain(), [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t m = plane % m_all;
        const T* in = x + (plane / m_all * g_.channels + m / mult_) * hw;
        T* o = out + plane * p;
        std::fill(o, o + p, T(0));
        const T* wm = w + m * Taps();
        Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
          const T wv = wm[tap];
          const T* src = in + in_off;
          T* d = o + ho * g_.out_w + wlo;
          if (sw == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] += wv * src[i];
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] += wv * src[i * sw];
          }
        });
        if (epi) epi->act.Plane(o, p, epi->bias ? epi->bias[m] : T(0), epi->bias != nullptr);  // plane in cache
      }
    });
  }

  void Backward(const T* x, const T* w, const T* dout, T* dx, T* dw) const {
    const int64_t sw = g_.stride_w, p = g_.OutSize(), hw = g_.height * g_.width, c = g_.channels;
    const int64_t taps = Taps(), ow = g_.out_w;
    if (dx) {
      // By input plane, so the planes of its `mult` output channels add into it from one thread.
      ParallelFor(s_.batch * c, Grain() / mult_, [&](int64_t begin, int64_t end) {
        for (int64_t plane = begin; plane < end; ++plane) {
          T* gin = dx + plane * hw;
          std::fill(gin, gin + hw, T(0));
          for (int64_t m = plane % c * mult_; m < (plane % c + 1) * mult_; ++m) {
            const T* go = dout + (plane / c * s_.out_channels + m) * p;
            const T* wm = w + m * taps;
            Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
              const T wv = wm[tap];
              T* dst = gin + in_off;
              const T* src = go + ho * ow + wlo;
              if (sw == 1) {
                for (int64_t i = 0; i < n; ++i) dst[i] += wv * src[i];
              } else {
                for (int64_t i = 0; i < n; ++i) dst[i * sw] += wv * src[i];
              }
            });
          }
        }
      });
    }
    if (dw) {
      // Per tap, products are summed elementwise into a row of partial sums (vectorisable), reduced once.
      ParallelFor(s_.out_channels, Grain() / std::max<int64_t>(1, s_.batch), [&](int64_t begin, int64_t end) {
        T* acc = Scratch<T>(0, taps * ow);
        for (int64_t m = begin; m < end; ++m) {
          std::fill(acc, acc + taps * ow, T(0));
          for (int64_t b = 0; b < s_.batch; ++b) {
            const T* in = x + (b * c + m / mult_) * hw;
            const T* go = dout + (b * s_.out_channels + m) * p;
            Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
              const T* src = in + in_off;
              const T* g = go + ho * ow + wlo;
              T* a = acc + tap * ow + wlo;
              if (sw == 1) {
                for (int64_t i = 0; i < n; ++i) a[i] += g[i] * src[i];
              } else {
                for (int64_t i = 0; i < n; ++i) a[i] += g[i] * src[i * sw];
              }
            });
          }
          for (int64_t t = 0; t < taps; ++t) {
            T sum = 0;
            for (int64_t i = 0; i < ow; ++i) sum += acc[t * ow + i];
            dw[m * taps + t] = sum;
          }
        }
      });
    }
  }

 private:
  int64_t Taps() const { return g_.kernel_h * g_.kernel_w; }
  // Output planes per thread slice: at least ~32K multiply-adds, so small convolutions stay serial.
  int64_t Grain() const {
    return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(1, Taps() * g_.OutSize()));
  }

  // run(tap, input offset of the run's first element, output row, first output column, length) for every
  // (output row, tap) whose input row is inside the image.
  template <typename F>
  void Runs(F run) const {
    for (int64_t ho = 0; ho < g_.out_h; ++ho)
      for (int64_t ki = 0; ki < g_.kernel_h; ++ki) {
        if (ho < hlo_[ki] || ho >= hhi_[ki]) continue;
        const int64_t row = (ho * g_.stride_h + ki * g_.dilation_h - g_.pad_h) * g_.width;
        for (int64_t kj = 0; kj < g_.kernel_w; ++kj) {
          const int64_t n = whi_[kj] - wlo_[kj];
          if (n > 0)
            run(ki * g_.kernel_w + kj, row + wlo_[kj] * g_.stride_w + kj * g_.dilation_w - g_.pad_w, ho, wlo_[kj], n);
        }
      }
  }

  const ConvShape& s_;
  const ConvGeometry& g_;
  const int64_t mult_;
  std::vector<int64_t> hlo_, hhi_, wlo_, whi_;
};

// A pointwise convolution (1x1, stride 1, no padding, one group) straight on NCHW: Output_i [M, P] = Filter [M, C]
// @ Input_i [C, P], with no transposes and no filter re-layout (the patch path's cost at batch 1, where the late
// 1x1 layers are [1280, 320] filters over 2x2 images: 0.9 ms of re-layout for 1.6 MFLOP). The output is made in
// blocks of rows, each a single-threaded GEMM whose [rows, P] tile gets the epilogue while it is in cache; the
// blocks of all images are spread over the pool. Used where the images are large enough to make wide GEMMs or at
// batch 1 (many small images go through the stacked patch path: one tall GEMM per chunk), by conv2d_fusion only:
// conv2d keeps the patch path's summation order, which training results are compared against (MobileNetV2's
// ill-conditioned first steps move by 10% with another order: tests/test_convnet_models.py).
bool UsePointwise(const ConvShape& s) {
  return s.groups == 1 && s.consistent && s.geom.IsPointwise() && s.geom.dilation_h == 1 && s.geom.dilation_w == 1 &&
         (s.batch == 1 || s.geom.OutSize() >= 64);
}

// o[q] = sum_i w[i] * x[q * c + i] for q < p: one filter row against p pixels (channels last). For float, four pixels
// at a time in 8-wide vectors (GCC/clang vector extensions), so the row is loaded once per four pixels.
template <typename T>
inline void DotRow(const T* w, const T* x, int64_t c, int64_t p, T* o) {
  for (int64_t q = 0; q < p; ++q) {
    T sum = 0;
    for (int64_t i = 0; i < c; ++i) sum += w[i] * x[q * c + i];
    o[q] = sum;
  }
}

template <>
inline void DotRow<float>(const float* w, const float* x, int64_t c, int64_t p, float* o) {
  typedef float v8 __attribute__((vector_size(32)));
  auto load = [](const float* f) {
    v8 v;
    std::memcpy(&v, f, sizeof(v));
    return v;
  };
  auto hsum = [](v8 v) {
    float s = 0;
    for (int j = 0; j < 8; ++j) s += v[j];
    return s;
  };
  const int64_t c8 = c / 8 * 8;
  int64_t q = 0;
  for (; q + 4 <= p; q += 4) {
    const float *x0 = x + q * c, *x1 = x0 + c, *x2 = x1 + c, *x3 = x2 + c;
    v8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int64_t i = 0; i < c8; i += 8) {
      const v8 wv = load(w + i);
      a0 += wv * load(x0 + i);
      a1 += wv * load(x1 + i);
      a2 += wv * load(x2 + i);
      a3 += wv * load(x3 + i);
    }
    float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
    for (int64_t i = c8; i < c; ++i)
      for (int k = 0; k < 4; ++k) s[k] += w[i] * x[(q + k) * c + i];
    for (int k = 0; k < 4; ++k) o[q + k] = s[k];
  }
  for (; q < p; ++q) {
    const float* xq = x + q * c;
    v8 a = {};
    for (int64_t i = 0; i < c8; i += 8) a += load(w + i) * load(xq + i);
    float sum = hsum(a);
    for (int64_t i = c8; i < c; ++i) sum += w[i] * xq[i];
    o[q] = sum;
  }
}

// Pointwise over images of at most this many pixels: a dot product per output, each filter row read once from
// memory, instead of a GEMM that re-packs the whole filter for a few columns (MobileNetV2's 2x2 and 4x4 stages).
constexpr int64_t kDotMaxPixels = 16;

// y [Pp, Mp] = xt [Pp, C] @ W^T for the output channels [m0, m1) (multiples of 16), wt holding W^T in blocks of 16
// channels ([Mp / 16][C][16], each block read front to back): a register tile of 4 pixels x 16 channels, pixels
// broadcast, no horizontal sums.
inline void PointwiseTiles(const float* xt, const float* wt, int64_t c, int64_t mp, int64_t pp, int64_t m0, int64_t m1,
                           float* y) {
  typedef float v8 __attribute__((vector_size(32)));
  for (int64_t mb = m0; mb < m1; mb += 16)
    for (int64_t q0 = 0; q0 < pp; q0 += 4) {
      const float *x0 = xt + q0 * c, *x1 = x0 + c, *x2 = x1 + c, *x3 = x2 + c;
      const float* wb = wt + mb * c;  // block mb / 16: [C, 16]
      v8 a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
      for (int64_t ch = 0; ch < c; ++ch) {
        v8 w0, w1;
        std::memcpy(&w0, wb + ch * 16, sizeof(v8));
        std::memcpy(&w1, wb + ch * 16 + 8, sizeof(v8));
        a00 += x0[ch] * w0, a01 += x0[ch] * w1;
        a10 += x1[ch] * w0, a11 += x1[ch] * w1;
        a20 += x2[ch] * w0, a21 += x2[ch] * w1;
        a30 += x3[ch] * w0, a31 += x3[ch] * w1;
      }
      float* yq = y + q0 * mp + mb;
      std::memcpy(yq, &a00, sizeof(v8)), std::memcpy(yq + 8, &a01, sizeof(v8));
      std::memcpy(yq + mp, &a10, sizeof(v8)), std::memcpy(yq + mp + 8, &a11, sizeof(v8));
      std::memcpy(yq + 2 * mp, &a20, sizeof(v8)), std::memcpy(yq + 2 * mp + 8, &a21, sizeof(v8));
      std::memcpy(yq + 3 * mp, &a30, sizeof(v8)), std::memcpy(yq + 3 * mp + 8, &a31, sizeof(v8));
    }
}

// cache (conv2d_fusion, float, one image): the transposed filters kept across runs for PointwiseTiles.
template <typename T>
void PointwiseForward(const ConvShape& s, const T* x, const T* w, T* out, const ConvEpilogue<T>* epi,
                      PackedFilters<T>* cache = nullptr, std::pair<const void*, uint64_t> version = {},
                      const DDim& dims = DDim{}) {
  const int64_t m = s.out_channels, c = s.geom.channels, p = s.geom.OutSize();
  if constexpr (std::is_same_v<T, float>) {
    if (p <= kDotMaxPixels && s.batch == 1 && cache && version.first) {
      const int64_t mp = (m + 15) / 16 * 16, pp = (p + 3) / 4 * 4;
      if (cache->wt_version != version || !(cache->wt_dims == dims)) {
        cache->wt.assign(c * mp, 0.0f);
        for (int64_t b = 0; b < mp / 16; ++b)  // block b: wt[(b * C + ch) * 16 + j] = w[(b * 16 + j) * C + ch]
          detail::Transpose2D(w + b * 16 * c, c, cache->wt.data() + b * c * 16, 16, c,
                              std::min<int64_t>(16, m - b * 16));
        cache->wt_version = version;
        cache->wt_dims = dims;
      }
      float* xt = Scratch<float>(kChannelsLast, pp * c);  // [Pp, C], the padding pixels zero
      detail::Transpose2D(x, p, xt, c, p, c);
      std::fill(xt + p * c, xt + pp * c, 0.0f);
      float* y = Scratch<float>(kGemmOut, pp * mp);
      const int64_t blocks = mp / 16;
      const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(blas::kMinFlopsPerPart / (2.0 * 16 * pp * c)));
      const float* wt = cache->wt.data();
      ParallelFor(blocks, grain,
                  [&](int64_t b0, int64_t b1) { PointwiseTiles(xt, wt, c, mp, pp, b0 * 16, b1 * 16, y); });
      if (epi) epi->act.Rows(y, p, m, mp, epi->bias);
      detail::Transpose2D(y, mp, out, p, m, p);  // out[o * P + q] = y[q * Mp + o]
      return;
    }
  }
  if (p <= kDotMaxPixels) {
    T* xt = Scratch<T>(kChannelsLast, s.batch * p * c);  // each image [P, C]
    for (int64_t i = 0; i < s.batch; ++i) detail::Transpose2D(x + i * c * p, p, xt + i * p * c, c, p, c);
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(blas::kMinFlopsPerPart / (2.0 * p * c)));
    ParallelFor(s.batch * m, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t i = t / m, r = t % m;
        T* o = out + t * p;
        DotRow(w + r * c, xt + i * p * c, c, p, o);
        if (epi) epi->act.Plane(o, p, epi->bias ? epi->bias[r] : T(0), epi->bias != nullptr);
      }
    });
    return;
  }
  // ~32K outputs (128 KiB of float) per block, whole 16-row groups; at least 1 MFLOP per pool part.
  int64_t rows = std::max<int64_t>(16, ((int64_t(1) << 15) / std::max<int64_t>(1, p)) / 16 * 16);
  rows = std::min(rows, m);
  const int64_t blocks = (m + rows - 1) / rows;
  const double flops = 2.0 * rows * p * c;
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(blas::kMinFlopsPerPart / std::max(1.0, flops)));
  ParallelFor(s.batch * blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i = t / blocks, r0 = t % blocks * rows, nr = std::min(rows, m - r0);
      T* o = out + (i * m + r0) * p;
      blas::SerialGemm<T>(false, false, nr, p, c, T(1), w + r0 * c, c, x + i * c * p, p, T(0), o, p);
      if (epi)
        for (int64_t r = 0; r < nr; ++r)
          epi->act.Plane(o + r * p, p, epi->bias ? epi->bias[r0 + r] : T(0), epi->bias != nullptr);
    }
  });
}

// DepthwiseChannelsLast's rows [h0, h1) for float with C a multiple of 8: the channels in blocks of 32 (4 vectors
// of 8) accumulated in registers over the taps, in the same tap order.
inline void DepthwiseRowsF32(const ConvGeometry& g, const float* xin, const float* wt, int64_t h0, int64_t h1,
                             float* y) {
  typedef float v8 __attribute__((vector_size(32)));
  auto load = [](const float* f) {
    v8 v;
    std::memcpy(&v, f, sizeof(v));
    return v;
  };
  const int64_t c = g.channels, ow = g.out_w;
  for (int64_t c0 = 0; c0 < c; c0 += 32) {
    const int64_t nv = std::min<int64_t>(4, (c - c0) / 8);
    for (int64_t ho = h0; ho < h1; ++ho)
      for (int64_t wo = 0; wo < ow; ++wo) {
        v8 a[4] = {};
        for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
          const int64_t hi = ho * g.stride_h + ki * g.dilation_h - g.pad_h;
          if (hi < 0 || hi >= g.height) continue;
          for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
            const int64_t wi = wo * g.stride_w + kj * g.dilation_w - g.pad_w;
            if (wi < 0 || wi >= g.width) continue;
            const float* src = xin + (hi * g.width + wi) * c + c0;
            const float* wk = wt + (ki * g.kernel_w + kj) * c + c0;
            if (nv == 4) {
              a[0] += load(wk) * load(src);
              a[1] += load(wk + 8) * load(src + 8);
              a[2] += load(wk + 16) * load(src + 16);
              a[3] += load(wk + 24) * load(src + 24);
            } else {
              for (int64_t v = 0; v < nv; ++v) a[v] += load(wk + 8 * v) * load(src + 8 * v);
            }
          }
        }
        float* yo = y + (ho * ow + wo) * c + c0;
        for (int64_t v = 0; v < nv; ++v) std::memcpy(yo + 8 * v, &a[v], sizeof(v8));
      }
  }
}

// A depthwise convolution (one output channel per input channel) channels-last: the image goes to [H*W, C] once,
// each output pixel is a sum over the taps of C-long vector products, the bias and activation are applied to
// each block of output rows [rows*Wo, C] right after they are computed, and the block goes back to NCHW. The
// plane-by-plane loops of DepthwiseConv spend their time on loop overhead when the planes are small (MobileNetV2
// at CIFAR size: 576 channels of 4x4); here every inner loop is C long. Sums the taps in the same order.
template <typename T>
void DepthwiseChannelsLast(const ConvShape& s, const T* x, const T* w, T* out, const ConvEpilogue<T>* epi) {
  const ConvGeometry& g = s.geom;
  const int64_t c = g.channels, hw = g.height * g.width, p = g.OutSize(), taps = g.Taps(), ow = g.out_w;
  T* wt = Scratch<T>(kFilters, taps * c);  // [taps, C]
  detail::Transpose2D(w, taps, wt, c, taps, c);
  T* xin = Scratch<T>(kChannelsLast, hw * c);
  T* y = Scratch<T>(kGemmOut, p * c);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(1, ow * taps * c));
  for (int64_t i = 0; i < s.batch; ++i) {
    detail::Transpose2D(x + i * c * hw, hw, xin, c, hw, c);
    T* o = out + i * c * p;
    ParallelFor(g.out_h, grain, [&](int64_t h0, int64_t h1) {
      bool done = false;
      if constexpr (std::is_same_v<T, float>) {
        if (c % 8 == 0) {
          DepthwiseRowsF32(g, xin, wt, h0, h1, y);
          done = true;
        }
      }
      for (int64_t ho = h0; ho < h1 && !done; ++ho)
        for (int64_t wo = 0; wo < ow; ++wo) {
          T* yo = y + (ho * ow + wo) * c;
          std::fill(yo, yo + c, T(0));
          for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
            const int64_t hi = ho * g.stride_h + ki * g.dilation_h - g.pad_h;
            if (hi < 0 || hi >= g.height) continue;
            for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
              const int64_t wi = wo * g.stride_w + kj * g.dilation_w - g.pad_w;
              if (wi < 0 || wi >= g.width) continue;
              const T* src = xin + (hi * g.width + wi) * c;
              const T* wk = wt + (ki * g.kernel_w + kj) * c;
              for (int64_t ch = 0; ch < c; ++ch) yo[ch] += wk[ch] * src[ch];
            }
          }
        }
      T* rows = y + h0 * ow * c;
      const int64_t n = (h1 - h0) * ow;
      if (epi) epi->act.Rows(rows, n, c, c, epi->bias);
      detail::Transpose2D(rows, c, o + h0 * ow, p, c, n);
    });
  }
}

// epi: conv2d_fusion's bias and activation (null for conv2d).
template <typename T>
void ConvForwardKernel(const ExecutionContext& ctx, const ConvEpilogue<T>* epi = nullptr) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const ConvShape s = MakeShape(ctx, in.dims(), filter.dims());
  Tensor* out = ctx.Output("Output");
  out->Resize(DDim{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w});
  T* o = out->mutable_data<T>(ctx.place());
  // Channels last where the planes are small or strided (MobileNetV2's 4x4 stage: 22 against 105 us per call, a
  // stride-2 32x32 layer 72 against 166); large stride-1 planes keep the plane loops, whose runs are long and which
  // need no transposes (64 channels of 32x32: 179 against 223 us; benchmarks measured under shared load).
  if (epi && s.Depthwise() && s.out_channels == s.geom.channels && s.consistent && s.geom.channels >= 8 &&
      (s.geom.height * s.geom.width <= 256 || s.geom.stride_h > 1 || s.geom.stride_w > 1))
    DepthwiseChannelsLast<T>(s, in.data<T>(), filter.data<T>(), o, epi);
  else if (s.Depthwise()) DepthwiseConv<T>(s).Forward(in.data<T>(), filter.data<T>(), o, epi);
  else if (epi && UsePointwise(s))
    PointwiseForward<T>(s, in.data<T>(), filter.data<T>(), o, epi, &ctx.State<PackedFilters<T>>(),
                        filter.data_version(), filter.dims());
  else if (epi) {
    PatchConv<T>(s, filter.data<T>(), kFilters, kDirectFilters, &ctx.State<PackedFilters<T>>(), filter.data_version(),
                 filter.dims())
        .Forward(in.data<T>(), o, epi);
    return;  // the patch path adds the residual per image or chunk
  } else PatchConv<T>(s, filter.data<T>(), kFilters, kDirectFilters).Forward(in.data<T>(), o, epi);
  if (epi && epi->residual) epi->Residual(o, 0, out->numel());  // the other paths: one pass at the end
}

template <typename T>
void ConvFusionKernel(const ExecutionContext& ctx) {
  ConvEpilogue<T> epi;
  epi.act.act = EpilogueActByName(ctx.Attr<std::string>("activation"));
  if (const Tensor* b = ctx.InputOrNull("Bias")) {
    const int64_t m = ctx.Input("Filter").dims()[0];
    FL_ENFORCE(b->numel() == m, "conv2d_fusion: Bias '", ctx.InputName("Bias"), "' ", b->dims(), " must hold M = ", m,
               " values (the output channels of Filter '", ctx.InputName("Filter"), "')");
    epi.bias = b->data<T>();
  }
  if (const Tensor* r = ctx.InputOrNull("ResidualData")) {
    const Tensor& in = ctx.Input("Input");
    const ConvShape s = MakeShape(ctx, in.dims(), ctx.Input("Filter").dims());
    const DDim out{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w};
    FL_ENFORCE(r->dims() == out, "conv2d_fusion: ResidualData '", ctx.InputName("ResidualData"), "' ", r->dims(),
               " must have the Output's shape ", out);
    epi.residual = r->data<T>();
    epi.post.act = epi.act.act;
    epi.act.act = EpilogueAct::kIdentity;
  }
  ConvForwardKernel<T>(ctx, &epi);
}

template <typename T>
void ConvGradKernel(const ExecutionContext& ctx) {
  const ConvGradArgs<T> a(ctx);
  const Tensor &in = a.in, &filter = a.filter, &dout = a.dout;
  const ConvShape& s = a.s;
  T *dx = a.dx, *dw = a.dw;
  if (!dx && !dw) return;
  if (s.Depthwise()) DepthwiseConv<T>(s).Backward(in.data<T>(), filter.data<T>(), dout.data<T>(), dx, dw);
  else
    PatchConv<T>(s, filter.data<T>(), kFilters, kDirectFilters)
        .Backward(in.data<T>(), filter.data<T>(), dout.data<T>(), dx, dw);
}

// The attributes conv2d, depthwise_conv2d and conv2d_fusion share.
void ConvAttrSpecs(OpBuilder& op) {
  op.Attr("strides", std::vector<int32_t>{1, 1}, "[stride_h, stride_w]")
      .Min(1)
      .Size(2)
      .Attr("paddings", std::vector<int32_t>{0, 0}, "zero padding [pad_h, pad_w] on both sides")
      .Min(0)
      .Size(2)
      .Attr("dilations", std::vector<int32_t>{1, 1}, "kernel dilation [dilation_h, dilation_w]")
      .Min(1)
      .Size(2)
      .Attr<int32_t>("groups", 1, "number of channel groups (C and M divisible by it)")
      .Min(1)
      .Attr<bool>("use_cudnn", false, "accepted for Fluid compatibility; CPU kernels ignore it")
      .Attr<bool>("use_mkldnn", false, "accepted for Fluid compatibility; ignored")
      .Attr("data_format", "AnyLayout", "NCHW (or AnyLayout, meaning NCHW); no other layout is supported")
      .OneOf({"NCHW", "AnyLayout"});
}

void RegisterConv(OpBuilder& op, const std::string& type) {
  op.Doc(type +
         ": 2-D convolution of NCHW Input [N, C, H, W] with Filter [M, C/groups, kh, kw] giving Output "
         "[N, M, Ho, Wo], Ho = (H + 2*pad - (dilation*(kh-1) + 1)) / stride + 1 (likewise Wo). Channels "
         "split into `groups` independent convolutions.")
      .Input("Input", "input images [N, C, H, W]")
      .Input("Filter", "filters [M, C/groups, kh, kw]")
      .Output("Output", "output images [N, M, Ho, Wo]");
  ConvAttrSpecs(op);
  op.SetInferShape(ConvInferShape).CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
    ConvForwardKernel<typename decltype(tag)::type>(ctx);
  });
  // The grad needs neither Output nor its buffer: only Input, Filter and Output@GRAD.
  op.GradOp({"Input", "Filter", "Output@GRAD"})
      .Doc(type + "_grad: gradients of the convolution; Input@GRAD and Filter@GRAD are each optional.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { ConvGradKernel<typename decltype(tag)::type>(ctx); });
}

// ------------------------------------------------------------------ conv2d_transpose
// conv2d_transpose of X [N, C, H, W] with Filter [C, M/groups, kh, kw] is the data gradient of a conv2d whose
// input is the output [N, M, Ho, Wo] and whose filters are the same tensor read as [C out, M/groups in, kh,
// kw]: Out = conv2d_backward_data(dout = X). So its forward is PatchConv/DepthwiseConv::Backward (dx only),
// its data gradient is their Forward of dOut, and its filter gradient their filter gradient with the roles of
// input (dOut) and output gradient (X) swapped.

void ConvTransposeInferShape(InferShapeContext& ctx) {
  const std::string& op = ctx.Type();
  const DDim in = ctx.InputDim("Input"), filter = ctx.InputDim("Filter");
  FL_ENFORCE(in.size() == 4, op, ": ", ctx.Describe("Input"), " must be 4-D [N, C, H, W]");
  FL_ENFORCE(filter.size() == 4, op, ": ", ctx.Describe("Filter"), " must be 4-D [C, M/groups, kh, kw]");
  ctx.EnforceSameDType("Input", "Filter");
  const int64_t g = ctx.Attr<int32_t>("groups");
  const auto& output_size = ctx.Attr<std::vector<int32_t>>("output_size");
  FL_ENFORCE(output_size.empty() || output_size.size() == 2, op, ": output_size must be empty or [H, W], got ",
             output_size.size(), " values");
  FL_ENFORCE(in[1] < 0 || filter[0] < 0 || in[1] == filter[0], op, ": ", ctx.Describe("Input"), " has ", in[1],
             " channels but ", ctx.Describe("Filter"), " expects ", filter[0], " (Filter is [C, M/groups, kh, kw])");
  FL_ENFORCE(filter[0] < 0 || filter[0] % g == 0, op, ": ", filter[0], " input channels of ", ctx.Describe("Filter"),
             " are not divisible by groups = ", g);
  const TransposeGeometry t =
      MakeTransposeGeometry(ctx, in, filter, [&](const char* slot) { return ctx.Describe(slot); });
  ctx.SetOutput("Output", DDim{in[0], filter[1] < 0 ? -1 : filter[1] * g, t.out[0], t.out[1]}, ctx.InputDType("Input"));
}

template <typename T>
void ConvTransposeForwardKernel(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const ConvShape s = MakeTransposeShape(ctx, in.dims(), filter.dims());
  Tensor* out = ctx.Output("Output");
  out->Resize(DDim{s.batch, s.geom.channels, s.geom.height, s.geom.width});
  T* o = out->mutable_data<T>(ctx.place());
  if (s.batch == 0 || out->numel() == 0) return;
  if (s.Depthwise()) DepthwiseConv<T>(s).Backward(nullptr, filter.data<T>(), in.data<T>(), o, nullptr);
  else
    PatchConv<T>(s, filter.data<T>(), kFilters, kDirectFilters)
        .Backward(nullptr, filter.data<T>(), in.data<T>(), o, nullptr);
}

template <typename T>
void ConvTransposeGradKernel(const ExecutionContext& ctx) {
  const ConvGradArgs<T> a(ctx, /*transposed=*/true);
  const Tensor &in = a.in, &filter = a.filter, &dout = a.dout;
  const ConvShape& s = a.s;
  T *dx = a.dx, *dw = a.dw;
  if (!dx && !dw) return;
  if (s.batch == 0) {
    if (dw) std::fill(dw, dw + filter.numel(), T(0));
    return;
  }
  if (s.Depthwise()) {
    DepthwiseConv<T> conv(s);
    if (dx) conv.Forward(dout.data<T>(), filter.data<T>(), dx);
    if (dw) conv.Backward(dout.data<T>(), filter.data<T>(), in.data<T>(), nullptr, dw);
    return;
  }
  PatchConv<T> conv(s, filter.data<T>(), kFilters, kDirectFilters);
  if (dx) conv.Forward(dout.data<T>(), dx);
  if (dw) conv.Backward(dout.data<T>(), filter.data<T>(), in.data<T>(), nullptr, dw);
}

void RegisterConvTranspose(OpBuilder& op, const std::string& type) {
  op.Doc(type +
         ": 2-D transposed convolution (the data gradient of conv2d) of NCHW Input [N, C, H, W] with Filter "
         "[C, M/groups, kh, kw] giving Output [N, M, Ho, Wo], Ho = (H - 1)*stride - pad_top - pad_bottom + "
         "dilation*(kh-1) + 1 (likewise Wo), or output_size when given (at most stride - 1 more).")
      .Input("Input", "input images [N, C, H, W]")
      .Input("Filter", "filters [C, M/groups, kh, kw]")
      .Output("Output", "output images [N, M, Ho, Wo]")
      .Attr("output_size", std::vector<int32_t>{}, "[Ho, Wo], or empty to infer them")
      .Min(1)
      .Size(0, 2)
      .Attr("strides", std::vector<int32_t>{1, 1}, "[stride_h, stride_w]")
      .Min(1)
      .Size(2)
      .Attr("paddings", std::vector<int32_t>{0, 0}, "[pad_h, pad_w] on both sides, or [top, bottom, left, right]")
      .Min(0)
      .Size(2, 4)
      .Constrain("2 or 4 values",
                 [](const Attribute& a) -> std::string {
                   return std::get<std::vector<int32_t>>(a).size() == 3 ? "must have 2 or 4 values, not 3" : "";
                 })
      .Attr("padding_algorithm", "EXPLICIT", "EXPLICIT (use paddings), SAME or VALID, as in Fluid")
      .OneOf({"EXPLICIT", "SAME", "VALID"})
      .Attr("dilations", std::vector<int32_t>{1, 1}, "kernel dilation [dilation_h, dilation_w]")
      .Min(1)
      .Size(2)
      .Attr<int32_t>("groups", 1, "number of channel groups (C divisible by it)")
      .Min(1)
      .Attr<bool>("use_cudnn", false, "accepted for Fluid compatibility; CPU kernels ignore it")
      .Attr<bool>("use_mkldnn", false, "accepted for Fluid compatibility; ignored")
      .Attr("data_format", "NCHW", "NCHW (or AnyLayout, meaning NCHW); no other layout is supported")
      .OneOf({"NCHW", "AnyLayout"})
      .SetInferShape(ConvTransposeInferShape)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { ConvTransposeForwardKernel<typename decltype(tag)::type>(ctx); });
  op.GradOp({"Input", "Filter", "Output@GRAD"})
      .Doc(type + "_grad: gradients of the transposed convolution; Input@GRAD and Filter@GRAD are each optional.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { ConvTransposeGradKernel<typename decltype(tag)::type>(ctx); });
}

}  // namespace

FL_REGISTER_OP(conv2d, op) { RegisterConv(op, "conv2d"); }
// Fluid 1.8's conv2d_fusion (its CUDA-only op, here on the CPU): the inference pass fuse_conv_bias_act makes it
// from conv2d / depthwise_conv2d + elementwise_add(bias) + an activation. No gradient (inference programs only).
FL_REGISTER_OP(conv2d_fusion, op) {
  op.Doc(
        "conv2d_fusion: Output = act(conv2d(Input, Filter) + Bias[m] [+ ResidualData]): the convolution of conv2d "
        "(groups == "
        "channels: depthwise_conv2d's kernel) with the bias and activation applied to each output tile as the "
        "convolution writes it.")
      .Input("Input", "input images [N, C, H, W]")
      .Input("Filter", "filters [M, C/groups, kh, kw]")
      .DispensableInput("Bias", "per-output-channel bias [M]")
      .DispensableInput("ResidualData", "added after the bias, before the activation (Output's shape)")
      .Output("Output", "output images [N, M, Ho, Wo]");
  ConvAttrSpecs(op);
  op.Attr("activation", "relu", "applied after the bias: identity, relu, relu6 (threshold 6), sigmoid or tanh")
      .OneOf(EpilogueActNames())
      .Attr("fused_ops", std::vector<std::string>{}, "the ops a pass replaced by this one (shown by the profiler)")
      .SetInferShape([](InferShapeContext& ctx) {
        ConvInferShape(ctx);
        if (ctx.HasInput("Bias")) {
          ctx.EnforceSameDType("Input", "Bias");
          const DDim b = ctx.InputDim("Bias"), f = ctx.InputDim("Filter");
          const int64_t n = b.numel();
          FL_ENFORCE(n < 0 || f[0] < 0 || n == f[0], "conv2d_fusion: ", ctx.Describe("Bias"), " must hold M = ", f[0],
                     " values (the output channels of ", ctx.Describe("Filter"), ")");
        }
        if (ctx.HasInput("ResidualData")) {
          ctx.EnforceSameDType("Input", "ResidualData");
          const DDim r = ctx.InputDim("ResidualData");
          const int64_t m = ctx.InputDim("Filter")[0];
          FL_ENFORCE(r.size() == 4 && (r[1] < 0 || m < 0 || r[1] == m), "conv2d_fusion: ", ctx.Describe("ResidualData"),
                     " must have the Output's shape [N, M, Ho, Wo] with M = ", m);
        }
      })
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { ConvFusionKernel<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_OP(depthwise_conv2d, op) { RegisterConv(op, "depthwise_conv2d"); }
FL_REGISTER_OP(conv2d_transpose, op) { RegisterConvTranspose(op, "conv2d_transpose"); }
FL_REGISTER_OP(depthwise_conv2d_transpose, op) { RegisterConvTranspose(op, "depthwise_conv2d_transpose"); }

}  // namespace fl
