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

// Fills Out by fill(engine, data, numel) with the engine the `seed` attr selects (see random.h).
template <typename T, typename Fill>
void FillRandomOut(const ExecutionContext& ctx, Fill fill) {
  Tensor* out = ctx.Output("Out");
  T* p = out->mutable_data<T>(ctx.place());
  WithRandomEngine(ctx.Attr<int32_t>("seed"), [&](std::mt19937& e) { fill(e, p, out->numel()); });
}

}  // namespace

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
        const T lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
        FillRandomOut<T>(ctx, [&](std::mt19937& e, T* p, int64_t n) { FillUniform<T>(e, p, n, lo, hi); });
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
        const T mean = ctx.Attr<float>("mean"), std = ctx.Attr<float>("std");
        FillRandomOut<T>(ctx, [&](std::mt19937& e, T* p, int64_t n) { FillGaussian<T>(e, p, n, mean, std); });
      });
}

}  // namespace fl
