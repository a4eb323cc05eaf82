// CUDA kernels of the data-movement ops: concat (+grad), split (its gradient is concat), slice (+grad), transpose2
// (its gradient is transpose2), reverse (its own gradient) and sequence_mask.
//
// concat / split are one strided 2-D copy per part (cudaMemcpy2DAsync on the op's stream) over the CPU's
// [outer, width] view (helpers/concat_split.h); slice uses the CPU's plan (helpers/slice_plan.h: bounds tensors are
// read through a host copy) and one thread per element of the box; transpose and reverse one thread per output
// element through a Strided map (helpers.cuh). reshape2 / squeeze2 / unsqueeze2 / flatten2 share buffers on every
// place (kernels/reshape.cc) and need nothing here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../helpers/concat_split.h"
#include "../helpers/int_scalar_input.h"
#include "../helpers/slice_plan.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

// ------------------------------------------------------------------ concat / split

// dst[outer, total] (bytes) <- the parts side by side; a null part writes zeros.
void ConcatPartsDevice(const ExecutionContext& ctx, const AxisParts& p, const std::vector<const void*>& parts,
                       void* dst) {
  int64_t total = 0;
  for (int64_t w : p.widths) total += w;
  char* d = static_cast<char*>(dst);
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t w = p.widths[i];
    if (w > 0 && p.outer > 0) {
      if (parts[i])
        FL_CUDA_CHECK(
            cudaMemcpy2DAsync(d + off, total, parts[i], w, w, p.outer, cudaMemcpyDeviceToDevice, Stream(ctx)));
      else FL_CUDA_CHECK(cudaMemset2DAsync(d + off, total, 0, w, p.outer, Stream(ctx)));
    }
    off += w;
  }
}

// The inverse: part i <- its columns of src; null parts are skipped.
void SplitPartsDevice(const ExecutionContext& ctx, const AxisParts& p, const void* src,
                      const std::vector<void*>& parts) {
  int64_t total = 0;
  for (int64_t w : p.widths) total += w;
  const char* s = static_cast<const char*>(src);
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t w = p.widths[i];
    if (parts[i] && w > 0 && p.outer > 0)
      FL_CUDA_CHECK(cudaMemcpy2DAsync(parts[i], w, s + off, total, w, p.outer, cudaMemcpyDeviceToDevice, Stream(ctx)));
    off += w;
  }
}

std::vector<const Tensor*> Inputs(const ExecutionContext& ctx, const char* slot) {
  std::vector<const Tensor*> xs;
  for (int i = 0; i < ctx.InputSize(slot); ++i) xs.push_back(&ctx.Input(slot, i));
  return xs;
}
std::vector<int64_t> AxisSizes(const std::vector<const Tensor*>& xs, int axis) {
  std::vector<int64_t> sizes;
  for (const Tensor* t : xs) sizes.push_back(t->dims()[axis]);
  return sizes;
}

template <typename T>
void Concat(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = Inputs(ctx, "X");
  Tensor* out = ctx.Output("Out");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), out->rank(), "concat", "Out");
  std::vector<const void*> parts;
  for (const Tensor* t : xs) parts.push_back(t->data<T>());
  ConcatPartsDevice(ctx, MakeAxisParts(out->dims(), axis, AxisSizes(xs, axis), sizeof(T)), parts,
                    out->mutable_data<T>(ctx.place()));
}

template <typename T>
void ConcatGrad(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = Inputs(ctx, "X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), dout.rank(), "concat_grad", "Out@GRAD");
  std::vector<void*> parts(xs.size(), nullptr);
  const int ngrad = ctx.OutputSize("X@GRAD");
  for (int i = 0; i < ngrad && i < static_cast<int>(xs.size()); ++i) {
    if (Tensor* dx = ctx.OutputOrNull("X@GRAD", i)) {
      dx->Resize(xs[i]->dims());
      parts[i] = dx->mutable_data<T>(ctx.place());
    }
  }
  SplitPartsDevice(ctx, MakeAxisParts(dout.dims(), axis, AxisSizes(xs, axis), sizeof(T)), dout.data<T>(), parts);
}

// split: an output's size along the axis is its dims' (shape inference applied the CPU's section rule); an absent
// output (null) takes its size from `num` or `sections` (-1: what the others leave) and is skipped.
template <typename T>
void Split(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const std::vector<Tensor*> outs = ctx.MultiOutput("Out");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), x.rank(), "split", "X");
  const int64_t dim = x.dims()[axis];
  const int num = ctx.Attr<int32_t>("num");
  const auto& sections = ctx.Attr<std::vector<int32_t>>("sections");
  std::vector<int64_t> sizes(outs.size(), -1);
  std::vector<void*> parts(outs.size(), nullptr);
  int64_t known = 0;
  int unknown = -1;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i]) sizes[i] = outs[i]->dims()[axis];
    else if (num > 0) sizes[i] = dim / num;
    else if (i < sections.size() && sections[i] >= 0) sizes[i] = sections[i];
    if (sizes[i] >= 0) known += sizes[i];
    else unknown = static_cast<int>(i);
    if (outs[i]) parts[i] = outs[i]->mutable_data<T>(ctx.place());
  }
  if (unknown >= 0) {
    sizes[unknown] = dim - known;
    known = dim;
  }
  FL_ENFORCE(known == dim, "split: the parts' sizes along axis ", axis, " sum to ", known, " but X '",
             ctx.InputName("X"), "' ", x.dims(), " has ", dim);
  SplitPartsDevice(ctx, MakeAxisParts(x.dims(), axis, sizes, sizeof(T)), x.data<T>(), parts);
}

