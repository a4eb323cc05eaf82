// scale: Out = scale * X + bias (or scale * (X + bias) when bias_after_scale is false).
#include "grad_op_maker.h"
#include "helpers/elementwise_functors.h"
#include "helpers/elementwise_loop.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(scale, op) {
  op.Doc("Out = scale * X + bias if bias_after_scale else scale * (X + bias).")
      .Input("X", "input tensor")
      .Output("Out", "output tensor, same shape as X")
      .Inplace("Out", "X")
      .Attr<float>("scale", 1.0f, "multiplier")
      .Attr<float>("bias", 0.0f, "added before or after scaling")
      .Attr<bool>("bias_after_scale", true, "add bias after scaling (Fluid's default)")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const ScaleFn<T> f(ctx.Attr<float>("scale"), ctx.Attr<float>("bias"), ctx.Attr<bool>("bias_after_scale"));
        UnaryMap<T>(ctx, f);
      })
      .Grad([](GradOpMaker& g) {
        // d(scale*x + b)/dx = scale: the grad is another scale op, with no bias.
        OpDesc& op = g.NewOp("scale", false);
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("scale", g.Attr<float>("scale"));
        op.SetAttr("bias", 0.0f);
        op.SetAttr("bias_after_scale", true);
      });
}

}  // namespace fl
