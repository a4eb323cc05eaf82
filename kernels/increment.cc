// increment: Out = X + step for a one-element X (loop counters; usually Out is X itself).
#include "grad_op_maker.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(increment, op) {
  op.Doc("Out = X + step; X must hold exactly one element.")
      .Input("X", "one-element tensor")
      .Output("Out", "X + step (may be X itself)")
      .Inplace("Out", "X")
      .Attr<float>("step", 1.0f, "amount added")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim d = ctx.InputDim("X");
        // At build time an unset shape (rank 0) or unknown dims cannot be checked yet.
        if (ctx.IsRuntime() || (d.size() > 0 && d.numel() >= 0))
          FL_ENFORCE(d.numel() == 1, "increment: X '", ctx.InputName("X"), "' ", d, " must have exactly one element");
        SameShapeAsInput(ctx);
      })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const T v = x.data<T>()[0];  // read before Out (possibly X) is (re)allocated
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        out->mutable_data<T>(ctx.place())[0] = v + static_cast<T>(ctx.Attr<float>("step"));
      })
      // Fluid's gradient of increment is no gradient but the inverse update, X = Out - step: in a While body it
      // steps the loop counter back, so while_grad's iterations read the tensor arrays at their own index.
      .Grad([](GradOpMaker& g) {
        OpDesc& op = g.NewOp("increment");
        op.SetInput("X", g.Output("Out"));
        op.SetOutput("Out", g.Input("X"));
        op.SetAttr("step", -g.Attr<float>("step"));
      });
}

}  // namespace fl
