// The random-tensor ops: uniform_random (values uniform in [min, max)) and gaussian_random (normal(mean,
// std)). They share the InferShape of Out from the `shape` and `dtype` attrs and the kernel that fills Out
// from the engine `seed` selects: seed != 0 is reproducible across runs and processes, seed == 0 draws from
// the process-wide engine (helpers/random.h). Each op brings only its distribution: its attrs' check and
// its fill.
#include <random>

#include "helpers/random.h"
#include "helpers/shape_attr.h"
#include "op_context.h"

namespace fl {

namespace {

// Out = `shape` attr dims with the `dtype` attr (float32 or float64 only). check_params(ctx) checks the
// distribution's attrs after the dtype and before Out is set.
template <typename CheckParams>
void InferRandomOut(InferShapeContext& ctx, CheckParams check_params) {
  const DType dtype = static_cast<DType>(ctx.Attr<int32_t>("dtype"));
  FL_ENFORCE(dtype == DType::FP32 || dtype == DType::FP64, ctx.Type(), ": dtype ", DTypeName(dtype), " of Out '",
             ctx.OutputName("Out"), "' is not supported (float32, float64)");
  check_params(ctx);
  ctx.SetOutput("Out", DimsFromShapeAttr(ctx.Attr<std::vector<int64_t>>("shape"), ctx.Type()), dtype);
}

}  // namespace

template <typename T>
void UniformRandomValues(const ExecutionContext& ctx, T* p, int64_t n) {
  const T lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
  WithRandomEngine(ctx.Attr<int32_t>("seed"), [&](std::mt19937& e) { FillUniform<T>(e, p, n, lo, hi); });
}
template <typename T>
void GaussianRandomValues(const ExecutionContext& ctx, T* p, int64_t n) {
  const T mean = ctx.Attr<float>("mean"), std = ctx.Attr<float>("std");
  WithRandomEngine(ctx.Attr<int32_t>("seed"), [&](std::mt19937& e) { FillGaussian<T>(e, p, n, mean, std); });
}
template void UniformRandomValues<float>(const ExecutionContext&, float*, int64_t);
template void UniformRandomValues<double>(const ExecutionContext&, double*, int64_t);
template void GaussianRandomValues<float>(const ExecutionContext&, float*, int64_t);
template void GaussianRandomValues<double>(const ExecutionContext&, double*, int64_t);

FL_REGISTER_OP(uniform_random, op) {
  op.Doc("Out = a tensor of `shape` with values uniform in [min, max).")
      .Output("Out", "the random tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "shape of Out")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out: float32 or float64 (VarType value)")
      .DTypeValue()
      .Attr<float>("min", -1.0f, "lower bound (inclusive)")
      .Attr<float>("max", 1.0f, "upper bound (exclusive)")
      .Attr<int32_t>("seed", 0, "random seed; 0 draws from a process-wide engine seeded by std::random_device")
      .SetInferShape([](InferShapeContext& ctx) {
        InferRandomOut(ctx, [](InferShapeContext& ctx) {
          const float lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
          FL_ENFORCE(lo < hi, "uniform_random: min ", lo, " must be less than max ", hi, " (Out '",
                     ctx.OutputName("Out"), "')");
        });
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        UniformRandomValues<T>(ctx, out->mutable_data<T>(ctx.place()), out->numel());
      });
}

FL_REGISTER_OP(gaussian_random, op) {
  op.Doc("Out = a tensor of `shape` with normally distributed values.")
      .Output("Out", "the random tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "shape of Out")
      .Attr<float>("mean", 0.0f, "mean of the distribution")
      .Attr<float>("std", 1.0f, "standard deviation of the distribution")
      .Attr<int32_t>("seed", 0, "random seed; 0 draws from a process-wide engine seeded by std::random_device")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out: float32 or float64 (VarType value)")
      .DTypeValue()
      .SetInferShape([](InferShapeContext& ctx) {
        InferRandomOut(ctx, [](InferShapeContext& ctx) {
          FL_ENFORCE(ctx.Attr<float>("std") >= 0.0f, "gaussian_random: std ", ctx.Attr<float>("std"),
                     " must not be negative (Out '", ctx.OutputName("Out"), "')");
        });
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        GaussianRandomValues<T>(ctx, out->mutable_data<T>(ctx.place()), out->numel());
      });
}

}  // namespace fl