// ------------------------------------------------------------------ slice

// kToBox: box[k] = full[map(k)]; else full[map(k)] = box[k] (full zeroed before).
template <bool kToBox, typename T>
__global__ void BoxKernel(int64_t n, Strided map, int64_t base, const T* src, T* dst) {
  FL_CUDA_LOOP(k, n) {
    const int64_t o = base + map.Offset(k);
    if (kToBox) dst[k] = src[o];
    else dst[o] = src[k];
  }
}

// Box element k -> its offset in the full tensor (relative to the box's start).
Strided BoxMap(const DDim& full, const DDim& box, const std::vector<int64_t>& start, int64_t* base) {
  const std::vector<int64_t> strides = ContiguousStrides(full);
  *base = 0;
  for (int i = 0; i < full.size(); ++i) *base += start[i] * strides[i];
  return MakeStrided(box.ToVector(), &strides);
}

template <typename T>
void Slice(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const SlicePlan p = SliceKernelPlan(ctx, in.dims());
  Tensor* out = ctx.Output("Out");
  out->Resize(p.out);
  T* o = out->mutable_data<T>(ctx.place());
  int64_t base;
  const Strided map = BoxMap(in.dims(), p.box, p.start, &base);
  Launch(ctx, p.box.numel(), BoxKernel<true, T>, map, base, in.data<T>(), o);
}

template <typename T>
void SliceGrad(const ExecutionContext& ctx) {
  Tensor* din = ctx.OutputOrNull("Input@GRAD");
  if (!din) return;
  const Tensor& in = ctx.Input("Input");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const SlicePlan p = SliceKernelPlan(ctx, in.dims());
  FL_ENFORCE(dout.dims() == p.out, "slice_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match the slice ", p.out);
  din->Resize(in.dims());
  T* d = din->mutable_data<T>(ctx.place());
  if (in.numel() > 0) FL_CUDA_CHECK(cudaMemsetAsync(d, 0, in.numel() * sizeof(T), Stream(ctx)));
  int64_t base;
  const Strided map = BoxMap(in.dims(), p.box, p.start, &base);
  Launch(ctx, p.box.numel(), BoxKernel<false, T>, map, base, dout.data<T>(), d);
}

// ------------------------------------------------------------------ transpose2, reverse

// out[k] = x[base + map(k)]
template <typename T>
__global__ void GatherStridedKernel(int64_t n, Strided map, int64_t base, const T* x, T* out) {
  FL_CUDA_LOOP(k, n) { out[k] = x[base + map.Offset(k)]; }
}

template <typename T>
void Transpose2(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const auto& perm = ctx.Attr<std::vector<int32_t>>("axis");
  FL_ENFORCE(static_cast<int>(perm.size()) == x.rank(), ctx.Type(), ": axis has ", perm.size(), " entries for X '",
             ctx.InputName("X"), "' ", x.dims());
  const std::vector<int64_t> in_strides = ContiguousStrides(x.dims());
  std::vector<int64_t> dims, strides;
  for (int32_t a : perm) {
    FL_ENFORCE(a >= 0 && a < x.rank(), ctx.Type(), ": axis entry ", a, " is out of range for X ", x.dims());
    dims.push_back(x.dims()[a]);
    strides.push_back(in_strides[a]);
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim(dims));
  T* o = out->mutable_data<T>(ctx.place());
  Launch(ctx, x.numel(), GatherStridedKernel<T>, MakeStrided(dims, &strides), int64_t{0}, x.data<T>(), o);
}

