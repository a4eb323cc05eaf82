// sequence_pool and sequence_conv (+grads) on the GPU, as their CPU kernels (kernels/sequence_pool.cc,
// kernels/sequence_conv.cc; attributes from kernels/helpers/sequence_attrs.h). The last LoD level's offsets (host
// vectors) go to device scratch with one (pinned, asynchronous) copy per call; a kernel finds a row's sequence by
// binary search in them.
//
// sequence_pool: one thread per output element walks its sequence's rows (MAX records the first maximum's row in
// MaxIndex); the gradient is one thread per X@GRAD element. sequence_conv: the context matrix [T, contextLength * D]
// is built by one kernel and multiplied with one GEMM, as on the CPU; X@GRAD and PaddingData@GRAD gather the entries
// of dCol = Out@GRAD @ Filter^T they fed, in the CPU kernel's order (no atomics).
#include <limits>

#include "../helpers/lod.h"
#include "../helpers/sequence_attrs.h"
#include "nn_common.cuh"

namespace fl {
namespace {

using seq::PoolType;
static_assert(sizeof(size_t) == sizeof(uint64_t), "LoD offsets are copied as 64-bit values");

// The offsets on the device (valid while the holder lives; stream order makes dropping it after the launches safe).
const uint64_t* DeviceOffsets(const ExecutionContext& ctx, const std::vector<size_t>& offsets,
                              std::shared_ptr<Allocation>* holder) {
  *holder = cuda::nn::ToDevice(ctx, offsets.data(), offsets.size());
  return static_cast<const uint64_t*>((*holder)->ptr());
}

// The sequence s (of `count`) with off[s] <= row < off[s + 1]: the last s with off[s] <= row.
__device__ inline int64_t SequenceOf(const uint64_t* off, int64_t count, int64_t row) {
  int64_t lo = 0, hi = count;  // off[lo] <= row; answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (off[mid] <= uint64_t(row)) lo = mid;
    else hi = mid;
  }
  return lo;
}

// ------------------------------------------------------------------ sequence_pool

template <typename T>
__global__ void SequencePoolForward(int64_t total, const T* x, const uint64_t* off, int64_t w, PoolType type, T pad,
                                    T* out, int32_t* index) {
  FL_CUDA_LOOP(i, total) {  // i over sequences * w
    const int64_t s = i / w, k = i % w;
    const int64_t begin = int64_t(off[s]), len = int64_t(off[s + 1]) - begin;
    if (len == 0) {
      out[i] = pad;
      if (index) index[i] = -1;
      continue;
    }
    const T* xs = x + begin * w + k;
    T r;
    if (type == PoolType::kFirst) {
      r = xs[0];
    } else if (type == PoolType::kLast) {
      r = xs[(len - 1) * w];
    } else if (type == PoolType::kMax) {
      r = xs[0];
      int64_t at = begin;
      for (int64_t t = 1; t < len; ++t) {
        const T v = xs[t * w];
        if (v > r) r = v, at = begin + t;
      }
      if (index) index[i] = static_cast<int32_t>(at);
    } else {
      r = xs[0];
      for (int64_t t = 1; t < len; ++t) r += xs[t * w];
      const T scale = type == PoolType::kAverage ? T(1) / static_cast<T>(len)
                      : type == PoolType::kSqrt  ? T(1) / sqrt(static_cast<T>(len))
                                                 : T(1);
      if (scale != T(1)) r *= scale;
    }
    out[i] = r;
  }
}

template <typename T>
__global__ void SequencePoolBackward(int64_t total, const T* g, const int32_t* index, const uint64_t* off,
                                     int64_t sequences, int64_t w, PoolType type, cuda::DeviceErrorSink err, T* dx) {
  FL_CUDA_LOOP(i, total) {  // i over rows * w
    const int64_t t = i / w, k = i % w;
    const int64_t s = SequenceOf(off, sequences, t);
    const int64_t begin = int64_t(off[s]), len = int64_t(off[s + 1]) - begin;
    const T gv = g[s * w + k];
    T v = T(0);
    if (type == PoolType::kFirst) {
      v = t == begin ? gv : T(0);
    } else if (type == PoolType::kLast) {
      v = t == begin + len - 1 ? gv : T(0);
    } else if (type == PoolType::kMax) {
      const int64_t at = index[s * w + k];
      if (t == begin && (at < begin || at >= begin + len)) cuda::RaiseDeviceError(err, s * w + k, at - begin, len);
      v = at == t ? gv : T(0);
    } else {
      const T scale = type == PoolType::kAverage ? T(1) / static_cast<T>(len)
                      : type == PoolType::kSqrt  ? T(1) / sqrt(static_cast<T>(len))
                                                 : T(1);
      v = gv * scale;
    }
    dx[i] = v;
  }
}

const auto kSequencePool = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const LoD& lod = CheckedLoD(ctx, "X");
  const std::vector<size_t>& offsets = lod.back();
  const PoolType type = seq::GetPoolType(ctx);
  const int64_t sequences = SequenceCount(offsets), rows = x.dims()[0], w = x.dims().Product(1, x.rank());
  DDim out_dims = x.dims();
  out_dims[0] = sequences;
  Tensor* out = ctx.Output("Out");
  out->Resize(out_dims);
  out->set_lod(DropLastLevel(lod));
  T* o = out->mutable_data<T>(ctx.place());
  int32_t* index = nullptr;
  if (type == PoolType::kMax && !ctx.Attr<bool>("is_test")) {
    FL_ENFORCE(rows <= std::numeric_limits<int32_t>::max(), "sequence_pool: X '", ctx.InputName("X"), "' ", x.dims(),
               " has more rows than MAX pooling's int32 MaxIndex can address");
    Tensor* mi = ctx.Output("MaxIndex");
    mi->Resize(out_dims);
    mi->set_lod(out->lod());
    index = mi->mutable_data<int32_t>(ctx.place());
  }
  if (sequences <= 0 || w == 0) return;
  std::shared_ptr<Allocation> off_buf;
  const uint64_t* off = DeviceOffsets(ctx, offsets, &off_buf);
  cuda::Launch(ctx, sequences * w, SequencePoolForward<T>, x.data<T>(), off, w, type,
               static_cast<T>(ctx.Attr<float>("pad_value")), o, index);
};

