// batch_norm, fused_batch_norm_act (relu) and their grads on the GPU, as the CPU kernel (kernels/batch_norm.cc):
// training normalises with the batch mean and biased variance, updates MeanOut / VarianceOut with momentum, and
// saves the batch mean and 1 / sqrt(var + epsilon) in SavedMean / SavedVariance; is_test / use_global_stats use the
// running statistics (and save those). X is [outer, C, inner] (NCHW: [N, C, H*W]; NHWC: [N*H*W, C, 1]).
//
// Each direction is three launches: per-channel sums in double over (channel, part) blocks into scratch, one thread
// per channel adding the parts in order (deterministic) into the statistics and the affine coefficients, then one
// elementwise pass. The forward sums x minus the channel's first element, as the CPU kernel, so large means do not
// cancel.
#include <algorithm>

#include "../helpers/activation.h"
#include "nn_common.cuh"

namespace fl {
namespace {

struct View {
  int64_t outer, C, inner;
  __host__ __device__ int64_t count() const { return outer * inner; }
};

View ViewOf(const DDim& x, bool nhwc) {
  const int r = x.size();
  if (nhwc) return View{x.Product(0, r - 1), x[r - 1], 1};
  return View{x[0], x[1], x.Product(2, r)};
}

// Parts per channel: enough blocks to fill the device, each part at least 2048 elements.
int64_t PartsFor(const View& v, const ExecutionContext& ctx) {
  const int64_t want =
      std::max<int64_t>(1, 4 * cuda::MultiprocessorCount(ctx.place().device) / std::max<int64_t>(1, v.C));
  return std::max<int64_t>(1, std::min<int64_t>({want, (v.count() + 2047) / 2048, 1024}));
}

// Block (c, s): part s of channel c. kGrad: u = g (through relu's output `mask` when given), else u = d; with
// d = x - k[c] (k: the channel's first element in the forward, SavedMean in the grad): s1 += u, s2 += u * d.
template <bool kGrad, typename T>
__global__ void ChannelPartSums(const T* x, const T* g, const T* mask, const T* k, View v, int64_t parts, double* out) {
  const int64_t c = blockIdx.x / parts, s = blockIdx.x % parts, count = v.count();
  const int64_t j0 = count * s / parts, j1 = count * (s + 1) / parts;
  const T kc = kGrad ? k[c] : x[c * v.inner];
  double a1 = 0, a2 = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t idx = (j / v.inner * v.C + c) * v.inner + j % v.inner;
    const double d = double(x[idx] - kc);
    double u = d;
    if (kGrad) u = (mask && !(mask[idx] > T(0))) ? 0.0 : double(g[idx]);
    a1 += u;
    a2 += u * d;
  }
  a1 = cuda::BlockSum(a1);
  a2 = cuda::BlockSum(a2);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = a1;
    out[2 * blockIdx.x + 1] = a2;
  }
}

template <bool kGrad, typename T>
const double* Sums(const ExecutionContext& ctx, const View& v, const T* x, const T* g, const T* mask, const T* k,
                   std::shared_ptr<Allocation>* holder, int64_t* parts) {
  *parts = PartsFor(v, ctx);
  if (v.C == 0) return nullptr;
  *holder = cuda::Scratch(ctx.place(), size_t(v.C * *parts * 2) * sizeof(double));
  double* out = static_cast<double*>((*holder)->ptr());
  ChannelPartSums<kGrad, T>
      <<<unsigned(v.C * *parts), cuda::kThreads, 0, cuda::Stream(ctx)>>>(x, g, mask, k, v, *parts, out);
  cuda::CheckLaunch(ctx.Type().c_str());
  return out;
}

__device__ inline void AddParts(const double* sums, int64_t c, int64_t parts, double* s1, double* s2) {
  double a = 0, b = 0;
  for (int64_t p = 0; p < parts; ++p) a += sums[2 * (c * parts + p)], b += sums[2 * (c * parts + p) + 1];
  *s1 = a;
  *s2 = b;
}

// Training statistics per channel: mean, inv_std, running updates, saved values and the coefficients y = x*a + b.
template <typename T>
__global__ void TrainStats(int64_t C, const double* sums, int64_t parts, const T* x, int64_t inner, double m, T eps,
                           T momentum, const T* scale, const T* bias, const T* run_mean, const T* run_var, T* mean_out,
                           T* var_out, T* saved_mean, T* saved_inv, T* a, T* b) {
  FL_CUDA_LOOP(c, C) {
    double s1, s2;
    AddParts(sums, c, parts, &s1, &s2);
    const T shift = x[c * inner];
    const double dm = s1 / m;
    const T batch_var = static_cast<T>(fmax(s2 / m - dm * dm, 0.0));
    const T mean = static_cast<T>(shift + dm);
    const T inv = T(1) / sqrt(batch_var + eps);
    const T rm = run_mean[c], rv = run_var[c];
    mean_out[c] = rm * momentum + mean * (T(1) - momentum);
    var_out[c] = rv * momentum + batch_var * (T(1) - momentum);
    if (saved_mean) saved_mean[c] = mean;
    if (saved_inv) saved_inv[c] = inv;
    a[c] = scale[c] * inv;
    b[c] = bias[c] - mean * a[c];
  }
}

