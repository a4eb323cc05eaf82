// CUDA kernels of softmax (+grad, kernels/softmax.cc) and softmax_with_cross_entropy (+grad,
// kernels/cross_entropy.cc), over the CPU's [outer, axis, inner] view of the class axis.
//
// The class axis last (inner == 1, the usual case): one block per row (32 threads for rows up to 512 classes, else
// 256), block reductions for the max, the sum of exp and the loss terms. Otherwise one thread per (outer, inner)
// position walks its strided row (neighbouring threads read neighbouring elements). The math is the CPU's:
// y = exp(x - max) * (1 / sum) with helpers/vec_exp.h's VecExp (expf / exp on the device), the hard loss
// log(sum) - (x[label] - max), the soft loss (max + log(sum)) * sum(label) - sum(label * x). numeric_stable_mode is
// accepted and always stable, as on the CPU. A hard label out of range (and not ignore_index) raises through the
// device error sink; its loss and gradient are then left as if it were ignored.
#include <limits>

#include "../helpers/reduce.h"
#include "../helpers/vec_exp.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

enum class Loss { kNone, kHard, kSoft };

template <typename T>
struct LossArgs {
  const int64_t* hard = nullptr;  // kHard: one class id per position
  const T* soft = nullptr;        // kSoft: a distribution, Logits' shape
  T* loss = nullptr;              // one per position
  int64_t ignore = -100;
  DeviceErrorSink err{};
};

template <typename T>
__device__ T Lowest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}

// Rows of n contiguous classes, one block each.
template <Loss L, typename T>
__global__ void SoftmaxRowsKernel(int64_t rows, int64_t n, const T* x, T* y, LossArgs<T> a) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    T m = Lowest<T>();
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = xr[c] > m ? xr[c] : m;
    m = BlockMax(m);
    T s = T(0);
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
      const T e = VecExp(xr[c] - m);
      yr[c] = e;
      s += e;
    }
    s = BlockSum(s);
    const T inv = T(1) / s;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) yr[c] *= inv;
    if constexpr (L == Loss::kSoft) {
      const T* lr = a.soft + row * n;
      T ls = T(0), lx = T(0);
      for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
        ls += lr[c];
        lx += lr[c] * xr[c];
      }
      ls = BlockSum(ls);
      lx = BlockSum(lx);
      if (threadIdx.x == 0) a.loss[row] = (m + log(s)) * ls - lx;
    } else if constexpr (L == Loss::kHard) {
      if (threadIdx.x == 0) {
        const int64_t l = a.hard[row];
        T v = T(0);
        if (l != a.ignore) {
          if (l < 0 || l >= n) RaiseDeviceError(a.err, row, l, n);
          else v = log(s) - (xr[l] - m);
        }
        a.loss[row] = v;
      }
    }
  }
}

// One thread per (outer, inner) position; its classes are `inner` apart.
template <Loss L, typename T>
__global__ void SoftmaxStridedKernel(int64_t positions, int64_t n, int64_t inner, const T* x, T* y, LossArgs<T> a) {
  FL_CUDA_LOOP(p, positions) {
    const int64_t o = p / inner, i = p - o * inner;
    const int64_t base = o * n * inner + i;
    const T* xr = x + base;
    T* yr = y + base;
    T m = Lowest<T>();
    for (int64_t c = 0; c < n; ++c) m = xr[c * inner] > m ? xr[c * inner] : m;
    T s = T(0);
    for (int64_t c = 0; c < n; ++c) {
      const T e = VecExp(xr[c * inner] - m);
      yr[c * inner] = e;
      s += e;
    }
    const T inv = T(1) / s;
    for (int64_t c = 0; c < n; ++c) yr[c * inner] *= inv;
    if constexpr (L == Loss::kSoft) {
      const T* lr = a.soft + base;
      T ls = T(0), lx = T(0);
      for (int64_t c = 0; c < n; ++c) {
        ls += lr[c * inner];
        lx += lr[c * inner] * xr[c * inner];
      }
      a.loss[p] = (m + log(s)) * ls - lx;
    } else if constexpr (L == Loss::kHard) {
      const int64_t l = a.hard[p];
      T v = T(0);
      if (l != a.ignore) {
        if (l < 0 || l >= n) RaiseDeviceError(a.err, p, l, n);
        else v = log(s) - (xr[l * inner] - m);
      }
      a.loss[p] = v;
    }
  }
}

