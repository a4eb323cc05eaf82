// slice: Out = Input[starts:ends] along `axes`, with Fluid's clamping (negative bounds count from the end,
// then both are clamped to [0, dim]); decrease_axis drops those (size-1) axes. The grad writes Out@GRAD
// back into a zeroed Input@GRAD. As in Fluid 1.8, starts (ends) may instead come at run time from the 1-D int
// tensor StartsTensor (EndsTensor) or from StartsTensorList (EndsTensorList), one 1-element tensor per axis, in
// that order of precedence; infer_flags marks with -1 the axes whose size is then unknown at build time.
#include <cstring>

#include "grad_op_maker.h"
#include "helpers/slice_plan.h"

namespace fl {

namespace {

bool BoundsFromTensors(const InferShapeContext& ctx) {
  return ctx.HasInput("StartsTensor") || ctx.HasInput("EndsTensor") || ctx.HasInput("StartsTensorList") ||
         ctx.HasInput("EndsTensorList");
}

// Build time: the plan from the attributes, with the axes whose bounds come from tensors of unknown size.
SlicePlan InferPlan(const InferShapeContext& ctx) {
  const auto& axes = ctx.Attr<std::vector<int32_t>>("axes");
  const auto& flags = ctx.Attr<std::vector<int32_t>>("infer_flags");
  FL_ENFORCE(flags.empty() || flags.size() == axes.size(), ctx.Type(), ": infer_flags has ", flags.size(),
             " values for ", axes.size(), " axes");
  const bool whole = ctx.HasInput("StartsTensor") || ctx.HasInput("EndsTensor");
  std::vector<bool> unknown(axes.size());
  for (size_t i = 0; i < axes.size(); ++i)
    unknown[i] = whole || (flags.empty() ? BoundsFromTensors(ctx) : flags[i] == -1);
  std::vector<int32_t> starts = ctx.Attr<std::vector<int32_t>>("starts"), ends = ctx.Attr<std::vector<int32_t>>("ends");
  // a whole-tensor bound leaves the attribute unused (any length); a list's known entries are in the attribute
  if (ctx.HasInput("StartsTensor")) starts.assign(axes.size(), 0);
  if (ctx.HasInput("EndsTensor")) ends.assign(axes.size(), 1);
  if (ctx.HasInput("StartsTensorList"))
    FL_ENFORCE(ctx.InputSize("StartsTensorList") == static_cast<int>(axes.size()), ctx.Type(),
               ": StartsTensorList has ", ctx.InputSize("StartsTensorList"), " tensors for ", axes.size(), " axes");
  if (ctx.HasInput("EndsTensorList"))
    FL_ENFORCE(ctx.InputSize("EndsTensorList") == static_cast<int>(axes.size()), ctx.Type(), ": EndsTensorList has ",
               ctx.InputSize("EndsTensorList"), " tensors for ", axes.size(), " axes");
  return MakeSlicePlan(ctx.InputDim("Input"), axes, starts, ends, ctx.Attr<std::vector<int32_t>>("decrease_axis"),
                       ctx.Type(), ctx.Describe("Input"), &unknown);
}

// Copies the box [start, start + box) of a dense tensor of dims `full` to a dense box-shaped buffer
// (kToBox) or back. Trailing dims the box spans whole merge into one contiguous run per memcpy.
template <bool kToBox>
void BoxCopy(const DDim& full, const std::vector<int64_t>& start, const DDim& box, size_t elem, const char* src,
             char* dst) {
  const int rank = full.size();
  int k = rank - 1;
  while (k >= 0 && box[k] == full[k]) --k;
  if (k < 0) {
    std::memcpy(dst, src, static_cast<size_t>(full.numel()) * elem);
    return;
  }
  std::vector<int64_t> stride(rank);  // bytes
  int64_t s = static_cast<int64_t>(elem);
  for (int i = rank - 1; i >= 0; --i) {
    stride[i] = s;
    s *= full[i];
  }
  const int64_t run = box[k] * stride[k];
  int64_t off = 0;
  for (int i = 0; i <= k; ++i) off += start[i] * stride[i];
  const int64_t outer = box.Product(0, k);
  std::vector<int64_t> idx(k, 0);
  for (int64_t o = 0; o < outer; ++o) {
    if (kToBox) std::memcpy(dst + o * run, src + off, run);
    else std::memcpy(dst + off, src + o * run, run);
    for (int i = k - 1; i >= 0; --i) {  // odometer over the outer box dims
      off += stride[i];
      if (++idx[i] < box[i]) break;
      off -= box[i] * stride[i];
      idx[i] = 0;
    }
  }
}

const auto kSlice = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& in = ctx.Input("Input");
  const SlicePlan p = SliceKernelPlan(ctx, in.dims());
  Tensor* out = ctx.Output("Out");
  out->Resize(p.out);
  BoxCopy<true>(in.dims(), p.start, p.box, sizeof(T), reinterpret_cast<const char*>(in.data<T>()),
                reinterpret_cast<char*>(out->mutable_data<T>(ctx.place())));
};

const auto kSliceGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* din = ctx.OutputOrNull("Input@GRAD");
  if (!din) return;
  const Tensor& in = ctx.Input("Input");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const SlicePlan p = SliceKernelPlan(ctx, in.dims());
  FL_ENFORCE(dout.dims() == p.out, "slice_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match the slice ", p.out);
  din->Resize(in.dims());
  char* d = reinterpret_cast<char*>(din->mutable_data<T>(ctx.place()));
  std::memset(d, 0, static_cast<size_t>(in.numel()) * sizeof(T));
  BoxCopy<false>(in.dims(), p.start, p.box, sizeof(T), reinterpret_cast<const char*>(dout.data<T>()), d);
};

}  // namespace

