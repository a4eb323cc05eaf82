// softmax: Out = exp(X - max) / sum(exp(X - max)) along `axis`.
#include "helpers/reduce.h"

namespace fl {

FL_REGISTER_OP(softmax, op) {
  op.Doc("Out = softmax(X) along axis (numerically stable: the max is subtracted first).")
      .Input("X", "input tensor")
      .Output("Out", "softmax of X, same shape")
      .Attr<int32_t>("axis", -1, "the axis to normalise over; negative counts from the end")
      .Axis()
      .SetInferShape([](InferShapeContext& ctx) {
        NormalizeAxis(ctx, "X", ctx.Attr<int32_t>("axis"));
        SameShapeAsInput(ctx);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const AxisView v = ViewAroundAxis(x.dims(), ctx.Attr<int32_t>("axis"));
        SoftmaxForward(x.data<T>(), ctx.Alloc<T>("Out"), v);
      });
  op.GradOp({"Out", "Out@GRAD"})
      .Doc("X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out along axis)).")
      .ShapeLike("X", "Out")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& out = ctx.Input("Out");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(out.dims() == dout.dims(), "softmax_grad: Out ", out.dims(), " and Out@GRAD ", dout.dims(),
                   " differ");
        const AxisView v = ViewAroundAxis(out.dims(), ctx.Attr<int32_t>("axis"));
        const T* y = out.data<T>();
        const T* dy = dout.data<T>();
        T* g = dx->mutable_data<T>(ctx.place());
        // g = y * dy - y * sum(y * dy): write y * dy, reduce it per position, then subtract.
        const int64_t n = out.numel();
        for (int64_t i = 0; i < n; ++i) g[i] = y[i] * dy[i];
        std::vector<T> dot_buf(v.outer * v.inner);
        T* dot = dot_buf.data();
        ReduceRuns<SumReducer, T>(v.outer, v.axis, v.inner, [g](int64_t k) { return g[k]; }, dot);
        ForEachReduced(AxisLayout(v), [g, y, dot](int64_t i, int64_t o) { g[i] -= y[i] * dot[o]; });
      });
}

}  // namespace fl
