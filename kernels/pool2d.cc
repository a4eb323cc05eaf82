// pool2d: max or average pooling over the H, W dims of an NCHW tensor, and its grad (Fluid 1.x).
//
// Windows follow Fluid's CPU functor: window (oh, ow) covers rows [oh*sh - ph, oh*sh - ph + kh) clipped
// to [0, H) (columns likewise); avg divides by the clipped window size when `exclusive`, else by kh*kw
// (even where ceil_mode lets a window run past the padded input). A window that is empty after clipping
// (only possible with ceil_mode or padding >= kernel) gives 0 and no gradient.
//
// Each output row is computed in two vectorisable steps: the window's input rows are reduced into one
// padded row buffer (contiguous), then the columns are reduced with a fixed stride (no bounds checks:
// the buffer's padding holds the reduction's identity). Max-pool's grad routes each output gradient to
// the first input equal to the output in window (row-major) order, like Fluid, by rescanning the
// window; recording the argmax in the forward would need an extra output and measured no faster here.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "helpers/pool_geom.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

using pool::PoolGeom;
using pool::ResolvePool;

void InferPool(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const PoolGeom g = ResolvePool(ctx, x, ctx.Describe("X"));
  ctx.SetOutput("Out", DDim{x[0], x[1], g.OH, g.OW}, ctx.InputDType("X"));
}

// Per-plane index tables: clipped row ranges, and the padded column buffer layout.
template <typename T>
struct PoolPlan {
  std::vector<int64_t> hs, he;      // clipped row range of window row oh
  std::vector<T> inv_w;             // avg: 1 / (column divisor) per ow (0 for an empty window)
  std::vector<T> inv_h;             // avg: 1 / (row divisor) per oh
  std::vector<int64_t> empty_cols;  // ow whose column range is empty after clipping
  int64_t buf_w = 0;                // padded row length: column j of the buffer is input column j - pw

  explicit PoolPlan(const PoolGeom& g) : hs(g.OH), he(g.OH), inv_w(g.OW), inv_h(g.OH) {
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t s = oh * g.sh - g.ph;
      hs[oh] = std::max<int64_t>(s, 0);
      he[oh] = std::min<int64_t>(s + g.kh, g.H);
      const int64_t n = g.exclusive ? he[oh] - hs[oh] : g.kh;
      inv_h[oh] = he[oh] > hs[oh] ? T(1) / T(n) : T(0);
    }
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t s = ow * g.sw - g.pw;
      const int64_t ws = std::max<int64_t>(s, 0), we = std::min<int64_t>(s + g.kw, g.W);
      const int64_t n = g.exclusive ? we - ws : g.kw;
      inv_w[ow] = we > ws ? T(1) / T(n) : T(0);
      if (we <= ws) empty_cols.push_back(ow);
    }
    buf_w = std::max<int64_t>((g.OW - 1) * g.sw + g.kw, g.pw + g.W);
  }
};

template <typename T>
void PoolForward(const PoolGeom& g, const T* x, T* out, int64_t planes) {
  const PoolPlan<T> plan(g);
  const T ident = g.is_max ? -std::numeric_limits<T>::infinity() : T(0);
  std::vector<T> buf(plan.buf_w, ident);
  T* b = buf.data();
  T* bw = b + g.pw;  // input column w lives at bw[w]
  const int64_t H = g.H, W = g.W, OW = g.OW, sw = g.sw, kw = g.kw;
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* op = out + p * g.OH * OW;
    for (int64_t oh = 0; oh < g.OH; ++oh, op += OW) {
      const int64_t hs = plan.hs[oh], he = plan.he[oh];
      if (he <= hs) {
        std::fill(op, op + OW, T(0));
        continue;
      }
      std::copy(xp + hs * W, xp + (hs + 1) * W, bw);
      for (int64_t h = hs + 1; h < he; ++h) {
        const T* xr = xp + h * W;
        if (g.is_max) {
          for (int64_t w = 0; w < W; ++w) bw[w] = std::max(bw[w], xr[w]);
        } else {
          for (int64_t w = 0; w < W; ++w) bw[w] += xr[w];
        }
      }
      for (int64_t ow = 0; ow < OW; ++ow) op[ow] = b[ow * sw];
      for (int64_t k = 1; k < kw; ++k) {
        const T* bk = b + k;
        if (g.is_max) {
          for (int64_t ow = 0; ow < OW; ++ow) op[ow] = std::max(op[ow], bk[ow * sw]);
        } else {
          for (int64_t ow = 0; ow < OW; ++ow) op[ow] += bk[ow * sw];
        }
      }
      if (!g.is_max) {
        const T ih = plan.inv_h[oh];
        const T* iw = plan.inv_w.data();
        for (int64_t ow = 0; ow < OW; ++ow) op[ow] *= ih * iw[ow];
      }
      for (int64_t ow : plan.empty_cols) op[ow] = T(0);
    }
  }
}

// f(first plane, number of planes) over slices of the N*C planes, split across the thread pool when
// each part gets at least kMinParallelElements input elements.
template <typename F>
void ForPlanes(const PoolGeom& g, int64_t planes, F f) {
  ParallelFor(planes, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, g.H * g.W)),
              [&](int64_t b, int64_t e) { f(b, e - b); });
}

