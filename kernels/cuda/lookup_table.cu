// CUDA kernels of lookup_table / lookup_table_v2 and their dense gradient (kernels/lookup_table.cc defines them):
// one thread per output element gathers W[id, j] (padding_idx rows are zeros); the gradient zeroes W@GRAD and
// atomically adds each Out@GRAD element into its id's row (atomicAdd on float and double, sm_60+), so repeated ids
// add up in an unspecified order. An id outside [0, vocab) (and not padding_idx) raises through the device error
// sink, its row left zero. is_sparse=True (a SelectedRows W@GRAD) raises on the GPU: the optimizers' CUDA kernels
// take dense gradients only.
#include <limits>

#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

constexpr int64_t kNoSkip = std::numeric_limits<int64_t>::min();  // helpers/rows.h's: no padding id

int64_t SkipId(const ExecutionContext& ctx) {
  const int64_t pad = ctx.Attr<int64_t>("padding_idx");
  return pad == -1 ? kNoSkip : pad;
}

template <typename T>
__global__ void GatherKernel(int64_t n, const T* w, const int64_t* ids, int64_t rows, int64_t width, int64_t skip,
                             DeviceErrorSink err, T* out) {
  FL_CUDA_LOOP(k, n) {
    const int64_t i = k / width, j = k - i * width;
    const int64_t id = ids[i];
    T v = T(0);
    if (id != skip) {
      if (id >= 0 && id < rows) v = w[id * width + j];
      else if (j == 0) RaiseDeviceError(err, i, id, rows);
    }
    out[k] = v;
  }
}

template <typename T>
__global__ void ScatterAddKernel(int64_t n, const T* g, const int64_t* ids, int64_t rows, int64_t width, int64_t skip,
                                 DeviceErrorSink err, T* dw) {
  FL_CUDA_LOOP(k, n) {
    const int64_t i = k / width, j = k - i * width;
    const int64_t id = ids[i];
    if (id == skip) continue;
    if (id >= 0 && id < rows) atomicAdd(dw + id * width + j, g[k]);
    else if (j == 0) RaiseDeviceError(err, i, id, rows);
  }
}

template <typename T>
void Lookup(const ExecutionContext& ctx) {
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  Tensor* out = ctx.Output("Out");
  const int64_t n = ids.numel(), rows = w.dims()[0], width = w.dims()[1];
  T* o = out->mutable_data<T>(ctx.place());
  Launch(ctx, n * width, GatherKernel<T>, w.data<T>(), ids.data<int64_t>(), rows, width, SkipId(ctx),
         ErrorSink(ctx, "Ids", "an id of Ids"), o);
}

template <typename T>
void LookupGrad(const ExecutionContext& ctx) {
  if (!ctx.HasOutput("W@GRAD")) return;
  FL_ENFORCE(!ctx.Attr<bool>("is_sparse"), ctx.Type(), ": is_sparse=True (a SelectedRows W@GRAD) is not supported on ",
             ctx.place().ToString(), "; use is_sparse=False or run on CPUPlace");
  Tensor* dw = ctx.OutputOrNull("W@GRAD");
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int64_t n = ids.numel(), rows = w.dims()[0], width = w.dims()[1];
  FL_ENFORCE(dout.numel() == n * width, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match Ids ", ids.dims(), " x width ", width);
  dw->Resize(w.dims());
  T* d = dw->mutable_data<T>(ctx.place());
  if (w.numel() > 0) FL_CUDA_CHECK(cudaMemsetAsync(d, 0, w.numel() * sizeof(T), Stream(ctx)));
  Launch(ctx, n * width, ScatterAddKernel<T>, dout.data<T>(), ids.data<int64_t>(), rows, width, SkipId(ctx),
         ErrorSink(ctx, "Ids", "an id of Ids"), d);
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(lookup_table) {
  ops.Kernel<float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::Lookup<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(lookup_table_v2) {
  ops.Kernel<float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::Lookup<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(lookup_table_grad) {
  ops.Kernel<float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::LookupGrad<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(lookup_table_v2_grad) {
  ops.Kernel<float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::LookupGrad<typename decltype(tag)::type>(ctx); });
}
