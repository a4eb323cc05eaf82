// im2sequence: each image of X [N, C, H, W] becomes one sequence of its kernel patches, in row-major order of the
// output positions: Out row (i, j) of image n is X[n, c, i*sh - up + ki, j*sw - left + kj] over (c, ki, kj) (0 in
// the padding), so Out is [sum of out_h*out_w, C*kh*kw] with LoD {0, out_h*out_w, ...}. The output size is Fluid's
// floor((H + up + down - kh) / sh) + 1 (likewise for W); paddings are [up, left, down, right].
//
// Y (optional, [N, 2]) holds each image's real (height, width) before a CNN that shrank it by out_stride: image n
// then yields the top-left out_h_n x out_w_n patches, out_h_n computed from ceil(Y[n, 0] / out_stride[0]) (patches
// past the feature map read 0). As in Fluid, Y is used only when the batch holds more than one image.
#include <algorithm>
#include <vector>

#include "helpers/lod.h"

namespace fl {

namespace {

// a * b; an error when it overflows (paddings or kernels near the int32 limit make patch counts past int64).
int64_t Product(int64_t a, int64_t b) {
  int64_t p;
  FL_ENFORCE(!__builtin_mul_overflow(a, b, &p), "im2sequence: the output size ", a, " x ", b, " overflows int64");
  return p;
}

struct Im2SeqGeom {
  int64_t c, h, w, kh, kw, sh, sw, up, left, down, right;
  int64_t OutH(int64_t height) const { return (height + up + down - kh) / sh + 1; }
  int64_t OutW(int64_t width) const { return (width + left + right - kw) / sw + 1; }
  int64_t RowSize() const { return Product(Product(c, kh), kw); }
};

template <typename Ctx>
Im2SeqGeom MakeGeom(const Ctx& ctx, const DDim& x) {
  const auto& k = ctx.template Attr<std::vector<int32_t>>("kernels");
  const auto& s = ctx.template Attr<std::vector<int32_t>>("strides");
  const auto& p = ctx.template Attr<std::vector<int32_t>>("paddings");
  return {x[1], x[2], x[3], k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3]};
}

// Whether Y decides the output sizes: given, and more than one image (Fluid's rule).
bool UsesRealSizes(const ExecutionContext& ctx) { return ctx.HasInput("Y") && ctx.Input("X").dims()[0] > 1; }

// Rows of each image's sequence: the LoD offsets of Out (one level, one sequence per image).
std::vector<size_t> SequenceRows(const ExecutionContext& ctx, const Im2SeqGeom& g, std::vector<int64_t>* out_w) {
  const int64_t n = ctx.Input("X").dims()[0];
  std::vector<size_t> offsets{0};
  out_w->assign(n, g.OutW(g.w));
  if (!UsesRealSizes(ctx)) {
    const int64_t per_image = Product(g.OutH(g.h), g.OutW(g.w));
    Product(per_image, std::max<int64_t>(n, 1));  // the batch's row count fits int64 too
    for (int64_t i = 0; i < n; ++i) offsets.push_back(offsets.back() + per_image);
    return offsets;
  }
  const Tensor& y = ctx.Input("Y");
  FL_ENFORCE(y.dims() == DDim({n, 2}), ctx.Type(), ": Y '", ctx.InputName("Y"), "' ", y.dims(),
             " must hold one (height, width) per image of X '", ctx.InputName("X"), "' ", ctx.Input("X").dims(), ": [",
             n, ", 2]");
  const auto& out_stride = ctx.Attr<std::vector<int32_t>>("out_stride");
  VisitDType(y.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* sizes = y.data<S>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t real[2];
      for (int d = 0; d < 2; ++d) {
        const double real_size = static_cast<double>(sizes[2 * i + d]);
        FL_ENFORCE(real_size >= 0 && real_size < 2147483648.0, ctx.Type(), ": Y '", ctx.InputName("Y"),
                   "' gives image ", i, " the size ", real_size, " (must be in [0, 2^31))");
        const int64_t v = static_cast<int64_t>(real_size);
        real[d] = (v + out_stride[d] - 1) / out_stride[d];
      }
      const int64_t oh = g.OutH(real[0]), ow = g.OutW(real[1]);
      FL_ENFORCE(real[0] + g.up + g.down >= g.kh && real[1] + g.left + g.right >= g.kw, ctx.Type(), ": the ", g.kh, "x",
                 g.kw, " kernel does not fit image ", i, " of real size ", real[0], "x", real[1], " (Y '",
                 ctx.InputName("Y"), "' divided by out_stride) with its paddings");
      (*out_w)[i] = ow;
      int64_t end;
      FL_ENFORCE(!__builtin_add_overflow(static_cast<int64_t>(offsets.back()), Product(oh, ow), &end), ctx.Type(),
                 ": the output rows overflow int64");
      offsets.push_back(end);
    }
  });
  return offsets;
}