const auto kSequencePoolGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const seq::PoolGradArgs<T> args(ctx, dx);
  const Tensor &x = args.x, &dout = args.dout;
  const std::vector<size_t>& offsets = args.offsets;
  const seq::PoolType type = args.type;
  const int64_t sequences = args.sequences, w = args.w;
  const int32_t* index = args.index;
  T* d = args.d;
  const int64_t rows = x.dims()[0];
  if (rows == 0 || w == 0) return;
  std::shared_ptr<Allocation> off_buf;
  const uint64_t* off = DeviceOffsets(ctx, offsets, &off_buf);
  const cuda::DeviceErrorSink err =
      cuda::ErrorSink(ctx, "MaxIndex", "an entry of MaxIndex (a row offset within its sequence)");
  cuda::Launch(ctx, rows * w, SequencePoolBackward<T>, dout.data<T>(), index, off, sequences, w, type, err, d);
};

// ------------------------------------------------------------------ sequence_conv

struct Window {
  int64_t start, length, up_pad;
};

// col[t, j * D + i]: context row t + start + j of t's sequence, or a PaddingData row (zeros without it).
template <typename T>
__global__ void BuildContext(int64_t total, const T* x, const T* pad, const uint64_t* off, int64_t sequences, Window c,
                             int64_t d, T* col) {
  const int64_t k = c.length * d;
  FL_CUDA_LOOP(e, total) {  // e over T * k
    const int64_t t = e / k, j = (e % k) / d, i = e % d;
    const int64_t s = SequenceOf(off, sequences, t);
    const int64_t begin = int64_t(off[s]), len = int64_t(off[s + 1]) - begin;
    const int64_t rr = t - begin + c.start + j;  // the context row, relative to the sequence
    T v = T(0);
    if (rr >= 0 && rr < len) v = x[(begin + rr) * d + i];
    else if (pad) v = pad[(rr < 0 ? c.up_pad + rr : c.up_pad + rr - len) * d + i];
    col[e] = v;
  }
}

// X@GRAD[t, i] = sum of dcol[t', j * D + i] over the rows t' of t's sequence whose slot j read row t.
template <typename T>
__global__ void ContextDataGrad(int64_t total, const T* dcol, const uint64_t* off, int64_t sequences, Window c,
                                int64_t d, T* dx) {
  const int64_t k = c.length * d;
  FL_CUDA_LOOP(e, total) {  // e over T * D
    const int64_t t = e / d, i = e % d;
    const int64_t s = SequenceOf(off, sequences, t);
    const int64_t begin = int64_t(off[s]), len = int64_t(off[s + 1]) - begin;
    T sum = T(0);
    for (int64_t j = c.length - 1; j >= 0; --j) {  // rows t' ascending, as the CPU kernel adds them
      const int64_t tp = t - begin - c.start - j;
      if (tp >= 0 && tp < len) sum += dcol[(begin + tp) * k + j * d + i];
    }
    dx[e] = sum;
  }
}

// PaddingData@GRAD[p, i]: for every sequence and slot j, the row of that sequence whose slot j read padding row p.
template <typename T>
__global__ void ContextPadGrad(int64_t total, const T* dcol, const uint64_t* off, int64_t sequences, Window c,
                               int64_t d, T* dpad) {
  const int64_t k = c.length * d;
  FL_CUDA_LOOP(e, total) {  // e over (up_pad + down_pad) * D
    const int64_t p = e / d, i = e % d;
    T sum = T(0);
    for (int64_t s = 0; s < sequences; ++s) {
      const int64_t begin = int64_t(off[s]), len = int64_t(off[s + 1]) - begin;
      const int64_t rr = p < c.up_pad ? p - c.up_pad : p - c.up_pad + len;  // the context row padding row p stands for
      for (int64_t j = c.length - 1; j >= 0; --j) {
        const int64_t tp = rr - c.start - j;
        if (tp >= 0 && tp < len) sum += dcol[(begin + tp) * k + j * d + i];
      }
    }
    dpad[e] = sum;
  }
}