template <typename T>
__global__ void GlobalStats(int64_t C, T eps, const T* scale, const T* bias, const T* run_mean, const T* run_var,
                            T* saved_mean, T* saved_inv, T* a, T* b) {
  FL_CUDA_LOOP(c, C) {
    const T mean = run_mean[c], inv = T(1) / sqrt(run_var[c] + eps);
    if (saved_mean) saved_mean[c] = mean;
    if (saved_inv) saved_inv[c] = inv;
    a[c] = scale[c] * inv;
    b[c] = bias[c] - mean * a[c];
  }
}

// out = x * a[c] + b[c] (+ g' * e[c] with g' = g, or mask > 0 ? g : 0), relu'd when `relu`.
template <typename T>
__global__ void ChannelAffine(int64_t n, const T* x, const T* a, const T* b, const T* g, const T* mask, const T* e,
                              int64_t C, int64_t inner, bool relu, T* out) {
  FL_CUDA_LOOP(i, n) {
    const int64_t c = (i / inner) % C;
    T v = x[i] * a[c] + b[c];
    if (g) {
      const T gv = g[i];
      v = v + (mask ? (mask[i] > T(0) ? gv : T(0)) : gv) * e[c];
    }
    out[i] = relu ? (v > T(0) ? v : T(0)) : v;
  }
}

template <typename T>
void Forward(const ExecutionContext& ctx, Activation act) {
  const Tensor& x = ctx.Input("X");
  const View v = ViewOf(x.dims(), ctx.Attr<std::string>("data_layout") == "NHWC");
  const int64_t C = v.C;
  const T eps = ctx.Attr<float>("epsilon");
  const T momentum = ctx.Attr<float>("momentum");
  const bool global = ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats");
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"})
    FL_ENFORCE(ctx.Input(slot).numel() == C, "batch_norm: ", slot, " '", ctx.InputName(slot), "' ",
               ctx.Input(slot).dims(), " must hold C = ", C, " values for X ", x.dims());
  const T* scale = ctx.Input("Scale").data<T>();
  const T* bias = ctx.Input("Bias").data<T>();
  const T* run_mean = ctx.Input("Mean").data<T>();
  const T* run_var = ctx.Input("Variance").data<T>();
  T* saved_mean = nullptr;
  T* saved_inv = nullptr;
  if (Tensor* t = ctx.OutputOrNull("SavedMean")) saved_mean = t->mutable_data<T>(DDim{C}, ctx.place());
  if (Tensor* t = ctx.OutputOrNull("SavedVariance")) saved_inv = t->mutable_data<T>(DDim{C}, ctx.place());
  auto coef_buf = cuda::Scratch(ctx.place(), size_t(2 * C) * sizeof(T));
  T* a = static_cast<T*>(coef_buf->ptr());
  T* b = a + C;
  const T* xp = x.data<T>();
  if (global) {
    for (auto [in, out] : {std::pair{"Mean", "MeanOut"}, std::pair{"Variance", "VarianceOut"}}) {
      Tensor* o = ctx.OutputOrNull(out);
      const Tensor& i = ctx.Input(in);
      if (!o || o->holder() == i.holder()) continue;
      T* dst = o->mutable_data<T>(DDim{C}, ctx.place());
      FL_CUDA_CHECK(
          cudaMemcpyAsync(dst, i.data<T>(), size_t(C) * sizeof(T), cudaMemcpyDeviceToDevice, cuda::Stream(ctx)));
    }
    cuda::Launch(ctx, C, GlobalStats<T>, eps, scale, bias, run_mean, run_var, saved_mean, saved_inv, a, b);
  } else {
    FL_ENFORCE(v.count() > 0, "batch_norm: X '", ctx.InputName("X"), "' ", x.dims(),
               " has no elements per channel to compute batch statistics from");
    T* mean_out = ctx.Output("MeanOut")->mutable_data<T>(DDim{C}, ctx.place());
    T* var_out = ctx.Output("VarianceOut")->mutable_data<T>(DDim{C}, ctx.place());
    std::shared_ptr<Allocation> sums_buf;
    int64_t parts;
    const double* sums = Sums<false, T>(ctx, v, xp, nullptr, nullptr, nullptr, &sums_buf, &parts);
    cuda::Launch(ctx, C, TrainStats<T>, sums, parts, xp, v.inner, double(v.count()), eps, momentum, scale, bias,
                 run_mean, run_var, mean_out, var_out, saved_mean, saved_inv, a, b);
  }
  T* yp = ctx.Output("Y")->mutable_data<T>(x.dims(), ctx.place());  // may be X itself (in_place)
  cuda::Launch(ctx, x.numel(), ChannelAffine<T>, xp, static_cast<const T*>(a), static_cast<const T*>(b),
               static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), C,
               v.inner, act == Activation::kRelu, yp);
}

