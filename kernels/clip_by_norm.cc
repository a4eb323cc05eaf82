// clip_by_norm: Out = X * max_norm / ||X||_2 when the L2 norm of the whole of X exceeds max_norm, else X.
// As in Fluid 1.8 the op has no gradient (it rescales gradients inside an optimizer step).
#include <cmath>

#include "op_context.h"

namespace fl {

FL_REGISTER_OP(clip_by_norm, op) {
  op.Doc("Out = X * max_norm / norm(X) if norm(X) > max_norm else X (norm: L2 over all elements).")
      .Input("X", "input tensor")
      .Output("Out", "X's shape")
      .RequiredAttr<float>("max_norm", 0.0f, "the largest L2 norm Out may have")
      .SetInferShape([](InferShapeContext& ctx) {
        FL_ENFORCE(ctx.Attr<float>("max_norm") > 0.0f, "clip_by_norm: max_norm must be positive, got ",
                   ctx.Attr<float>("max_norm"), " for ", ctx.Describe("X"));
        ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const T* xp = x.data<T>();
        const int64_t n = x.numel();
        double sq = 0;  // accumulated in double so a float norm does not drift with size
        for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(xp[i]) * xp[i];
        const T norm = static_cast<T>(std::sqrt(sq));
        const T max_norm = static_cast<T>(ctx.Attr<float>("max_norm"));
        const T scale = norm > max_norm ? max_norm / norm : T(1);
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        T* op = out->mutable_data<T>(ctx.place());  // may be X's buffer: read each element before writing it
        for (int64_t i = 0; i < n; ++i) op[i] = xp[i] * scale;
      });
}

}  // namespace fl
