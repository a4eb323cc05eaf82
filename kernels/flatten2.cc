// flatten2 (Fluid 1.x): Out = X as a matrix [prod(dims[:axis]), prod(dims[axis:])], sharing X's buffer
// like reshape2, with XShape = [0] + X.dims for the grad. The grad is reshape2_grad, which restores
// X's dims from XShape (also without a copy).
#include "helpers/xshape.h"
#include "op_context.h"

namespace fl {

namespace {

// Product of dims [b, e), -1 if any is unknown.
int64_t KnownProduct(const DDim& d, int b, int e) {
  int64_t n = 1;
  for (int i = b; i < e; ++i) {
    if (d[i] < 0) return -1;
    n *= d[i];
  }
  return n;
}

}  // namespace

FL_REGISTER_OP(flatten2, op) {
  op.Doc("Out = X reshaped to [prod(X.dims[:axis]), prod(X.dims[axis:])] without copying.")
      .Input("X", "input tensor")
      .Output("Out", "the 2-D view of X")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<int32_t>("axis", 1, "dims before axis form the rows, the rest the columns (0 <= axis <= rank)")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int axis = ctx.Attr<int32_t>("axis");
        FL_ENFORCE(axis >= 0 && axis <= x.size(), "flatten2: axis ", axis, " is out of range [0, ", x.size(),
                   "] for ", ctx.Describe("X"));
        SetOutAndXShape(ctx, x, DDim{KnownProduct(x, 0, axis), KnownProduct(x, axis, x.size())});
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kShareXAsOut)
      .SetGradMaker([](GradOpMaker& g) { MakeXShapeGradOp(g, "reshape2_grad", /*copy_attrs=*/false); });
}

}  // namespace fl
