// conv2d, depthwise_conv2d, conv2d_fusion, conv2d_transpose, depthwise_conv2d_transpose and their grads on the GPU
// (NCHW; strides, paddings, dilations, groups as the CPU kernel in kernels/conv2d.cc, shapes from
// kernels/helpers/conv_shape.h). No cuDNN.
//
// General convolutions are im2col + cuBLAS over chunks of n images. The column matrix of a chunk is laid out
// [groups, Kg, n, P] (Kg = C/groups * kh * kw in the filter's own (channel, ki, kj) order, P = Ho * Wo), so that
//   forward      Out[b, g]  = W_g [Mg, Kg] @ col_g[:, b]        one strided-batched GEMM per group over the images
//   data grad    dcol_g[:, b] = W_g^T @ dOut[b, g]              likewise, then col2im gathers dcol into Input@GRAD
//   filter grad  dW_g += dOut_g [Mg, n*P] @ col_g^T             one GEMM per group (dOut moved to [M, n, P] first)
// with no per-image launches or host waits. A pointwise convolution (1x1, stride 1, no padding) multiplies the
// images themselves (no column matrix). Convolutions with one input channel per group (depthwise, with a channel
// multiplier) run direct kernels instead: one thread per output (forward) or input (data grad) element, and one
// block per filter tap for the filter gradient (a deterministic block sum).
#include <algorithm>

#include "../helpers/bias_act.h"
#include "../helpers/conv_shape.h"
#include "nn_common.cuh"

