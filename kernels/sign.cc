// sign: Out = -1, 0 or 1 elementwise (L1 weight decay uses it). Gradient is zero almost everywhere.
#include "helpers/elementwise_loop.h"
#include "helpers/grad_makers.h"

namespace fl {

FL_REGISTER_OP(sign, op) {
  op.Doc("Out = sign(X) elementwise (-1, 0, 1).")
      .Input("X", "input")
      .Output("Out", "sign of X")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        UnaryMap<T>(ctx, [](T x) { return static_cast<T>((x > T(0)) - (x < T(0))); });
      })
      .SetGradMaker(ZeroGradMaker);
}

}  // namespace fl
