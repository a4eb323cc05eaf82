// mean: Out[0] = the mean of every element of X (the usual last step of a loss).
#include "grad_op_maker.h"
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
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD[0] / numel(X) everywhere.")
      .Grad(LinearGradGrad)
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