// Patch (i, j) of `image` [C, H, W]: kToRows writes it into `row` (zeros in the padding); otherwise the row is added
// back into the image (the adjoint). Each (c, ki) moves a run of kw values.
template <bool kToRows, typename T>
void PatchRow(const Im2SeqGeom& g, int64_t i, int64_t j, T* image, T* row) {
  const int64_t x0 = j * g.sw - g.left;
  const int64_t lo = std::clamp<int64_t>(-x0, 0, g.kw), hi = std::clamp<int64_t>(g.w - x0, lo, g.kw);
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      T* dst = row + (c * g.kh + ki) * g.kw;
      const int64_t y = i * g.sh - g.up + ki;
      if (y < 0 || y >= g.h) {
        if (kToRows) std::fill(dst, dst + g.kw, T(0));
        continue;
      }
      T* src = image + (c * g.h + y) * g.w;  // the image row; tap kj reads column x0 + kj
      if (kToRows) {
        std::fill(dst, dst + lo, T(0));
        for (int64_t kj = lo; kj < hi; ++kj) dst[kj] = src[x0 + kj];
        std::fill(dst + hi, dst + g.kw, T(0));
      } else {
        for (int64_t kj = lo; kj < hi; ++kj) src[x0 + kj] += dst[kj];
      }
    }
  }
}

// Patches (i, j0 .. j1) with the positions inside, tap by tap: each (c, ki, kj) is a loop over the positions that
// reads (or adds into) one image row with stride sw and writes one column of `band` (the patches of row i, RowSize()
// apart). For narrow kernels, where PatchRow's runs are a value or two and its loop overhead dominates.
template <bool kToRows, typename T>
void PatchColumns(const Im2SeqGeom& g, int64_t i, int64_t j0, int64_t j1, T* image, T* band) {
  const int64_t k = g.RowSize();
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t y = i * g.sh - g.up + ki;
      const bool inside = y >= 0 && y < g.h;
      T* row = inside ? image + (c * g.h + y) * g.w : image;  // read only when inside
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        T* col = band + (c * g.kh + ki) * g.kw + kj;
        // Positions j whose tap x = j*sw - left + kj lies inside the row: [jlo, jhi), within [j0, j1).
        const int64_t off = kj - g.left;
        int64_t jlo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
        int64_t jhi = g.w - off <= 0 ? 0 : (g.w - off - 1) / g.sw + 1;
        if (!inside) jlo = jhi = 0;
        jlo = std::clamp(jlo, j0, j1);
        jhi = std::clamp(jhi, jlo, j1);
        if (kToRows) {
          for (int64_t j = j0; j < jlo; ++j) col[j * k] = T(0);
          for (int64_t j = jlo; j < jhi; ++j) col[j * k] = row[j * g.sw + off];
          for (int64_t j = jhi; j < j1; ++j) col[j * k] = T(0);
        } else {
          for (int64_t j = jlo; j < jhi; ++j) row[j * g.sw + off] += col[j * k];
        }
      }
    }
  }
}

