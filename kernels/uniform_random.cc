// uniform_random: Out = values drawn uniformly from [min, max). seed != 0 is reproducible across runs
// and processes; seed == 0 draws from the process-wide engine (see helpers/random.h).
#include "helpers/random_op.h"

namespace fl {

FL_REGISTER_OP(uniform_random, op) {
  op.Doc("Out = a tensor of `shape` with values uniform in [min, max).")
      .Output("Out", "the random tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "shape of Out")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out: float32 or float64 (VarType value)")
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

}  // namespace fl