FL_REGISTER_OP(slice, op) {
  op.Doc(
        "Out = Input[starts[i]:ends[i]] along each axes[i]; negative bounds count from the end and are clamped "
        "to [0, dim]. decrease_axis drops those size-1 axes.")
      .Input("Input", "the tensor to slice")
      .DispensableInput("StartsTensor", "1-D int32/int64 tensor of the starts, read at run time (overrides the rest)")
      .DispensableInput("EndsTensor", "1-D int32/int64 tensor of the ends, read at run time (overrides the rest)")
      .OptionalDuplicableInput("StartsTensorList", "one 1-element int32/int64 tensor per axis: the starts at run time")
      .OptionalDuplicableInput("EndsTensorList", "one 1-element int32/int64 tensor per axis: the ends at run time")
      .Output("Out", "the slice")
      .Attr<std::vector<int32_t>>("axes", {}, "the axes to slice")
      .Axis()
      .Attr<std::vector<int32_t>>("starts", {}, "start of each slice (inclusive; negative counts from the end)")
      .Attr<std::vector<int32_t>>("ends", {}, "end of each slice (exclusive; negative counts from the end)")
      .Attr<std::vector<int32_t>>("infer_flags", {},
                                  "per axis: 1 its size is known at build time, -1 its bounds come from tensors")
      .Attr<std::vector<int32_t>>("decrease_axis", {}, "axes (each of size 1 after slicing) to drop from Out")
      .Axis()
      .NonDifferentiable({"StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"})
      .KernelDTypeFrom("Input")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.IsRuntime() && BoundsFromTensors(ctx)) return;  // the kernel reads the bounds and sizes Out
        const SlicePlan p = InferPlan(ctx);
        ctx.SetOutput("Out", p.out, ctx.InputDType("Input"));
        // Fluid passes the LoD on when axes[0] != 0; here when no axis is dim 0 (also for unsorted axes).
        if (!p.slices_rows) ctx.ShareLoD("Input", "Out");
      })
      .CPUKernelAnyDType(kSlice);
  op.GradOp({"Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList", "Out@GRAD"})
      .Optional({"StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"})
      .Doc("Gradient of slice: Input@GRAD = zeros with Out@GRAD written into the sliced region.")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double, int32_t, int64_t>(kSliceGrad);
}

}  // namespace fl
