// slice's plan (kernels/slice.cc, kernels/cuda/tensor_ops.cu): the box of Input it selects under Fluid's clamping
// rules, from the attributes or, at run time, from the bounds tensors (read on the host; a bound on a GPU is copied
// to the host first).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "concat_split.h"
#include "op_context.h"

namespace fl {

struct SlicePlan {
  DDim box;                    // the sliced region's dims, same rank as Input
  std::vector<int64_t> start;  // its offset in Input, per dim
  DDim out;                    // box with decrease_axis removed
  bool slices_rows = false;    // dim 0 is among the axes (Out then has other rows than Input)
};

// `unknown` (when not null) marks the axes whose bounds are known only at run time: their size is -1.
inline SlicePlan MakeSlicePlan(const DDim& in, const std::vector<int32_t>& axes, const std::vector<int32_t>& starts,
                               const std::vector<int32_t>& ends, const std::vector<int32_t>& decrease,
                               const std::string& op, const std::string& indesc,
                               const std::vector<bool>* unknown = nullptr) {
  const auto list = [](const std::vector<int32_t>& v) { return DDim(std::vector<int64_t>(v.begin(), v.end())); };
  FL_ENFORCE(starts.size() == axes.size() && ends.size() == axes.size(), op, ": axes ", list(axes), ", starts ",
             list(starts), " and ends ", list(ends), " must have the same length");
  SlicePlan p;
  p.box = in;
  p.start.assign(in.size(), 0);
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = NormalizeAxis(axes[i], in.size(), op, Str(indesc, " (axes ", list(axes), ")"));
    FL_ENFORCE(!seen[a], op, ": axes ", list(axes), " names axis ", a, " twice");
    seen[a] = true;
    p.slices_rows |= a == 0;
    const int64_t dim = in[a];
    if (dim < 0 || (unknown && (*unknown)[i])) {
      p.box[a] = -1;  // unknown until run time
      continue;
    }
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    s = std::min(std::max<int64_t>(s, 0), dim);
    e = std::min(std::max<int64_t>(e, 0), dim);
    FL_ENFORCE(e > s, op, ": ", indesc, " axis ", a, " with start ", starts[i], " and end ", ends[i],
               " selects nothing (clamped to [", s, ", ", e, "))");
    p.box[a] = e - s;
    p.start[a] = s;
  }
  std::vector<bool> drop(in.size(), false);
  for (int32_t d : decrease) {
    const int a = NormalizeAxis(d, in.size(), op, Str(indesc, " (decrease_axis ", list(decrease), ")"));
    FL_ENFORCE(p.box[a] == 1 || p.box[a] < 0, op, ": decrease_axis ", list(decrease), " drops axis ", a, " of ", indesc,
               " but the slice has size ", p.box[a], " there (must be 1)");
    drop[a] = true;
  }
  for (int i = 0; i < in.size(); ++i)
    if (!drop[i]) p.out.push_back(p.box[i]);
  if (p.out.size() == 0) p.out.push_back(1);  // Fluid keeps a [1] when every axis is dropped
  return p;
}

// Run time: this run's starts (or ends): the values of `tensor`, else of the 1-element tensors of `list`, else the
// attribute.
inline std::vector<int32_t> SliceRunBounds(const ExecutionContext& ctx, const char* attr, const char* tensor,
                                           const char* list) {
  std::vector<int32_t> v;
  const auto read = [&](const Tensor& device_or_host, const char* slot, int i) {
    Tensor host;  // a bound on a GPU (the CUDA kernel's inputs) is read from a host copy: a size the host needs
    if (!device_or_host.place().is_cpu()) TensorCopy(device_or_host, Place::CPU(), &host);
    const Tensor& t = device_or_host.place().is_cpu() ? device_or_host : host;
    FL_ENFORCE(t.dtype() == DType::INT32 || t.dtype() == DType::INT64, ctx.Type(), ": ", slot, " '",
               ctx.InputName(slot, i), "' must be int32 or int64, got ", DTypeName(t.dtype()));
    for (int64_t k = 0; k < t.numel(); ++k) {
      const int64_t x = t.dtype() == DType::INT32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k];
      v.push_back(static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(x, INT32_MIN), INT32_MAX)));
    }
  };
  if (ctx.HasInput(tensor)) {
    read(ctx.Input(tensor), tensor, 0);
  } else if (ctx.HasInput(list)) {
    for (int i = 0; i < ctx.InputSize(list); ++i) {
      const Tensor& t = ctx.Input(list, i);
      FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", list, " '", ctx.InputName(list, i), "' must have 1 element, got ",
                 t.dims());
      read(t, list, i);
    }
  } else {
    v = ctx.Attr<std::vector<int32_t>>(attr);
  }
  return v;
}

inline SlicePlan SliceKernelPlan(const ExecutionContext& ctx, const DDim& in) {
  return MakeSlicePlan(
      in, ctx.Attr<std::vector<int32_t>>("axes"), SliceRunBounds(ctx, "starts", "StartsTensor", "StartsTensorList"),
      SliceRunBounds(ctx, "ends", "EndsTensor", "EndsTensorList"), ctx.Attr<std::vector<int32_t>>("decrease_axis"),
      ctx.Type(), Str("Input '", ctx.InputName("Input"), "' ", in));
}

}  // namespace fl