Window WindowOf(const seq::Context& c) { return {c.start, c.length, c.up_pad}; }

const auto kSequenceConv = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const seq::Context c(ctx);
  const Tensor& x = ctx.Input("X");
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
  const Tensor& filter = ctx.Input("Filter");
  const Tensor* pad = c.trainable ? &ctx.Input("PaddingData") : nullptr;
  const int64_t rows = x.dims()[0], d = x.dims()[1], m = filter.dims()[1], k = c.length * d;
  T* out = ctx.Alloc<T>("Out");
  if (rows == 0 || m == 0) return;
  std::shared_ptr<Allocation> off_buf;
  const uint64_t* off = DeviceOffsets(ctx, offsets, &off_buf);
  auto col_buf = cuda::Scratch(ctx.place(), size_t(rows * k) * sizeof(T));
  T* col = static_cast<T*>(col_buf->ptr());
  cuda::Launch(ctx, rows * k, BuildContext<T>, x.data<T>(), pad ? pad->data<T>() : nullptr, off, SequenceCount(offsets),
               WindowOf(c), d, col);
  cuda::nn::Gemm<T>(ctx, false, false, rows, m, k, T(1), col, filter.data<T>(), T(0), out);
};

const auto kSequenceConvGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const seq::Context c(ctx);
  const Tensor& x = ctx.Input("X");
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
  const Tensor& filter = ctx.Input("Filter");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  Tensor* dfilter = ctx.OutputOrNull("Filter@GRAD");
  Tensor* dpad = ctx.OutputOrNull("PaddingData@GRAD");
  const int64_t rows = x.dims()[0], d = x.dims()[1], m = filter.dims()[1], k = c.length * d;
  const int64_t sequences = SequenceCount(offsets);
  const T* g = dout.data<T>();
  T* dpad_p = nullptr;
  if (dpad) {
    dpad->Resize(ctx.Input("PaddingData").dims());
    dpad_p = dpad->mutable_data<T>(ctx.place());
    if (!c.trainable || rows == 0) cuda::nn::Zero(ctx, dpad_p, dpad->numel());
  }
  T* dx_p = nullptr;
  if (dx) {
    dx->Resize(x.dims());
    dx_p = dx->mutable_data<T>(ctx.place());
  }
  T* dw_p = nullptr;
  if (dfilter) {
    dfilter->Resize(filter.dims());
    dw_p = dfilter->mutable_data<T>(ctx.place());
  }
  if (rows == 0) {
    if (dw_p) cuda::nn::Zero(ctx, dw_p, dfilter->numel());
    return;
  }
  std::shared_ptr<Allocation> off_buf;
  const uint64_t* off = DeviceOffsets(ctx, offsets, &off_buf);
  auto col_buf = cuda::Scratch(ctx.place(), size_t(rows * k) * sizeof(T));
  T* col = static_cast<T*>(col_buf->ptr());
  const Window win = WindowOf(c);
  if (dx_p || (dpad_p && c.trainable)) {
    cuda::nn::Gemm<T>(ctx, false, true, rows, k, m, T(1), g, filter.data<T>(), T(0), col);  // dCol
    if (dx_p) cuda::Launch(ctx, rows * d, ContextDataGrad<T>, static_cast<const T*>(col), off, sequences, win, d, dx_p);
    if (dpad_p && c.trainable)
      cuda::Launch(ctx, dpad->numel(), ContextPadGrad<T>, static_cast<const T*>(col), off, sequences, win, d, dpad_p);
  }
  if (dw_p) {
    const Tensor* pad = c.trainable ? &ctx.Input("PaddingData") : nullptr;
    cuda::Launch(ctx, rows * k, BuildContext<T>, x.data<T>(), pad ? pad->data<T>() : nullptr, off, sequences, win, d,
                 col);
    cuda::nn::Gemm<T>(ctx, true, false, k, m, rows, T(1), col, g, T(0), dw_p);
  }
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(sequence_pool) { ops.Kernel<float, double>(kSequencePool); }
FL_REGISTER_CUDA_KERNELS(sequence_pool_grad) { ops.Kernel<float, double>(kSequencePoolGrad); }
FL_REGISTER_CUDA_KERNELS(sequence_conv) { ops.Kernel<float, double>(kSequenceConv); }
FL_REGISTER_CUDA_KERNELS(sequence_conv_grad) { ops.Kernel<float, double>(kSequenceConvGrad); }

}  // namespace fl
