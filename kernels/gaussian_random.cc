// gaussian_random: Out = values drawn from normal(mean, std). seed != 0 is reproducible across runs
// and processes; seed == 0 draws from the process-wide engine (see helpers/random.h).
#include "helpers/random.h"
#include "helpers/shape_attr.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(gaussian_random, op) {
  op.Doc("Out = a tensor of `shape` with normally distributed values.")
      .Output("Out", "the random tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "shape of Out")
      .Attr<float>("mean", 0.0f, "mean of the distribution")
      .Attr<float>("std", 1.0f, "standard deviation of the distribution")
      .Attr<int32_t>("seed", 0, "random seed; 0 draws from a process-wide engine seeded by std::random_device")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out: float32 or float64 (VarType value)")
      .SetInferShape([](InferShapeContext& ctx) {
        const DType dtype = static_cast<DType>(ctx.Attr<int32_t>("dtype"));
        FL_ENFORCE(dtype == DType::FP32 || dtype == DType::FP64, "gaussian_random: dtype ", DTypeName(dtype),
                   " of Out '", ctx.OutputName("Out"), "' is not supported (float32, float64)");
        FL_ENFORCE(ctx.Attr<float>("std") >= 0.0f, "gaussian_random: std ", ctx.Attr<float>("std"),
                   " must not be negative (Out '", ctx.OutputName("Out"), "')");
        ctx.SetOutput("Out", DimsFromShapeAttr(ctx.Attr<std::vector<int64_t>>("shape"), "gaussian_random"), dtype);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        T* p = out->mutable_data<T>(ctx.place());
        const T mean = ctx.Attr<float>("mean"), std = ctx.Attr<float>("std");
        WithRandomEngine(ctx.Attr<int32_t>("seed"),
                         [&](std::mt19937& e) { FillGaussian<T>(e, p, out->numel(), mean, std); });
      });
}

}  // namespace fl
