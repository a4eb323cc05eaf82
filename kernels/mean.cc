// mean: Out[0] = the mean of every element of X (the usual last step of a loss).
#include "helpers/reduce.h"

namespace fl {

namespace {
std::vector<bool> AllAxes(const Tensor& x) { return std::vector<bool>(x.rank(), true); }
}  // namespace

FL_REGISTER_OP(mean, op) {
  op.Doc("Out = mean(X) over all elements, shape [1].")
      .Input("X", "input tensor")
      .Output("Out", "the mean, shape [1]")
      .SetInferShape([](InferShapeContext& ctx) { ctx.SetOutput("Out", DDim{1}, ctx.InputDType("X")); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        ReduceTensor<SumReducer, typename decltype(tag)::type>(ctx, AllAxes(ctx.Input("X")), true);
      })
      .SetGradMaker([](GradOpMaker& g) {
        // Only X's shape is needed, but Fluid's mean_grad also takes X; Out is not.
        OpDesc& op = g.NewOp("mean_grad");
        op.SetInput("X", g.Input("X"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(mean_grad, op) {
  op.Doc("X@GRAD = Out@GRAD[0] / numel(X) everywhere.")
      .Input("X", "forward input (its shape)")
      .Input("Out@GRAD", "gradient of Out, shape [1]")
      .Output("X@GRAD", "gradient of X")
      .KernelDTypeFrom("Out@GRAD")
      .SetInferShape([](InferShapeContext& ctx) {
        if (!ctx.HasOutput("X@GRAD")) return;
        ctx.SetOutput("X@GRAD", ctx.InputDim("X"), ctx.InputDType("X"));
        ctx.ShareLoD("X", "X@GRAD");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& dy = ctx.Input("Out@GRAD");
        FL_ENFORCE(dy.numel() == 1, "mean_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' must hold one value, got ",
                   dy.dims());
        const ReduceLayout l = MakeReduceLayout(x.dims(), AllAxes(x));
        const T v = dy.data<T>()[0] / static_cast<T>(l.numel);
        T* g = dx->mutable_data<T>(ctx.place());
        ForEachReduced(l, [g, v](int64_t i, int64_t) { g[i] = v; });
      });
}

}  // namespace fl