template <Loss L, typename T>
void LaunchSoftmax(const ExecutionContext& ctx, const AxisView& v, const T* x, T* y, const LossArgs<T>& a) {
  const int64_t positions = v.outer * v.inner;
  if (positions == 0 || v.axis == 0) return;
  if (v.inner == 1) {
    const int device = ctx.place().device;
    const int threads = v.axis <= 512 ? 32 : kThreads;
    const int64_t blocks = std::min<int64_t>(positions, int64_t(MultiprocessorCount(device)) * 64);
    SoftmaxRowsKernel<L, T><<<static_cast<int>(blocks), threads, 0, Stream(device)>>>(positions, v.axis, x, y, a);
    CheckLaunch(ctx.Type().c_str());
  } else {
    Launch(ctx, positions, SoftmaxStridedKernel<L, T>, v.axis, v.inner, x, y, a);
  }
}

// ------------------------------------------------------------------ softmax_grad: g = y * dy - y * sum(y * dy)

template <typename T>
__global__ void SoftmaxGradRowsKernel(int64_t rows, int64_t n, const T* y, const T* dy, T* g) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* yr = y + row * n;
    const T* dr = dy + row * n;
    T dot = T(0);
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) dot += yr[c] * dr[c];
    dot = BlockSum(dot);
    T* gr = g + row * n;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) gr[c] = yr[c] * dr[c] - yr[c] * dot;
  }
}
template <typename T>
__global__ void SoftmaxGradStridedKernel(int64_t positions, int64_t n, int64_t inner, const T* y, const T* dy, T* g) {
  FL_CUDA_LOOP(p, positions) {
    const int64_t o = p / inner, i = p - o * inner;
    const int64_t base = o * n * inner + i;
    T dot = T(0);
    for (int64_t c = 0; c < n; ++c) dot += y[base + c * inner] * dy[base + c * inner];
    for (int64_t c = 0; c < n; ++c) {
      const int64_t k = base + c * inner;
      g[k] = y[k] * dy[k] - y[k] * dot;
    }
  }
}

// ------------------------------------------------------------------ softmax_with_cross_entropy_grad

template <typename T>
__global__ void CrossEntropyGradKernel(int64_t total, int64_t n, int64_t inner, const T* sm, const T* dl,
                                       const int64_t* hard, const T* soft, int64_t ignore, DeviceErrorSink err, T* g) {
  FL_CUDA_LOOP(k, total) {
    const int64_t i = k % inner, oc = k / inner, c = oc % n, o = oc / n;
    const int64_t p = o * inner + i;
    if (soft) {
      g[k] = (sm[k] - soft[k]) * dl[p];
      continue;
    }
    const int64_t l = hard[p];
    if (l == ignore) {
      g[k] = T(0);
    } else if (l < 0 || l >= n) {
      if (c == 0) RaiseDeviceError(err, p, l, n);
      g[k] = T(0);
    } else {
      g[k] = c == l ? sm[k] * dl[p] - dl[p] : sm[k] * dl[p];
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(softmax) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const fl::Tensor& x = ctx.Input("X");
    const fl::AxisView v = fl::ViewAroundAxis(x.dims(), ctx.Attr<int32_t>("axis"));
    fl::cuda::LaunchSoftmax<fl::cuda::Loss::kNone, T>(ctx, v, x.data<T>(), ctx.Alloc<T>("Out"), {});
  });
}

