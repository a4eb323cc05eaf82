// layer_norm and layer_norm_grad on the GPU, as the CPU kernel (kernels/norm_layers.cc): X is `rows` rows of n =
// prod(dims[begin_norm_axis:]) elements, each normalised by its mean and biased variance (sums in double, shifted by
// the row's first element), with optional per-element Scale / Bias. One block per row for the statistics and X@GRAD;
// the parameter gradients are column sums over the rows, cut into row parts whose partial sums are added in order.
#include <algorithm>

#include "nn_common.cuh"

namespace fl {
namespace {

int ThreadsFor(int64_t n) {  // a multiple of 32, at most kThreads
  return static_cast<int>(std::min<int64_t>(cuda::kThreads, std::max<int64_t>(32, (n + 31) / 32 * 32)));
}

template <typename T>
__global__ void LayerNormForward(const T* x, const T* scale, const T* bias, int64_t n, T eps, T* y, T* mean_out,
                                 T* var_out) {
  __shared__ T stats[2];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * n;
  const T k = xr[0];
  double s1 = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const double d = double(xr[j] - k);
    s1 += d;
    s2 += d * d;
  }
  s1 = cuda::BlockSum(s1);
  s2 = cuda::BlockSum(s2);
  if (threadIdx.x == 0) {
    const double dm = s1 / n;
    const T m = static_cast<T>(k + dm), v = static_cast<T>(fmax(s2 / n - dm * dm, 0.0));
    stats[0] = m;
    stats[1] = v;
    if (mean_out) mean_out[r] = m;
    if (var_out) var_out[r] = v;
  }
  __syncthreads();
  const T m = stats[0], inv = T(1) / sqrt(stats[1] + eps);
  T* yr = y + r * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] = (xr[j] - m) * inv * (scale ? scale[j] : T(1)) + (bias ? bias[j] : T(0));
}

template <typename T>
__global__ void InvStd(int64_t rows, const T* var, T eps, T* inv) {
  FL_CUDA_LOOP(r, rows) inv[r] = T(1) / sqrt(var[r] + eps);
}

// dx = iv * g + a * x + b with g = dy * scale, a = -iv^3 * sum(g * (x - m)) / n, b = -iv * sum(g) / n - a * m.
template <typename T>
__global__ void LayerNormDataGrad(const T* x, const T* dy, const T* scale, const T* mean, const T* inv, int64_t n,
                                  T* dx) {
  __shared__ T coef[2];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * n;
  const T* dr = dy + r * n;
  const T m = mean[r], iv = inv[r];
  double s1 = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const T g = scale ? dr[j] * scale[j] : dr[j];
    s1 += double(g);
    s2 += double(g) * double(xr[j] - m);
  }
  s1 = cuda::BlockSum(s1);
  s2 = cuda::BlockSum(s2);
  if (threadIdx.x == 0) {
    const double ivd = iv, a = -ivd * ivd * ivd * s2 / n, b = -ivd * s1 / n - a * m;
    coef[0] = static_cast<T>(a);
    coef[1] = static_cast<T>(b);
  }
  __syncthreads();
  const T at = coef[0], bt = coef[1];
  T* out = dx + r * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const T g = scale ? dr[j] * scale[j] : dr[j];
    out[j] = iv * g + at * xr[j] + bt;
  }
}

// Partial column sums over rows [part's share): ps[part, j] = sum dy * (x - m) * iv, pb[part, j] = sum dy.
template <typename T>
__global__ void ParamGradParts(int64_t total, const T* x, const T* dy, const T* mean, const T* inv, int64_t rows,
                               int64_t n, int64_t parts, double* ps, double* pb) {
  FL_CUDA_LOOP(i, total) {  // i over parts * n
    const int64_t j = i % n, p = i / n;
    double s = 0, b = 0;
    for (int64_t r = rows * p / parts; r < rows * (p + 1) / parts; ++r) {
      const T d = dy[r * n + j];
      s += double(d * ((x[r * n + j] - mean[r]) * inv[r]));
      b += double(d);
    }
    ps[i] = s;
    pb[i] = b;
  }
}

template <typename T>
__global__ void ParamGradSum(int64_t n, const double* ps, const double* pb, int64_t parts, T* dscale, T* dbias) {
  FL_CUDA_LOOP(j, n) {
    double s = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) s += ps[p * n + j], b += pb[p * n + j];
    if (dscale) dscale[j] = static_cast<T>(s);
    if (dbias) dbias[j] = static_cast<T>(b);
  }
}

struct Rows {
  int64_t rows, n;
};
Rows RowsOf(const ExecutionContext& ctx, const DDim& x) {
  const int axis = ctx.Attr<int32_t>("begin_norm_axis");
  return {x.Product(0, axis), x.Product(axis, x.size())};
}