template <typename T>
void PoolBackward(const PoolGeom& g, const T* x, const T* out, const T* dout, T* dx, int64_t planes) {
  const PoolPlan<T> plan(g);
  const int64_t H = g.H, W = g.W, OW = g.OW, sw = g.sw, kw = g.kw;
  std::fill(dx, dx + planes * H * W, T(0));
  std::vector<T> dbuf(plan.buf_w, T(0)), xbuf(plan.buf_w, -std::numeric_limits<T>::infinity()), gs(OW);
  std::vector<int32_t> sel_j(OW), sel_h(OW);
  const bool direct = g.pw == 0 && (OW - 1) * sw + kw <= W;
  T* db = dbuf.data();
  T* xb = xbuf.data();
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* dxp = dx + p * H * W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t hs = plan.hs[oh], he = plan.he[oh];
      if (he <= hs) continue;
      const T* g_row = dout + (p * g.OH + oh) * OW;
      if (g.is_max) {
        // Branch-free first-match search across the row: sel_h / sel_j record the window element (input
        // row, buffer column) of the first input equal to the output; then one scatter per output.
        const T* o_row = out + (p * g.OH + oh) * OW;
        std::fill(sel_j.begin(), sel_j.end(), int32_t(-1));
        int32_t* sj = sel_j.data();
        int32_t* sh = sel_h.data();
        for (int64_t h = hs; h < he; ++h) {
          const T* row = xp + h * W;  // read in place when no window column falls outside the input
          if (!direct) std::copy(row, row + W, xb + g.pw);
          const T* base = direct ? row : xb;
          const int32_t hh = static_cast<int32_t>(h);
          for (int64_t k = 0; k < kw; ++k) {
            const T* xk = base + k;
            for (int64_t ow = 0; ow < OW; ++ow) {
              const bool hit = (sj[ow] < 0) & (xk[ow * sw] == o_row[ow]);
              sj[ow] = hit ? static_cast<int32_t>(ow * sw + k) : sj[ow];
              sh[ow] = hit ? hh : sh[ow];
            }
          }
        }
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t col = sj[ow] - g.pw;  // a padding column only matches an all -inf window
          if (sj[ow] >= 0 && col >= 0 && col < W) dxp[sh[ow] * W + col] += g_row[ow];
        }
      } else {
        const T ih = plan.inv_h[oh];
        for (int64_t ow = 0; ow < OW; ++ow) gs[ow] = g_row[ow] * ih * plan.inv_w[ow];
        std::fill(db, db + plan.buf_w, T(0));
        for (int64_t k = 0; k < kw; ++k) {
          T* dk = db + k;
          for (int64_t ow = 0; ow < OW; ++ow) dk[ow * sw] += gs[ow];
        }
        for (int64_t h = hs; h < he; ++h) {
          T* dr = dxp + h * W;
          for (int64_t w = 0; w < W; ++w) dr[w] += db[g.pw + w];
        }
      }
    }
  }
}

}  // namespace

FL_REGISTER_OP(pool2d, op) {
  op.Doc("Out = max or average of X over sliding kh x kw windows of H, W (NCHW).")
      .Input("X", "input tensor [N, C, H, W]")
      .Output("Out", "pooled tensor [N, C, OH, OW]")
      .Attr("pooling_type", "max", "'max' or 'avg'")
      .OneOf({"max", "avg"})
      .Attr<std::vector<int32_t>>("ksize", {}, "window size [kh, kw] (ignored with global_pooling)")
      .Size(0, 2)
      .Attr<bool>("global_pooling", false, "pool over the whole H, W (ksize = [H, W], paddings = 0)")
      .Attr<std::vector<int32_t>>("strides", {1, 1}, "window strides [sh, sw]")
      .Min(1)
      .Size(2)
      .Attr<std::vector<int32_t>>("paddings", {0, 0}, "zero padding [ph, pw] on both sides")
      .Min(0)
      .Size(2)
      .Attr<bool>("exclusive", true, "avg: divide by the window size without padding (else kh*kw)")
      .Attr<bool>("ceil_mode", false, "output size rounds up: (H - kh + 2ph + sh - 1) / sh + 1")
      .Attr<bool>("use_cudnn", false, "accepted for compatibility (no effect on CPU)")
      .Attr<bool>("use_mkldnn", false, "accepted for compatibility (no effect)")
      .Attr("data_format", "NCHW", "layout of X: NCHW (AnyLayout is taken as NCHW)")
      .OneOf({"NCHW", "AnyLayout"})
      .SetInferShape(InferPool)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const PoolGeom g = ResolvePool(ctx, x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{x.dims()[0], x.dims()[1], g.OH, g.OW});
        const T* xd = x.data<T>();
        T* od = out->mutable_data<T>(ctx.place());
        ForPlanes(g, x.dims()[0] * x.dims()[1],
                  [&](int64_t p0, int64_t n) { PoolForward<T>(g, xd + p0 * g.H * g.W, od + p0 * g.OH * g.OW, n); });
      });
  op.GradOp({"X", "Out", "Out@GRAD"}).CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    Tensor* dx = ctx.OutputOrNull("X@GRAD");
    if (!dx) return;
    const Tensor& x = ctx.Input("X");
    const Tensor& out = ctx.Input("Out");
    const Tensor& dout = ctx.Input("Out@GRAD");
    const PoolGeom g = ResolvePool(ctx, x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
    const DDim odims{x.dims()[0], x.dims()[1], g.OH, g.OW};
    FL_ENFORCE(dout.dims() == odims && out.dims() == odims, "pool2d_grad: Out ", out.dims(), " and Out@GRAD '",
               ctx.InputName("Out@GRAD"), "' ", dout.dims(), " must be ", odims, " for X ", x.dims());
    dx->Resize(x.dims());
    const T *xd = x.data<T>(), *od = out.data<T>(), *gd = dout.data<T>();
    T* dxd = dx->mutable_data<T>(ctx.place());
    ForPlanes(g, x.dims()[0] * x.dims()[1], [&](int64_t p0, int64_t n) {
      const int64_t in = p0 * g.H * g.W, o = p0 * g.OH * g.OW;
      PoolBackward<T>(g, xd + in, od + o, gd + o, dxd + in, n);
    });
  });
}

}  // namespace fl
