// clip: Out = min(max(X, min), max). Gradient passes where min < X < max.
#include "helpers/elementwise_loop.h"

namespace fl {

FL_REGISTER_OP(clip, op) {
  op.Doc("Out = min(max(X, min), max) elementwise.")
      .Input("X", "input")
      .Output("Out", "clipped X")
      .RequiredAttr<float>("min", 0.0f, "lower bound")
      .RequiredAttr<float>("max", 0.0f, "upper bound")
      .SetInferShape([](InferShapeContext& ctx) {
        FL_ENFORCE(ctx.Attr<float>("min") <= ctx.Attr<float>("max"), "clip: min ", ctx.Attr<float>("min"),
                   " must not exceed max ", ctx.Attr<float>("max"));
        SameShapeAsInput(ctx);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lo = static_cast<T>(ctx.Attr<float>("min")), hi = static_cast<T>(ctx.Attr<float>("max"));
        UnaryMap<T>(ctx, [lo, hi](T x) { return x < lo ? lo : (x > hi ? hi : x); });
      })
      .SetGradMaker([](GradOpMaker& g) {
        OpDesc& op = g.NewOp("clip_grad");
        op.SetInput("X", g.Input("X"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(clip_grad, op) {
  op.Doc("X@GRAD = Out@GRAD where min < X < max, else 0.")
      .Input("X", "forward input")
      .Input("Out@GRAD", "gradient of Out")
      .Output("X@GRAD", "gradient of X")
      .Attr<float>("min", 0.0f, "lower bound")
      .Attr<float>("max", 0.0f, "upper bound")
      .SetInferShape([](InferShapeContext& ctx) { SameShapeAsInput(ctx, "X", "X@GRAD"); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lo = static_cast<T>(ctx.Attr<float>("min")), hi = static_cast<T>(ctx.Attr<float>("max"));
        BinaryMapSameShape<T>(ctx, "X", "Out@GRAD", "X@GRAD",
                              [lo, hi](T x, T dy) { return (x > lo && x < hi) ? dy : T(0); });
      });
}

}  // namespace fl
