// sgd: ParamOut = Param - LearningRate * Grad.
#include "helpers/optimizer_common.h"

namespace fl {

FL_REGISTER_OP(sgd, op) {
  op.Doc("Stochastic gradient descent: ParamOut = Param - LearningRate * Grad (in place when ParamOut is Param).")
      .Input("Param", "parameter")
      .Input("LearningRate", "learning rate, one element")
      .Input("Grad", "gradient, Param's shape")
      .Output("ParamOut", "updated parameter (usually the Param variable itself)")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) { InferOptimizerShapes(ctx, {"Grad"}, {{"ParamOut", "Param"}}); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ScalarInput<T>(ctx, "LearningRate");
        const Tensor& p = ctx.Input("Param");
        const T* g = ctx.Input("Grad").data<T>();
        const T* pin = p.data<T>();
        T* pout = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        const int64_t n = p.numel();
        for (int64_t i = 0; i < n; ++i) pout[i] = pin[i] - lr * g[i];
      });
}

}  // namespace fl