namespace fl {
namespace {

struct Geo {  // ConvGeometry as plain ints for the device
  int C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

Geo ToGeo(const ConvGeometry& g) {
  return {int(g.channels),   int(g.height),   int(g.width), int(g.kernel_h), int(g.kernel_w),
          int(g.stride_h),   int(g.stride_w), int(g.pad_h), int(g.pad_w),    int(g.dilation_h),
          int(g.dilation_w), int(g.out_h),    int(g.out_w)};
}

// col[r, b, p] with r = (c, ki, kj) over all C channels, for images [b0, b0 + n): i runs over C*taps * n * P.
template <typename T>
__global__ void Im2Col(int64_t total, const T* x, Geo g, int64_t b0, int64_t n, T* col) {
  const int64_t P = int64_t(g.Ho) * g.Wo, taps = int64_t(g.kh) * g.kw;
  FL_CUDA_LOOP(i, total) {
    const int64_t p = i % P;
    const int64_t b = (i / P) % n;
    const int64_t r = i / (P * n);
    const int64_t c = r / taps, t = r % taps;
    const int ki = int(t / g.kw), kj = int(t % g.kw);
    const int ho = int(p / g.Wo), wo = int(p % g.Wo);
    const int h = ho * g.sh - g.ph + ki * g.dh, w = wo * g.sw - g.pw + kj * g.dw;
    T v = T(0);
    if (h >= 0 && h < g.H && w >= 0 && w < g.W) v = x[(((b0 + b) * g.C + c) * g.H + h) * g.W + w];
    col[i] = v;
  }
}

// Input@GRAD of images [b0, b0 + n) from dcol [C*taps, n, P]: each input element sums the column entries it fed.
template <typename T>
__global__ void Col2Im(int64_t total, const T* dcol, Geo g, int64_t b0, int64_t n, T* dx) {
  const int64_t P = int64_t(g.Ho) * g.Wo, taps = int64_t(g.kh) * g.kw;
  FL_CUDA_LOOP(i, total) {  // i over n * C * H * W of the chunk
    const int w = int(i % g.W);
    const int h = int((i / g.W) % g.H);
    const int64_t c = (i / (int64_t(g.W) * g.H)) % g.C;
    const int64_t b = i / (int64_t(g.W) * g.H * g.C);
    T s = T(0);
    for (int ki = 0; ki < g.kh; ++ki) {
      const int hp = h + g.ph - ki * g.dh;
      if (hp < 0 || hp % g.sh != 0) continue;
      const int ho = hp / g.sh;
      if (ho >= g.Ho) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int wp = w + g.pw - kj * g.dw;
        if (wp < 0 || wp % g.sw != 0) continue;
        const int wo = wp / g.sw;
        if (wo >= g.Wo) continue;
        const int64_t r = c * taps + ki * g.kw + kj;
        s += dcol[(r * n + b) * P + int64_t(ho) * g.Wo + wo];
      }
    }
    dx[b0 * g.C * g.H * g.W + i] = s;
  }
}

// [n, M, P] (images b0.. of dout) -> [M, n, P].
template <typename T>
__global__ void ToWide(int64_t total, const T* dout, int64_t b0, int64_t n, int64_t M, int64_t P, T* wide) {
  FL_CUDA_LOOP(i, total) {
    const int64_t p = i % P, b = (i / P) % n, m = i / (P * n);
    wide[i] = dout[((b0 + b) * M + m) * P + p];
  }
}

// 1x1, stride 1, no padding, and the output as large as the input (not so for a transposed convolution's bottom
// padding or output_size): the images are their own column matrices.
bool Pointwise(const ConvShape& s) {
  const ConvGeometry& g = s.geom;
  return g.IsPointwise() && g.out_h == g.height && g.out_w == g.width;
}

// Images per chunk: the column matrix (and the wide dOut) within about 256 MiB.
int64_t ChunkImages(const ConvShape& s, size_t elem) {
  const int64_t per_image = std::max<int64_t>(1, std::max(s.geom.PatchSize(), s.out_channels) * s.geom.OutSize());
  const int64_t cap = std::max<int64_t>(1, (int64_t(256) << 20) / int64_t(elem) / per_image);
  return std::max<int64_t>(1, std::min(cap, s.batch));
}

template <typename T>
void GemmConvForward(const ExecutionContext& ctx, const ConvShape& s, const T* x, const T* w, T* out) {
  const int device = ctx.place().device;
  const Geo g = ToGeo(s.geom);
  const int64_t P = s.geom.OutSize(), K = s.geom.PatchSize(), kg = s.PatchPerGroup(), mg = s.OutPerGroup();
  const int64_t M = s.out_channels, nb = ChunkImages(s, sizeof(T));
  if (Pointwise(s)) {  // the image is its own column matrix: Out[b, g] = W_g @ Input[b, g]
    for (int64_t gi = 0; gi < s.groups; ++gi)
      cuda::GemmStridedBatched<T>(device, false, false, mg, P, kg, T(1), w + gi * mg * kg, kg, 0, x + gi * kg * P, P,
                                  K * P, T(0), out + gi * mg * P, P, M * P, s.batch);
    return;
  }
  auto col_buf = cuda::Scratch(ctx.place(), size_t(K * nb * P) * sizeof(T));
  T* col = static_cast<T*>(col_buf->ptr());
  for (int64_t b0 = 0; b0 < s.batch; b0 += nb) {
    const int64_t n = std::min(nb, s.batch - b0);
    cuda::Launch(ctx, K * n * P, Im2Col<T>, x, g, b0, n, col);
    for (int64_t gi = 0; gi < s.groups; ++gi)
      cuda::GemmStridedBatched<T>(device, false, false, mg, P, kg, T(1), w + gi * mg * kg, kg, 0, col + gi * kg * n * P,
                                  n * P, P, T(0), out + (b0 * M + gi * mg) * P, P, M * P, n);
  }
}

template <typename T>
void GemmConvBackward(const ExecutionContext& ctx, const ConvShape& s, const T* x, const T* w, const T* dout, T* dx,
                      T* dw) {
  const int device = ctx.place().device;
  const Geo g = ToGeo(s.geom);
  const int64_t P = s.geom.OutSize(), K = s.geom.PatchSize(), kg = s.PatchPerGroup(), mg = s.OutPerGroup();
  const int64_t M = s.out_channels, nb = ChunkImages(s, sizeof(T)), image = s.geom.ImageSize();
  if (Pointwise(s)) {  // no column matrix: the images themselves (K = C, P = H * W)
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      if (dw)  // dW_g = sum_b dOut[b, g] @ Input[b, g]^T (per-image products summed in order)
        cuda::nn::GemmBatched<T>(ctx, false, true, s.batch, mg, kg, P, T(1), {dout + gi * mg * P, M * P},
                                 {x + gi * kg * P, K * P}, T(0), {dw + gi * mg * kg, 0});
      if (dx)  // Input@GRAD[b, g] = W_g^T @ dOut[b, g]
        cuda::GemmStridedBatched<T>(device, true, false, kg, P, mg, T(1), w + gi * mg * kg, kg, 0, dout + gi * mg * P,
                                    P, M * P, T(0), dx + gi * kg * P, P, K * P, s.batch);
    }
    return;
  }
  auto col_buf = cuda::Scratch(ctx.place(), size_t(K * nb * P) * sizeof(T));
  T* col = static_cast<T*>(col_buf->ptr());
  std::shared_ptr<Allocation> wide_buf;
  T* wide = nullptr;
  if (dw) {
    wide_buf = cuda::Scratch(ctx.place(), size_t(M * nb * P) * sizeof(T));
    wide = static_cast<T*>(wide_buf->ptr());
  }
  for (int64_t b0 = 0; b0 < s.batch; b0 += nb) {
    const int64_t n = std::min(nb, s.batch - b0);
    if (dw) {
      cuda::Launch(ctx, K * n * P, Im2Col<T>, x, g, b0, n, col);
      cuda::Launch(ctx, M * n * P, ToWide<T>, dout, b0, n, M, P, wide);
      for (int64_t gi = 0; gi < s.groups; ++gi)  // dW_g [Mg, Kg] (+)= wide_g [Mg, nP] @ col_g^T
        cuda::Gemm<T>(device, false, true, mg, kg, n * P, T(1), wide + gi * mg * n * P, n * P, col + gi * kg * n * P,
                      n * P, b0 == 0 ? T(0) : T(1), dw + gi * mg * kg, kg);
    }
    if (dx) {  // dcol_g[:, b] = W_g^T [Kg, Mg] @ dOut[b, g] [Mg, P], into col (its patches are used above)
      for (int64_t gi = 0; gi < s.groups; ++gi)
        cuda::GemmStridedBatched<T>(device, true, false, kg, P, mg, T(1), w + gi * mg * kg, kg, 0,
                                    dout + (b0 * M + gi * mg) * P, P, M * P, T(0), col + gi * kg * n * P, n * P, P, n);
      cuda::Launch(ctx, n * image, Col2Im<T>, static_cast<const T*>(col), g, b0, n, dx);
    }
  }
}

// Depthwise: out[b, m] from in[b, m / mult], one thread per output element.
template <typename T>
__global__ void DepthwiseForward(int64_t total, const T* x, const T* w, Geo g, int M, int mult, T* out) {
  FL_CUDA_LOOP(i, total) {
    const int wo = int(i % g.Wo);
    const int ho = int((i / g.Wo) % g.Ho);
    const int64_t bm = i / (int64_t(g.Wo) * g.Ho);
    const int m = int(bm % M);
    const int64_t b = bm / M;
    const T* in = x + (b * g.C + m / mult) * int64_t(g.H) * g.W;
    const T* wm = w + int64_t(m) * g.kh * g.kw;
    T s = T(0);
    for (int ki = 0; ki < g.kh; ++ki) {
      const int h = ho * g.sh - g.ph + ki * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int ww = wo * g.sw - g.pw + kj * g.dw;
        if (ww < 0 || ww >= g.W) continue;
        s += wm[ki * g.kw + kj] * in[int64_t(h) * g.W + ww];
      }
    }
    out[i] = s;
  }
}

