// leaky_relu: Out = X if X >= 0 else alpha * X (Fluid 1.x, alpha defaults to 0.02), and its grad from X.
// Fluid 1.x writes the forward as max(X, alpha * X), which is the same for 0 <= alpha <= 1; the select
// form keeps forward and grad consistent for any alpha.
#include "helpers/elementwise_loop.h"

namespace fl {

FL_REGISTER_OP(leaky_relu, op) {
  op.Doc("Out = X if X >= 0 else alpha * X, elementwise.")
      .Input("X", "input tensor")
      .Output("Out", "output tensor, same shape as X")
      .Attr<float>("alpha", 0.02f, "slope for negative inputs")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T a = ctx.Attr<float>("alpha");
        UnaryMap<T>(ctx, [a](T x) { return x >= T(0) ? x : a * x; });
      })
      .SetGradMaker([](GradOpMaker& g) {
        OpDesc& op = g.NewOp("leaky_relu_grad");
        op.SetInput("X", g.Input("X"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(leaky_relu_grad, op) {
  op.Doc("X@GRAD = Out@GRAD if X >= 0 else alpha * Out@GRAD.")
      .Input("X", "forward input")
      .Input("Out@GRAD", "gradient of Out")
      .DispensableOutput("X@GRAD", "gradient of X")
      .Attr<float>("alpha", 0.02f, "slope for negative inputs")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.HasOutput("X@GRAD")) SameShapeAsInput(ctx, "X", "X@GRAD");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        if (!ctx.HasOutput("X@GRAD")) return;
        const T a = ctx.Attr<float>("alpha");
        BinaryMapSameShape<T>(ctx, "X", "Out@GRAD", "X@GRAD", [a](T x, T g) { return x >= T(0) ? g : a * g; });
      });
}

}  // namespace fl
