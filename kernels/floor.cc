// floor: Out = floor(X). Piecewise constant, so its gradient is zero (used by staircase LR decay).
#include <cmath>

#include "helpers/elementwise_loop.h"

namespace fl {

FL_REGISTER_OP(floor, op) {
  op.Doc("Out = floor(X) elementwise.")
      .Input("X", "input")
      .Output("Out", "floor of X")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        UnaryMap<T>(ctx, [](T x) { return std::floor(x); });
      })
      .SetGradMaker([](GradOpMaker& g) {
        OpDesc& op = g.NewOp("fill_any_like", false);
        op.SetInput("X", g.Input("X"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("value", 0.0f);
      });
}

}  // namespace fl
