// unfold (im2col, Fluid's layout): X [N, C, H, W] -> Y [N, C*kh*kw, L], L = out_h * out_w, with
//   Y[n, (c*kh + ki)*kw + kj, oh*out_w + ow] = X[n, c, oh*sh - pad_top + ki*dh, ow*sw - pad_left + kj*dw]
// (0 in the padding); out_h = (H + pad_top + pad_bottom - (dh*(kh-1) + 1)) / sh + 1 (likewise out_w).
// paddings are [top, left, bottom, right]. X@GRAD adds every Y@GRAD entry back to the pixel it came from.
#include <algorithm>
#include <vector>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

struct UnfoldGeom {
  int64_t c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
};

template <typename Ctx>
UnfoldGeom MakeGeom(const Ctx& ctx, const DDim& x) {
  const auto& k = ctx.template Attr<std::vector<int32_t>>("kernel_sizes");
  const auto& s = ctx.template Attr<std::vector<int32_t>>("strides");
  const auto& p = ctx.template Attr<std::vector<int32_t>>("paddings");
  const auto& d = ctx.template Attr<std::vector<int32_t>>("dilations");
  UnfoldGeom g{x[1], x[2], x[3], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], -1, -1};
  if (x[2] >= 0) g.oh = (x[2] + p[0] + p[2] - (d[0] * (k[0] - 1) + 1)) / s[0] + 1;
  if (x[3] >= 0) g.ow = (x[3] + p[1] + p[3] - (d[1] * (k[1] - 1) + 1)) / s[1] + 1;
  return g;
}

// f(column row index, x offset or -1) over the whole [C*kh*kw, L] column matrix of one image.
template <typename F>
void Walk(const UnfoldGeom& g, int64_t row_begin, int64_t row_end, F f) {
  const int64_t l = g.oh * g.ow;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t c = row / (g.kh * g.kw), ki = row / g.kw % g.kh, kj = row % g.kw;
    for (int64_t o = 0; o < l; ++o) {
      const int64_t y = o / g.ow * g.sh - g.pt + ki * g.dh, x = o % g.ow * g.sw - g.pl + kj * g.dw;
      f(row * l + o, (y >= 0 && y < g.h && x >= 0 && x < g.w) ? (c * g.h + y) * g.w + x : -1);
    }
  }
}

}  // namespace

FL_REGISTER_OP(unfold, op) {
  op.Doc("im2col: X [N, C, H, W] -> Y [N, C*kh*kw, out_h*out_w], each column one sliding block of X.")
      .Input("X", "images [N, C, H, W]")
      .Output("Y", "columns [N, C*kh*kw, L]")
      .RequiredAttr("kernel_sizes", std::vector<int32_t>{}, "[kh, kw]")
      .Min(1)
      .Size(2)
      .Attr("strides", std::vector<int32_t>{1, 1}, "[sh, sw]")
      .Min(1)
      .Size(2)
      .Attr("paddings", std::vector<int32_t>{0, 0, 0, 0}, "[top, left, bottom, right]")
      .Min(0)
      .Size(4)
      .Attr("dilations", std::vector<int32_t>{1, 1}, "[dh, dw]")
      .Min(1)
      .Size(2)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 4, "unfold: ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
        const UnfoldGeom g = MakeGeom(ctx, x);
        FL_ENFORCE((x[2] < 0 || g.oh >= 1) && (x[3] < 0 || g.ow >= 1), "unfold: the ", g.kh, "x", g.kw,
                   " kernel (dilations ", g.dh, ", ", g.dw, ") does not fit ", ctx.Describe("X"),
                   " with its paddings: the output would be ", g.oh, "x", g.ow);
        ctx.SetOutput("Y", DDim{x[0], x[1] < 0 ? -1 : x[1] * g.kh * g.kw, g.oh < 0 || g.ow < 0 ? -1 : g.oh * g.ow},
                      ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const UnfoldGeom g = MakeGeom(ctx, xt.dims());
        const int64_t rows = g.c * g.kh * g.kw, l = g.oh * g.ow, image = g.c * g.h * g.w;
        const T* x = xt.data<T>();
        T* y = ctx.Alloc<T>("Y");
        ParallelFor(xt.dims()[0], 1, [&](int64_t b, int64_t e) {
          for (int64_t n = b; n < e; ++n) {
            const T* src = x + n * image;
            T* dst = y + n * rows * l;
            Walk(g, 0, rows, [&](int64_t i, int64_t from) { dst[i] = from < 0 ? T(0) : src[from]; });
          }
        });
      });
  op.GradOp({"X", "Y@GRAD"})
      .Doc("X@GRAD: each Y@GRAD entry added back to the pixel it was taken from.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const Tensor& dy = ctx.Input("Y@GRAD");
        const UnfoldGeom g = MakeGeom(ctx, xt.dims());
        const int64_t rows = g.c * g.kh * g.kw, l = g.oh * g.ow, image = g.c * g.h * g.w;
        FL_ENFORCE(dy.numel() == xt.dims()[0] * rows * l, "unfold_grad: Y@GRAD ", dy.dims(),
                   " does not match the columns of X ", xt.dims());
        dxt->Resize(xt.dims());
        T* dx = dxt->mutable_data<T>(ctx.place());
        const T* go = dy.data<T>();
        ParallelFor(xt.dims()[0], 1, [&](int64_t b, int64_t e) {
          for (int64_t n = b; n < e; ++n) {
            T* dst = dx + n * image;
            const T* src = go + n * rows * l;
            std::fill(dst, dst + image, T(0));
            Walk(g, 0, rows, [&](int64_t i, int64_t to) {
              if (to >= 0) dst[to] += src[i];
            });
          }
        });
      });
}

}  // namespace fl