// Depthwise data gradient: one thread per input element, summing its mult output channels' taps.
template <typename T>
__global__ void DepthwiseDataGrad(int64_t total, const T* dout, const T* w, Geo g, int M, int mult, T* dx) {
  FL_CUDA_LOOP(i, total) {
    const int wi = int(i % g.W);
    const int hi = int((i / g.W) % g.H);
    const int64_t bc = i / (int64_t(g.W) * g.H);
    const int c = int(bc % g.C);
    const int64_t b = bc / g.C;
    T s = T(0);
    for (int m = c * mult; m < (c + 1) * mult; ++m) {
      const T* go = dout + (b * M + m) * int64_t(g.Ho) * g.Wo;
      const T* wm = w + int64_t(m) * g.kh * g.kw;
      for (int ki = 0; ki < g.kh; ++ki) {
        const int hp = hi + g.ph - ki * g.dh;
        if (hp < 0 || hp % g.sh != 0 || hp / g.sh >= g.Ho) continue;
        for (int kj = 0; kj < g.kw; ++kj) {
          const int wp = wi + g.pw - kj * g.dw;
          if (wp < 0 || wp % g.sw != 0 || wp / g.sw >= g.Wo) continue;
          s += wm[ki * g.kw + kj] * go[int64_t(hp / g.sh) * g.Wo + wp / g.sw];
        }
      }
    }
    dx[i] = s;
  }
}

// Depthwise filter gradient: block (m, tap) sums dout[b, m, ho, wo] * x[b, m / mult, hi, wi] over b, ho, wo.
template <typename T>
__global__ void DepthwiseFilterGrad(const T* x, const T* dout, Geo g, int64_t batch, int M, int mult, T* dw) {
  const int taps = g.kh * g.kw;
  const int m = int(blockIdx.x) / taps, t = int(blockIdx.x) % taps, ki = t / g.kw, kj = t % g.kw;
  const int64_t P = int64_t(g.Ho) * g.Wo, total = batch * P;
  T s = T(0);
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t b = i / P, p = i % P;
    const int ho = int(p / g.Wo), wo = int(p % g.Wo);
    const int h = ho * g.sh - g.ph + ki * g.dh, w = wo * g.sw - g.pw + kj * g.dw;
    if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
    s += dout[(b * M + m) * P + p] * x[((b * g.C + m / mult) * g.H + h) * int64_t(g.W) + w];
  }
  s = cuda::BlockSum(s);
  if (threadIdx.x == 0) dw[int64_t(m) * taps + t] = s;
}