FL_REGISTER_CUDA_KERNELS(softmax_grad) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::Tensor* dx = ctx.OutputOrNull("X@GRAD");
    if (!dx) return;
    const fl::Tensor& out = ctx.Input("Out");
    const fl::Tensor& dout = ctx.Input("Out@GRAD");
    FL_ENFORCE(out.dims() == dout.dims(), "softmax_grad: Out ", out.dims(), " and Out@GRAD ", dout.dims(), " differ");
    const fl::AxisView v = fl::ViewAroundAxis(out.dims(), ctx.Attr<int32_t>("axis"));
    const T* y = out.data<T>();
    const T* dy = dout.data<T>();
    T* g = dx->mutable_data<T>(ctx.place());
    const int64_t positions = v.outer * v.inner;
    if (positions == 0 || v.axis == 0) return;
    if (v.inner == 1) {
      const int device = ctx.place().device;
      const int threads = v.axis <= 512 ? 32 : fl::cuda::kThreads;
      const int64_t blocks = std::min<int64_t>(positions, int64_t(fl::cuda::MultiprocessorCount(device)) * 64);
      fl::cuda::SoftmaxGradRowsKernel<T>
          <<<static_cast<int>(blocks), threads, 0, fl::cuda::Stream(device)>>>(positions, v.axis, y, dy, g);
      fl::cuda::CheckLaunch(ctx.Type().c_str());
    } else {
      fl::cuda::Launch(ctx, positions, fl::cuda::SoftmaxGradStridedKernel<T>, v.axis, v.inner, y, dy, g);
    }
  });
}

FL_REGISTER_CUDA_KERNELS(softmax_with_cross_entropy) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    using fl::cuda::Loss;
    const fl::Tensor& logits = ctx.Input("Logits");
    const fl::AxisView v = fl::ViewAroundAxis(logits.dims(), ctx.Attr<int32_t>("axis"));
    const T* x = logits.data<T>();
    T* sm = ctx.Alloc<T>("Softmax");
    fl::cuda::LossArgs<T> a;
    a.loss = ctx.Alloc<T>("Loss");
    if (ctx.Attr<bool>("soft_label")) {
      a.soft = ctx.Input("Label").data<T>();
      fl::cuda::LaunchSoftmax<Loss::kSoft, T>(ctx, v, x, sm, a);
      return;
    }
    a.hard = ctx.Input("Label").data<int64_t>();
    a.ignore = ctx.Attr<int32_t>("ignore_index");
    a.err = fl::cuda::ErrorSink(ctx, "Label", "a class id of Label");
    fl::cuda::LaunchSoftmax<Loss::kHard, T>(ctx, v, x, sm, a);
  });
}

FL_REGISTER_CUDA_KERNELS(softmax_with_cross_entropy_grad) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::Tensor* dx = ctx.OutputOrNull("Logits@GRAD");
    if (!dx) return;
    const fl::Tensor& softmax = ctx.Input("Softmax");
    const fl::AxisView v = fl::ViewAroundAxis(softmax.dims(), ctx.Attr<int32_t>("axis"));
    const fl::Tensor& dloss_t = ctx.Input("Loss@GRAD");
    FL_ENFORCE(dloss_t.numel() == v.outer * v.inner, "softmax_with_cross_entropy_grad: Loss@GRAD ", dloss_t.dims(),
               " does not match Softmax ", softmax.dims());
    const T* sm = softmax.data<T>();
    const T* dl = dloss_t.data<T>();
    T* g = dx->mutable_data<T>(ctx.place());
    const bool soft = ctx.Attr<bool>("soft_label");
    const T* soft_label = soft ? ctx.Input("Label").data<T>() : nullptr;
    const int64_t* hard = soft ? nullptr : ctx.Input("Label").data<int64_t>();
    const fl::cuda::DeviceErrorSink err =
        soft ? fl::cuda::DeviceErrorSink{} : fl::cuda::ErrorSink(ctx, "Label", "a class id of Label");
    fl::cuda::Launch(ctx, softmax.numel(), fl::cuda::CrossEntropyGradKernel<T>, v.axis, v.inner, sm, dl, hard,
                     soft_label, static_cast<int64_t>(ctx.Attr<int32_t>("ignore_index")), err, g);
  });
}