template <typename T>
const T* Param(const ExecutionContext& ctx, const char* op, const char* slot, int64_t want) {
  const Tensor* t = ctx.InputOrNull(slot);
  if (!t) return nullptr;
  FL_ENFORCE(t->numel() == want, op, ": ", slot, " '", ctx.InputName(slot), "' ", t->dims(), " must hold ", want,
             " values for X ", ctx.Input("X").dims());
  return t->data<T>();
}

const auto kLayerNorm = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Rows v = RowsOf(ctx, x.dims());
  const T* scale = Param<T>(ctx, "layer_norm", "Scale", v.n);
  const T* bias = Param<T>(ctx, "layer_norm", "Bias", v.n);
  T* mean = nullptr;
  T* var = nullptr;
  if (Tensor* t = ctx.OutputOrNull("Mean")) mean = t->mutable_data<T>(DDim{v.rows}, ctx.place());
  if (Tensor* t = ctx.OutputOrNull("Variance")) var = t->mutable_data<T>(DDim{v.rows}, ctx.place());
  T* y = ctx.Output("Y")->mutable_data<T>(x.dims(), ctx.place());
  if (v.rows == 0 || v.n == 0) return;
  LayerNormForward<T><<<unsigned(v.rows), ThreadsFor(v.n), 0, cuda::Stream(ctx)>>>(
      x.data<T>(), scale, bias, v.n, static_cast<T>(ctx.Attr<float>("epsilon")), y, mean, var);
  cuda::CheckLaunch(ctx.Type().c_str());
};

const auto kLayerNormGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& dy = ctx.Input("Y@GRAD");
  FL_ENFORCE(dy.dims() == x.dims(), "layer_norm_grad: Y@GRAD '", ctx.InputName("Y@GRAD"), "' ", dy.dims(),
             " must match X ", x.dims());
  const Rows v = RowsOf(ctx, x.dims());
  const T* scale = Param<T>(ctx, "layer_norm_grad", "Scale", v.n);
  const Tensor& mean_t = ctx.Input("Mean");
  const Tensor& var_t = ctx.Input("Variance");
  for (const Tensor* t : {&mean_t, &var_t})
    FL_ENFORCE(t->numel() == v.rows, "layer_norm_grad: ", t == &mean_t ? "Mean" : "Variance", " '",
               ctx.InputName(t == &mean_t ? "Mean" : "Variance"), "' ", t->dims(), " must hold ", v.rows,
               " values for X ", x.dims());
  Tensor* dxt = ctx.OutputOrNull("X@GRAD");
  Tensor* dst = ctx.OutputOrNull("Scale@GRAD");
  Tensor* dbt = ctx.OutputOrNull("Bias@GRAD");
  T* dx = dxt ? dxt->mutable_data<T>(x.dims(), ctx.place()) : nullptr;
  T* dscale = dst ? dst->mutable_data<T>(DDim{v.n}, ctx.place()) : nullptr;
  T* dbias = dbt ? dbt->mutable_data<T>(DDim{v.n}, ctx.place()) : nullptr;
  if (v.n == 0) return;
  if (v.rows == 0) {
    cuda::nn::Zero(ctx, dscale, dscale ? v.n : 0);
    cuda::nn::Zero(ctx, dbias, dbias ? v.n : 0);
    return;
  }
  auto inv_buf = cuda::Scratch(ctx.place(), size_t(v.rows) * sizeof(T));
  T* inv = static_cast<T*>(inv_buf->ptr());
  cuda::Launch(ctx, v.rows, InvStd<T>, var_t.data<T>(), static_cast<T>(ctx.Attr<float>("epsilon")), inv);
  const T* mean = mean_t.data<T>();
  if (dx) {
    LayerNormDataGrad<T><<<unsigned(v.rows), ThreadsFor(v.n), 0, cuda::Stream(ctx)>>>(x.data<T>(), dy.data<T>(), scale,
                                                                                      mean, inv, v.n, dx);
    cuda::CheckLaunch(ctx.Type().c_str());
  }
  if (dscale || dbias) {
    // Enough parts to give about 64K threads, each at least 16 rows.
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>((65536 + v.n - 1) / v.n, (v.rows + 15) / 16));
    auto part_buf = cuda::Scratch(ctx.place(), size_t(2 * parts * v.n) * sizeof(double));
    double* ps = static_cast<double*>(part_buf->ptr());
    double* pb = ps + parts * v.n;
    cuda::Launch(ctx, parts * v.n, ParamGradParts<T>, x.data<T>(), dy.data<T>(), mean, static_cast<const T*>(inv),
                 v.rows, v.n, parts, ps, pb);
    cuda::Launch(ctx, v.n, ParamGradSum<T>, static_cast<const double*>(ps), static_cast<const double*>(pb), parts,
                 dscale, dbias);
  }
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(layer_norm) { ops.Kernel<float, double>(kLayerNorm); }
FL_REGISTER_CUDA_KERNELS(layer_norm_grad) { ops.Kernel<float, double>(kLayerNormGrad); }

}  // namespace fl