template <typename T>
void ConvForward(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const ConvShape s = MakeShape(ctx, in.dims(), filter.dims());
  Tensor* out = ctx.Output("Output");
  out->Resize(DDim{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w});
  T* o = out->mutable_data<T>(ctx.place());
  if (out->numel() == 0) return;
  if (s.PatchPerGroup() == 0) return cuda::nn::Zero(ctx, o, out->numel());
  if (s.Depthwise()) {
    cuda::Launch(ctx, out->numel(), DepthwiseForward<T>, in.data<T>(), filter.data<T>(), ToGeo(s.geom),
                 int(s.out_channels), int(s.out_channels / s.geom.channels), o);
    return;
  }
  GemmConvForward<T>(ctx, s, in.data<T>(), filter.data<T>(), o);
}

template <typename T>
void ConvGrad(const ExecutionContext& ctx) {
  const ConvGradArgs<T> a(ctx);
  const Tensor &in = a.in, &filter = a.filter, &dout = a.dout;
  const ConvShape& s = a.s;
  T *dx = a.dx, *dw = a.dw;
  if (!dx && !dw) return;
  if (s.batch == 0 || s.PatchPerGroup() == 0 || s.geom.OutSize() == 0) {  // nothing reaches either gradient
    if (dx) cuda::nn::Zero(ctx, dx, in.numel());
    if (dw) cuda::nn::Zero(ctx, dw, filter.numel());
    return;
  }
  if (s.Depthwise()) {
    const Geo g = ToGeo(s.geom);
    const int M = int(s.out_channels), mult = int(s.out_channels / s.geom.channels);
    if (dx) cuda::Launch(ctx, in.numel(), DepthwiseDataGrad<T>, dout.data<T>(), filter.data<T>(), g, M, mult, dx);
    if (dw) {
      DepthwiseFilterGrad<T><<<unsigned(filter.numel()), cuda::kThreads, 0, cuda::Stream(ctx)>>>(
          in.data<T>(), dout.data<T>(), g, s.batch, M, mult, dw);
      cuda::CheckLaunch(ctx.Type().c_str());
    }
    return;
  }
  GemmConvBackward<T>(ctx, s, in.data<T>(), filter.data<T>(), dout.data<T>(), dx, dw);
}

// conv2d_transpose of Input [N, C, H, W] is the data gradient of the conv2d whose output Input is
// (MakeTransposeShape): its forward is that conv's data gradient, its Input@GRAD that conv's forward of
// Output@GRAD, its Filter@GRAD that conv's filter gradient with Output@GRAD as the input (as kernels/conv2d.cc).
template <typename T>
void ConvTransposeForward(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const ConvShape s = MakeTransposeShape(ctx, in.dims(), filter.dims());
  Tensor* out = ctx.Output("Output");
  out->Resize(DDim{s.batch, s.geom.channels, s.geom.height, s.geom.width});
  T* o = out->mutable_data<T>(ctx.place());
  if (s.batch == 0 || out->numel() == 0) return;
  if (s.PatchPerGroup() == 0 || in.numel() == 0) return cuda::nn::Zero(ctx, o, out->numel());
  if (s.Depthwise()) {
    cuda::Launch(ctx, out->numel(), DepthwiseDataGrad<T>, in.data<T>(), filter.data<T>(), ToGeo(s.geom),
                 int(s.out_channels), int(s.out_channels / s.geom.channels), o);
    return;
  }
  GemmConvBackward<T>(ctx, s, nullptr, filter.data<T>(), in.data<T>(), o, nullptr);
}

