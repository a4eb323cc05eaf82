// pool2d and pool2d_grad on the GPU, with the CPU kernel's windows (kernels/pool2d.cc, geometry from
// kernels/helpers/pool_geom.h): window (oh, ow) covers rows [oh*sh - ph, oh*sh - ph + kh) clipped to [0, H) (columns
// likewise); avg divides by the clipped size per axis when exclusive, else by kh and kw; an empty window gives 0 and
// no gradient. Max-pool's gradient goes to the first input equal to the output in row-major window order: one pass
// records that position per output, a second gathers, for each input, the gradients of the outputs that chose it
// (deterministic, no atomics). Avg's gradient is gathered the same way.
#include "../helpers/pool_geom.h"
#include "nn_common.cuh"

namespace fl {
namespace {

struct Win {
  int H, W, OH, OW, kh, kw, sh, sw, ph, pw;
  bool is_max, exclusive;
};

Win ToWin(const pool::PoolGeom& g) {
  return {int(g.H),  int(g.W),  int(g.OH), int(g.OW), int(g.kh), int(g.kw),
          int(g.sh), int(g.sw), int(g.ph), int(g.pw), g.is_max,  g.exclusive};
}

// The clipped range [lo, hi) of window o along an axis, and avg's 1 / divisor (0 for an empty window).
template <typename T>
__device__ inline T Range(int o, int stride, int pad, int k, int size, bool exclusive, int* lo, int* hi) {
  const int s = o * stride - pad;
  *lo = max(s, 0);
  *hi = min(s + k, size);
  return *hi > *lo ? T(1) / T(exclusive ? *hi - *lo : k) : T(0);
}

template <typename T>
__global__ void PoolForward(int64_t total, const T* x, Win g, T* out) {
  FL_CUDA_LOOP(i, total) {
    const int ow = int(i % g.OW), oh = int((i / g.OW) % g.OH);
    const T* xp = x + (i / (int64_t(g.OW) * g.OH)) * int64_t(g.H) * g.W;
    int hs, he, ws, we;
    const T ih = Range<T>(oh, g.sh, g.ph, g.kh, g.H, g.exclusive, &hs, &he);
    const T iw = Range<T>(ow, g.sw, g.pw, g.kw, g.W, g.exclusive, &ws, &we);
    T r = T(0);
    if (he > hs && we > ws) {
      if (g.is_max) {
        r = xp[int64_t(hs) * g.W + ws];
        for (int h = hs; h < he; ++h)
          for (int w = ws; w < we; ++w) r = max(r, xp[int64_t(h) * g.W + w]);
      } else {  // column sums over the rows, then over the columns (the CPU kernel's order)
        for (int w = ws; w < we; ++w) {
          T c = xp[int64_t(hs) * g.W + w];
          for (int h = hs + 1; h < he; ++h) c += xp[int64_t(h) * g.W + w];
          r = w == ws ? c : r + c;
        }
        r *= ih * iw;
      }
    }
    out[i] = r;
  }
}

// Max: the plane offset h * W + w of the first input in the window equal to the output, or -1.
template <typename T>
__global__ void MaxArg(int64_t total, const T* x, const T* out, Win g, int* arg) {
  FL_CUDA_LOOP(i, total) {
    const int ow = int(i % g.OW), oh = int((i / g.OW) % g.OH);
    const T* xp = x + (i / (int64_t(g.OW) * g.OH)) * int64_t(g.H) * g.W;
    int hs, he, ws, we;
    Range<T>(oh, g.sh, g.ph, g.kh, g.H, true, &hs, &he);
    Range<T>(ow, g.sw, g.pw, g.kw, g.W, true, &ws, &we);
    const T o = out[i];
    int a = -1;
    for (int h = hs; h < he && a < 0; ++h)
      for (int w = ws; w < we; ++w)
        if (xp[int64_t(h) * g.W + w] == o) {
          a = h * g.W + w;
          break;
        }
    arg[i] = a;
  }
}

// Windows o with o * stride - pad <= v < o * stride - pad + k, o in [0, count): [lo, hi).
__device__ inline void Covering(int v, int stride, int pad, int k, int count, int* lo, int* hi) {
  const int top = v + pad;  // o * stride <= top and o * stride > top - k
  *hi = min(top / stride + 1, count);
  const int d = top - k + 1;
  *lo = d <= 0 ? 0 : (d + stride - 1) / stride;
}

template <typename T>
__global__ void PoolBackward(int64_t total, const T* dout, const int* arg, Win g, T* dx) {
  FL_CUDA_LOOP(i, total) {
    const int w = int(i % g.W), h = int((i / g.W) % g.H);
    const int64_t plane = i / (int64_t(g.W) * g.H), o0 = plane * g.OH * g.OW;
    int oh0, oh1, ow0, ow1;
    Covering(h, g.sh, g.ph, g.kh, g.OH, &oh0, &oh1);
    Covering(w, g.sw, g.pw, g.kw, g.OW, &ow0, &ow1);
    const int me = h * g.W + w;
    T s = T(0);
    for (int oh = oh0; oh < oh1; ++oh) {
      int hs, he;
      const T ih = Range<T>(oh, g.sh, g.ph, g.kh, g.H, g.exclusive, &hs, &he);
      for (int ow = ow0; ow < ow1; ++ow) {
        const int64_t o = o0 + int64_t(oh) * g.OW + ow;
        if (g.is_max) {
          if (arg[o] == me) s += dout[o];
        } else {
          int ws, we;
          const T iw = Range<T>(ow, g.sw, g.pw, g.kw, g.W, g.exclusive, &ws, &we);
          s += dout[o] * ih * iw;
        }
      }
    }
    dx[i] = s;
  }
}

const auto kPool = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const pool::PoolGeom g = pool::ResolvePool(ctx, x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{x.dims()[0], x.dims()[1], g.OH, g.OW});
  T* o = out->mutable_data<T>(ctx.place());
  cuda::Launch(ctx, out->numel(), PoolForward<T>, x.data<T>(), ToWin(g), o);
};

const auto kPoolGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& out = ctx.Input("Out");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const pool::PoolGeom g = pool::ResolvePool(ctx, x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
  const DDim odims{x.dims()[0], x.dims()[1], g.OH, g.OW};
  FL_ENFORCE(dout.dims() == odims && out.dims() == odims, "pool2d_grad: Out ", out.dims(), " and Out@GRAD '",
             ctx.InputName("Out@GRAD"), "' ", dout.dims(), " must be ", odims, " for X ", x.dims());
  dx->Resize(x.dims());
  T* d = dx->mutable_data<T>(ctx.place());
  const Win w = ToWin(g);
  std::shared_ptr<Allocation> arg_buf;
  int* arg = nullptr;
  if (g.is_max && out.numel() > 0) {
    arg_buf = cuda::Scratch(ctx.place(), size_t(out.numel()) * sizeof(int));
    arg = static_cast<int*>(arg_buf->ptr());
    cuda::Launch(ctx, out.numel(), MaxArg<T>, x.data<T>(), out.data<T>(), w, arg);
  }
  cuda::Launch(ctx, x.numel(), PoolBackward<T>, dout.data<T>(), static_cast<const int*>(arg), w, d);
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(pool2d) { ops.Kernel<float, double>(kPool); }
FL_REGISTER_CUDA_KERNELS(pool2d_grad) { ops.Kernel<float, double>(kPoolGrad); }

}  // namespace fl
