// floor: Out = floor(X). Piecewise constant, so its gradient is zero (used by staircase LR decay).
#include <cmath>

#include "helpers/elementwise_loop.h"
#include "helpers/grad_makers.h"

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
      .SetGradMaker(ZeroGradMaker);
}

}  // namespace fl
