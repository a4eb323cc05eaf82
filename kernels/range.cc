// range: Out = [Start, Start + Step, ...) up to but excluding End (numpy's arange), with Start, End and Step
// 1-element tensors read at run time, so Out's length is known only then. linspace: Num evenly spaced values
// from Start to Stop inclusive. Neither has a gradient (Fluid's have none).
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "op_context.h"

namespace fl {

namespace {

// The one value of a 1-element input, as T.
template <typename T>
T ScalarInput(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must have 1 element, got ",
             t.dims());
  switch (t.dtype()) {
    case DType::FP32: return static_cast<T>(t.data<float>()[0]);
    case DType::FP64: return static_cast<T>(t.data<double>()[0]);
    case DType::INT32: return static_cast<T>(t.data<int32_t>()[0]);
    case DType::INT64: return static_cast<T>(t.data<int64_t>()[0]);
    default:
      FL_THROW(ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must be float32, float64, int32 or int64, got ",
               DTypeName(t.dtype()));
  }
}

void CheckScalarSlot(InferShapeContext& ctx, const char* slot) {
  const DDim d = ctx.InputDim(slot);
  FL_ENFORCE(d.size() <= 1 && (d.size() == 0 || d[0] == 1 || d[0] < 0), ctx.Type(), ": ", ctx.Describe(slot),
             " must be a 1-element tensor");
}

}  // namespace

FL_REGISTER_OP(range, op) {
  op.Doc("Out = Start, Start + Step, ... while < End (Step > 0) or > End (Step < 0): numpy's arange.")
      .Input("Start", "1-element tensor: the first value")
      .Input("End", "1-element tensor: the bound, excluded")
      .Input("Step", "1-element tensor: the increment, non-zero")
      .Output("Out", "1-D, Start's dtype; its length is known at run time")
      .NoGradient()
      .KernelDTypeFrom("Start")
      .SetInferShape([](InferShapeContext& ctx) {
        for (const char* s : {"Start", "End", "Step"}) CheckScalarSlot(ctx, s);
        const DType dt = ctx.InputDType("Start");
        FL_ENFORCE(dt == DType::FP32 || dt == DType::FP64 || dt == DType::INT32 || dt == DType::INT64 ||
                       dt == DType::UNDEFINED,
                   "range: ", ctx.Describe("Start"), " must be float32, float64, int32 or int64, got ", DTypeName(dt));
        ctx.EnforceSameDType("Start", "End");
        ctx.EnforceSameDType("Start", "Step");
        if (ctx.IsRuntime()) return;  // the kernel sizes Out
        ctx.SetOutput("Out", DDim{-1}, dt);
      })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T start = ScalarInput<T>(ctx, "Start"), end = ScalarInput<T>(ctx, "End"),
                step = ScalarInput<T>(ctx, "Step");
        FL_ENFORCE(step != T(0), "range: Step '", ctx.InputName("Step"), "' must not be 0");
        FL_ENFORCE(!(start < end && step < 0) && !(start > end && step > 0), "range: Step '", ctx.InputName("Step"),
                   "' = ", step, " moves away from End '", ctx.InputName("End"), "' = ", end, " (Start '",
                   ctx.InputName("Start"), "' = ", start, ")");
        int64_t n;
        if constexpr (std::is_integral_v<T>) {
          const int64_t span = std::llabs(static_cast<int64_t>(end) - static_cast<int64_t>(start));
          const int64_t s = std::llabs(static_cast<int64_t>(step));
          n = (span + s - 1) / s;
        } else {
          const double q = static_cast<double>(std::ceil(std::fabs((end - start) / step)));  // in T, as Fluid
          FL_ENFORCE(std::isfinite(q) && q < 1e12, "range: ", q, " values from Start ", start, " to End ", end,
                     " by Step ", step, " is too many");
          n = static_cast<int64_t>(q);
        }
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{n});
        T* p = out->mutable_data<T>(ctx.place());
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<T>(i) * step);
      });
}

FL_REGISTER_OP(linspace, op) {
  op.Doc("Out = Num evenly spaced values from Start to Stop, both included (Num = 1: [Start]).")
      .Input("Start", "1-element tensor: the first value")
      .Input("Stop", "1-element tensor: the last value")
      .Input("Num", "1-element int32 tensor: how many values, >= 1")
      .Output("Out", "[Num]")
      .Attr<int32_t>("dtype", -1, "Out's dtype (float32 or float64); -1 takes Start's")
      .DTypeValue(true)
      .NoGradient()
      .SetKernelDType([](const ExecutionContext& ctx) {
        const int32_t dt = ctx.Attr<int32_t>("dtype");
        return dt < 0 ? ctx.Input("Start").dtype() : static_cast<DType>(dt);
      })
      .SetInferShape([](InferShapeContext& ctx) {
        for (const char* s : {"Start", "Stop", "Num"}) CheckScalarSlot(ctx, s);
        const int32_t attr = ctx.Attr<int32_t>("dtype");
        const DType dt = attr < 0 ? ctx.InputDType("Start") : static_cast<DType>(attr);
        FL_ENFORCE(dt == DType::FP32 || dt == DType::FP64 || dt == DType::UNDEFINED,
                   "linspace: the output dtype must be "
                   "float32 or float64 (",
                   attr < 0 ? ctx.Describe("Start") : std::string("attribute dtype"), "), got ", DTypeName(dt));
        const DType nt = ctx.InputDType("Num");
        FL_ENFORCE(nt == DType::INT32 || nt == DType::INT64 || nt == DType::UNDEFINED,
                   "linspace: ", ctx.Describe("Num"), " must be int32 or int64, got ", DTypeName(nt));
        if (ctx.IsRuntime()) return;
        ctx.SetOutput("Out", DDim{-1}, dt);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const double start = ScalarInput<double>(ctx, "Start"), stop = ScalarInput<double>(ctx, "Stop");
        const int64_t num = ScalarInput<int64_t>(ctx, "Num");
        FL_ENFORCE(num >= 1, "linspace: Num '", ctx.InputName("Num"), "' = ", num, " must be >= 1");
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{num});
        T* p = out->mutable_data<T>(ctx.place());
        const double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
        for (int64_t i = 0; i < num; ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
        if (num > 1) p[num - 1] = static_cast<T>(stop);
      });
}

}  // namespace fl