template <typename T>
void Reverse(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const int rank = x.rank();
  std::vector<bool> flip(rank, false);
  for (int32_t a : ctx.Attr<std::vector<int32_t>>("axis")) flip[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> dims = x.dims().ToVector(), strides = ContiguousStrides(x.dims());
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    if (!flip[d] || dims[d] == 0) continue;
    base += (dims[d] - 1) * strides[d];  // out index i reads x index dims - 1 - i
    strides[d] = -strides[d];
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(x.dims());
  T* o = out->mutable_data<T>(ctx.place());
  Launch(ctx, x.numel(), GatherStridedKernel<T>, MakeStrided(dims, &strides), base, x.data<T>(), o);
}

// ------------------------------------------------------------------ sequence_mask

template <typename T>
struct LoadValue {
  const T* x;
  __device__ T operator()(int64_t i) const { return x[i]; }
};
template <typename T>
struct StoreValue {
  T* out;
  __device__ void operator()(int64_t, T v) const { *out = v; }
};

// The mask width: MaxLenTensor, else the maxlen attribute, else max(X) (reduced on the device, read by the host).
template <typename T>
int64_t MaskWidth(const ExecutionContext& ctx, const Tensor& x) {
  int64_t maxlen = ctx.Attr<int32_t>("maxlen");
  if (ctx.HasInput("MaxLenTensor")) {
    maxlen = ReadIntScalarInput(ctx, "MaxLenTensor");
    FL_ENFORCE(maxlen > 0, ctx.Type(), ": MaxLenTensor '", ctx.InputName("MaxLenTensor"), "' holds ", maxlen,
               "; the mask width must be > 0");
  }
  if (maxlen > 0) return maxlen;
  T largest = T(0);
  if (x.numel() > 0) {
    auto scratch = Scratch(ctx.place(), sizeof(T));
    T* d = static_cast<T*>(scratch->ptr());
    T lowest;
    if constexpr (std::numeric_limits<T>::has_infinity) lowest = -std::numeric_limits<T>::infinity();
    else lowest = std::numeric_limits<T>::lowest();
    LaunchReduce(ctx, MakeReduceIndex(x.dims(), std::vector<bool>(x.rank(), true)), lowest, LoadValue<T>{x.data<T>()},
                 MaxOp{}, StoreValue<T>{d});
    CopyToHost(ctx.place(), d, &largest, sizeof(T));
  }
  FL_ENFORCE(static_cast<double>(largest) <= std::numeric_limits<int32_t>::max(), ctx.Type(), ": the largest value ",
             static_cast<double>(largest), " of X '", ctx.InputName("X"), "' is not a valid mask width (maxlen = -1 ",
             "takes max(X)); give maxlen");
  return std::max<int64_t>(0, static_cast<int64_t>(largest));
}

template <typename T, typename O>
__global__ void SequenceMaskKernel(int64_t n, const T* x, int64_t width, O* y) {
  FL_CUDA_LOOP(k, n) {
    const int64_t i = k / width, j = k - i * width;
    const double v = static_cast<double>(x[i]);
    const int64_t ones = !(v > 0) ? 0 : v >= static_cast<double>(width) ? width : static_cast<int64_t>(ceil(v));
    y[k] = j < ones ? O(1) : O(0);
  }
}

template <typename T>
void SequenceMask(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const int64_t n = x.numel(), width = MaskWidth<T>(ctx, x);
  Tensor* y = ctx.Output("Y");
  DDim dims = x.dims();
  dims.push_back(width);
  y->Resize(dims);
  y->set_lod({});
  const T* xp = x.data<T>();
  VisitDType(static_cast<DType>(ctx.Attr<int32_t>("out_dtype")), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    O* yp = y->mutable_data<O>(ctx.place());
    Launch(ctx, n * width, SequenceMaskKernel<T, O>, xp, width, yp);
  });
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(concat) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Concat<typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(concat_grad) {
  ops.Kernel<float, double, int32_t, int64_t>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::ConcatGrad<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(split) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Split<typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(slice) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Slice<typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(slice_grad) {
  ops.Kernel<float, double, int32_t, int64_t>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::SliceGrad<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(transpose2) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Transpose2<typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(reverse) {
  ops.Kernel<float, double, int32_t, int64_t, uint8_t, bool>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::Reverse<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(sequence_mask) {
  ops.Kernel<int32_t, int64_t, float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::SequenceMask<typename decltype(tag)::type>(ctx); });
}