// All patches of output row i of `image` into (or out of) `band`. Measured on 1 thread (fastest of 40 runs, forward /
// gradient): an 8x1 kernel on [32, 64, 8, 32] 0.79 / 0.69 ms patch by patch, 0.29 / 0.39 tap by tap; a 3x3 on
// [8, 16, 32, 32] 0.89 / 0.92 patch by patch against 1.13 / 1.09, 4x4 likewise: tap by tap pays for kw < 3. The taps go
// 16 positions at a time: a column pass then writes 16 band rows (RowSize() apart, often a power of two: more at
// once would evict each other from their L1 sets) and reads a 64-byte run of each image row.
template <bool kToRows, typename T>
void PatchBand(const Im2SeqGeom& g, int64_t i, int64_t out_w, T* image, T* band) {
  if (g.kw >= 3) {
    const int64_t k = g.RowSize();
    for (int64_t j = 0; j < out_w; ++j) PatchRow<kToRows>(g, i, j, image, band + j * k);
    return;
  }
  constexpr int64_t kTile = 16;
  for (int64_t j0 = 0; j0 < out_w; j0 += kTile)
    PatchColumns<kToRows>(g, i, j0, std::min(out_w, j0 + kTile), image, band);
}

}  // namespace

FL_REGISTER_OP(im2sequence, op) {
  op.Doc(
        "Each image of X [N, C, H, W] -> one sequence of its out_h*out_w kernel patches: Out [rows, C*kh*kw], LoD "
        "one sequence per image; Y [N, 2] (optional) gives real image sizes, scaled down by out_stride.")
      .Input("X", "images [N, C, H, W]")
      .DispensableInput("Y", "real (height, width) of each image [N, 2], float or int (used when N > 1)")
      .Output("Out", "the patches [rows, C*kh*kw], a LoDTensor with one sequence per image")
      .NonDifferentiable({"Y"})
      .RequiredAttr("kernels", std::vector<int32_t>{}, "[kernel_height, kernel_width]")
      .Min(1)
      .Size(2)
      .Attr("strides", std::vector<int32_t>{1, 1}, "[stride_height, stride_width]")
      .Min(1)
      .Size(2)
      .Attr("paddings", std::vector<int32_t>{0, 0, 0, 0}, "[up, left, down, right]")
      .Min(0)
      .Size(4)
      .Attr("out_stride", std::vector<int32_t>{1, 1}, "how much the CNN before shrank the images Y sizes (with Y)")
      .Min(1)
      .Size(2)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 4, ctx.Type(), ": ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
        const Im2SeqGeom g = MakeGeom(ctx, x);
        FL_ENFORCE((x[2] < 0 || g.OutH(g.h) >= 1) && (x[3] < 0 || g.OutW(g.w) >= 1) &&
                       (x[2] < 0 || x[2] + g.up + g.down >= g.kh) && (x[3] < 0 || x[3] + g.left + g.right >= g.kw),
                   ctx.Type(), ": the ", g.kh, "x", g.kw, " kernel does not fit ", ctx.Describe("X"),
                   " with its paddings");
        const bool real_sizes = ctx.HasInput("Y") && (x[0] != 1);
        if (ctx.HasInput("Y")) {
          const DDim y = ctx.InputDim("Y");
          const DType dt = ctx.InputDType("Y");
          FL_ENFORCE(y.size() == 2 && (y[1] == 2 || y[1] < 0), ctx.Type(), ": ", ctx.Describe("Y"),
                     " must be [N, 2]: one (height, width) per image");
          FL_ENFORCE(dt == DType::FP32 || dt == DType::FP64 || dt == DType::INT32 || dt == DType::INT64 ||
                         dt == DType::UNDEFINED,
                     ctx.Type(), ": ", ctx.Describe("Y"), " must be float32, float64, int32 or int64, got ",
                     DTypeName(dt));
        }
        const int64_t width = x[1] < 0 ? -1 : g.RowSize();
        if (real_sizes) {  // rows depend on Y's values: the kernel sets them
          if (!ctx.IsRuntime()) ctx.SetOutput("Out", DDim{-1, width}, ctx.InputDType("X"));
          return;
        }
        const bool known = x[0] >= 0 && x[2] >= 0 && x[3] >= 0;
        ctx.SetOutput("Out", DDim{known ? Product(x[0], Product(g.OutH(g.h), g.OutW(g.w))) : -1, width},
                      ctx.InputDType("X"));
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const Im2SeqGeom g = MakeGeom(ctx, xt.dims());
        std::vector<int64_t> out_w;
        const std::vector<size_t> offsets = SequenceRows(ctx, g, &out_w);
        const int64_t rows = offsets.back(), k = g.RowSize(), image = g.c * g.h * g.w;
        Tensor* outt = ctx.Output("Out");
        outt->Resize(DDim{rows, k});
        T* out = outt->mutable_data<T>(ctx.place());
        const T* x = xt.data<T>();
        // The bands (output rows i of each image) of all images in one range, so one large image splits too.
        std::vector<int64_t> bands{0};
        for (size_t n = 0; n + 1 < offsets.size(); ++n)
          bands.push_back(bands.back() + (offsets[n + 1] - offsets[n]) / out_w[n]);
        ParallelFor(bands.back(), std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, k * g.OutW(g.w))),
                    [&](int64_t b, int64_t e) {
                      int64_t n = std::upper_bound(bands.begin(), bands.end(), b) - bands.begin() - 1;
                      for (int64_t band = b; band < e; ++band) {
                        while (bands[n + 1] <= band) ++n;
                        const int64_t i = band - bands[n];
                        PatchBand<true>(g, i, out_w[n], const_cast<T*>(x + n * image),
                                        out + (offsets[n] + i * out_w[n]) * k);
                      }
                    });
        outt->set_lod({offsets});
      });
  // Fluid's grad op reads X and Out@GRAD only (so with Y it scatters as if Y were absent); this one reads Y too.
  op.GradOp({"X", "Y", "Out@GRAD"})
      .Optional({"Y"})
      .Doc("X@GRAD: each Out@GRAD patch entry added back to the pixel it was taken from.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        const Im2SeqGeom g = MakeGeom(ctx, xt.dims());
        std::vector<int64_t> out_w;
        const std::vector<size_t> offsets = SequenceRows(ctx, g, &out_w);
        const int64_t k = g.RowSize(), image = g.c * g.h * g.w;
        FL_ENFORCE(dout.dims() == DDim({static_cast<int64_t>(offsets.back()), k}), ctx.Type(), ": Out@GRAD '",
                   ctx.InputName("Out@GRAD"), "' ", dout.dims(), " must be [", offsets.back(), ", ", k,
                   "], the patches of X '", ctx.InputName("X"), "' ", xt.dims());
        dxt->Resize(xt.dims());
        T* dx = dxt->mutable_data<T>(ctx.place());
        const T* go = dout.data<T>();
        // Patches overlap within an image, so the images (disjoint in X@GRAD) are what runs in parallel.
        ParallelFor(xt.dims()[0], 1, [&](int64_t b, int64_t e) {
          for (int64_t n = b; n < e; ++n) {
            T* dst = dx + n * image;
            std::fill(dst, dst + image, T(0));
            const int64_t oh = (offsets[n + 1] - offsets[n]) / out_w[n];
            for (int64_t i = 0; i < oh; ++i)
              PatchBand<false>(g, i, out_w[n], dst, const_cast<T*>(go + (offsets[n] + i * out_w[n]) * k));
          }
        });
      });
}

}  // namespace fl