template <typename T>
void ConvTransposeGrad(const ExecutionContext& ctx) {
  const ConvGradArgs<T> a(ctx, /*transposed=*/true);
  const Tensor &in = a.in, &filter = a.filter, &dout = a.dout;
  const ConvShape& s = a.s;
  T *dx = a.dx, *dw = a.dw;
  if (!dx && !dw) return;
  if (s.batch == 0 || s.PatchPerGroup() == 0 || in.numel() == 0) {
    if (dx) cuda::nn::Zero(ctx, dx, in.numel());
    if (dw) cuda::nn::Zero(ctx, dw, filter.numel());
    return;
  }
  if (s.Depthwise()) {
    const Geo g = ToGeo(s.geom);
    const int M = int(s.out_channels), mult = int(s.out_channels / s.geom.channels);
    if (dx) cuda::Launch(ctx, in.numel(), DepthwiseForward<T>, dout.data<T>(), filter.data<T>(), g, M, mult, dx);
    if (dw) {
      DepthwiseFilterGrad<T><<<unsigned(filter.numel()), cuda::kThreads, 0, cuda::Stream(ctx)>>>(
          dout.data<T>(), in.data<T>(), g, s.batch, M, mult, dw);
      cuda::CheckLaunch(ctx.Type().c_str());
    }
    return;
  }
  if (dx) GemmConvForward<T>(ctx, s, dout.data<T>(), filter.data<T>(), dx);
  if (dw) GemmConvBackward<T>(ctx, s, dout.data<T>(), filter.data<T>(), in.data<T>(), nullptr, dw);
}

// conv2d_fusion (inference): Output = act(conv + Bias[m] [+ ResidualData]), the epilogue one pass after the
// convolution (kernels/conv2d.cc's ConvFusionKernel applies it per tile).
template <typename T>
void ConvFusion(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const ConvShape s = MakeShape(ctx, in.dims(), ctx.Input("Filter").dims());
  const DDim out_dims{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w};
  const T* bias = nullptr;
  const T* residual = nullptr;
  if (const Tensor* b = ctx.InputOrNull("Bias")) {
    FL_ENFORCE(b->numel() == s.out_channels, "conv2d_fusion: Bias '", ctx.InputName("Bias"), "' ", b->dims(),
               " must hold M = ", s.out_channels, " values (the output channels of Filter '", ctx.InputName("Filter"),
               "')");
    bias = b->data<T>();
  }
  if (const Tensor* r = ctx.InputOrNull("ResidualData")) {
    FL_ENFORCE(r->dims() == out_dims, "conv2d_fusion: ResidualData '", ctx.InputName("ResidualData"), "' ", r->dims(),
               " must have the Output's shape ", out_dims);
    residual = r->data<T>();
  }
  ConvForward<T>(ctx);
  const int act = int(EpilogueActByName(ctx.Attr<std::string>("activation")));
  Tensor* out = ctx.Output("Output");
  if (bias || residual || act != int(EpilogueAct::kIdentity))
    cuda::Launch(ctx, out->numel(), cuda::nn::BiasActResidual<T>, out->mutable_data<T>(ctx.place()), bias,
                 s.out_channels, s.geom.OutSize(), residual, act, T(6));
}

const auto kConv = [](const ExecutionContext& ctx, auto tag) { ConvForward<typename decltype(tag)::type>(ctx); };
const auto kConvTranspose = [](const ExecutionContext& ctx, auto tag) {
  ConvTransposeForward<typename decltype(tag)::type>(ctx);
};
const auto kConvTransposeGrad = [](const ExecutionContext& ctx, auto tag) {
  ConvTransposeGrad<typename decltype(tag)::type>(ctx);
};
const auto kConvFusion = [](const ExecutionContext& ctx, auto tag) { ConvFusion<typename decltype(tag)::type>(ctx); };
const auto kConvGrad = [](const ExecutionContext& ctx, auto tag) { ConvGrad<typename decltype(tag)::type>(ctx); };

}  // namespace

FL_REGISTER_CUDA_KERNELS(conv2d) { ops.Kernel<float, double>(kConv); }
FL_REGISTER_CUDA_KERNELS(conv2d_grad) { ops.Kernel<float, double>(kConvGrad); }
FL_REGISTER_CUDA_KERNELS(conv2d_fusion) { ops.Kernel<float, double>(kConvFusion); }
FL_REGISTER_CUDA_KERNELS(depthwise_conv2d) { ops.Kernel<float, double>(kConv); }
FL_REGISTER_CUDA_KERNELS(depthwise_conv2d_grad) { ops.Kernel<float, double>(kConvGrad); }

FL_REGISTER_CUDA_KERNELS(conv2d_transpose) { ops.Kernel<float, double>(kConvTranspose); }
FL_REGISTER_CUDA_KERNELS(conv2d_transpose_grad) { ops.Kernel<float, double>(kConvTransposeGrad); }
FL_REGISTER_CUDA_KERNELS(depthwise_conv2d_transpose) { ops.Kernel<float, double>(kConvTranspose); }
FL_REGISTER_CUDA_KERNELS(depthwise_conv2d_transpose_grad) { ops.Kernel<float, double>(kConvTransposeGrad); }

}  // namespace fl
