// relu6: Out = min(max(X, 0), threshold) (Fluid 1.x, threshold defaults to 6), and its grad from Out.
#include "helpers/elementwise_loop.h"

namespace fl {

FL_REGISTER_OP(relu6, op) {
  op.Doc("Out = min(max(X, 0), threshold), elementwise.")
      .Input("X", "input tensor")
      .Output("Out", "output tensor, same shape as X")
      .Attr<float>("threshold", 6.0f, "upper clip value")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T t = ctx.Attr<float>("threshold");
        UnaryMap<T>(ctx, [t](T x) { return x > T(0) ? (x < t ? x : t) : T(0); });
      })
      .SetGradMaker([](GradOpMaker& g) {
        OpDesc& op = g.NewOp("relu6_grad");
        op.SetInput("Out", g.Output("Out"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(relu6_grad, op) {
  op.Doc("X@GRAD = Out@GRAD where 0 < Out < threshold, else 0.")
      .Input("Out", "forward output")
      .Input("Out@GRAD", "gradient of Out")
      .DispensableOutput("X@GRAD", "gradient of X")
      .Attr<float>("threshold", 6.0f, "upper clip value")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.HasOutput("X@GRAD")) SameShapeAsInput(ctx, "Out", "X@GRAD");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        if (!ctx.HasOutput("X@GRAD")) return;
        const T t = ctx.Attr<float>("threshold");
        BinaryMapSameShape<T>(ctx, "Out", "Out@GRAD", "X@GRAD",
                              [t](T out, T g) { return out > T(0) && out < t ? g : T(0); });
      });
}

}  // namespace fl