// dBias = s1, dScale = s2 * inv; dx = dy * e + x * a + b (a = b = 0 with global statistics).
template <typename T>
__global__ void GradCoefficients(int64_t C, const double* sums, int64_t parts, double m, bool global, const T* scale,
                                 const T* mean, const T* inv, T* dscale, T* dbias, T* a, T* b, T* e) {
  FL_CUDA_LOOP(c, C) {
    double s1 = 0, s2 = 0;
    if (sums) AddParts(sums, c, parts, &s1, &s2);
    if (dbias) dbias[c] = static_cast<T>(s1);
    if (dscale) dscale[c] = static_cast<T>(s2 * inv[c]);
    if (!e) continue;
    e[c] = scale[c] * inv[c];
    if (global) {
      a[c] = b[c] = T(0);
    } else {
      const double ec = e[c], ic = inv[c];
      const double ac = -ec * ic * ic * s2 / m;
      a[c] = static_cast<T>(ac);
      b[c] = static_cast<T>(-ec * s1 / m - ac * mean[c]);
    }
  }
}

template <typename T>
void Backward(const ExecutionContext& ctx, Activation act) {
  const Tensor& dy = ctx.Input("Y@GRAD");
  const Tensor& x = ctx.Input("X");
  FL_ENFORCE(dy.dims() == x.dims(), ctx.Type(), ": Y@GRAD '", ctx.InputName("Y@GRAD"), "' ", dy.dims(),
             " must match X ", x.dims());
  const T* mask = nullptr;
  if (act != Activation::kIdentity) {
    FL_ENFORCE(act == Activation::kRelu, ctx.Type(), ": act_type must be relu");
    const Tensor& y = ctx.Input("Y");
    FL_ENFORCE(y.dims() == dy.dims(), ctx.Type(), ": Y '", ctx.InputName("Y"), "' ", y.dims(),
               " must have the shape of Y@GRAD '", ctx.InputName("Y@GRAD"), "' ", dy.dims());
    mask = y.data<T>();
  }
  const View v = ViewOf(x.dims(), ctx.Attr<std::string>("data_layout") == "NHWC");
  const int64_t C = v.C;
  const bool global = ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats");
  const T* scale = ctx.Input("Scale").data<T>();
  const T* mean = ctx.Input("SavedMean").data<T>();
  const T* inv = ctx.Input("SavedVariance").data<T>();
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  Tensor* dscale = ctx.OutputOrNull("Scale@GRAD");
  Tensor* dbias = ctx.OutputOrNull("Bias@GRAD");
  const T* xp = x.data<T>();
  const T* gp = dy.data<T>();
  std::shared_ptr<Allocation> sums_buf;
  int64_t parts = 0;
  const double* sums = nullptr;
  if ((dscale || dbias || !global) && v.count() > 0)
    sums = Sums<true, T>(ctx, v, xp, gp, mask, mean, &sums_buf, &parts);
  T* dbias_p = dbias ? dbias->mutable_data<T>(DDim{C}, ctx.place()) : nullptr;
  T* dscale_p = dscale ? dscale->mutable_data<T>(DDim{C}, ctx.place()) : nullptr;
  std::shared_ptr<Allocation> coef_buf;
  T *a = nullptr, *b = nullptr, *e = nullptr;
  if (dx) {
    coef_buf = cuda::Scratch(ctx.place(), size_t(3 * C) * sizeof(T));
    a = static_cast<T*>(coef_buf->ptr());
    b = a + C;
    e = b + C;
  }
  cuda::Launch(ctx, C, GradCoefficients<T>, sums, parts, double(v.count()), global, scale, mean, inv, dscale_p, dbias_p,
               a, b, e);
  if (!dx) return;
  T* dxp = dx->mutable_data<T>(x.dims(), ctx.place());
  cuda::Launch(ctx, x.numel(), ChannelAffine<T>, xp, static_cast<const T*>(a), static_cast<const T*>(b), gp, mask,
               static_cast<const T*>(e), C, v.inner, false, dxp);
}

const auto kBatchNorm = [](const ExecutionContext& ctx, auto tag) {
  Forward<typename decltype(tag)::type>(ctx, Activation::kIdentity);
};
const auto kBatchNormGrad = [](const ExecutionContext& ctx, auto tag) {
  Backward<typename decltype(tag)::type>(ctx, Activation::kIdentity);
};
const auto kFusedBatchNormAct = [](const ExecutionContext& ctx, auto tag) {
  Forward<typename decltype(tag)::type>(ctx, ActivationByName(ctx.Attr<std::string>("act_type")));
};
const auto kFusedBatchNormActGrad = [](const ExecutionContext& ctx, auto tag) {
  Backward<typename decltype(tag)::type>(ctx, ActivationByName(ctx.Attr<std::string>("act_type")));
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(batch_norm) { ops.Kernel<float, double>(kBatchNorm); }
FL_REGISTER_CUDA_KERNELS(batch_norm_grad) { ops.Kernel<float, double>(kBatchNormGrad); }
FL_REGISTER_CUDA_KERNELS(fused_batch_norm_act) { ops.Kernel<float, double>(kFusedBatchNormAct); }
FL_REGISTER_CUDA_KERNELS(fused_batch_norm_act_grad) { ops.Kernel<float, double>(kFusedBatchNormActGrad); }

}  // namespace fl
