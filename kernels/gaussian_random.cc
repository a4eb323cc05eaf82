// gaussian_random: Out = values drawn from normal(mean, std). seed != 0 is reproducible across runs
// and processes; seed == 0 draws from the process-wide engine (see helpers/random.h).
#include "helpers/random_op.h"

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
