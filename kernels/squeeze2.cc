// squeeze2: Out = X without the size-1 dims listed in `axes` (all size-1 dims when axes is empty),
// sharing X's buffer like reshape2; XShape records [0] + X.dims for the grad.
#include "helpers/concat_split.h"
#include "helpers/xshape.h"

namespace fl {

namespace {

// Fluid's rule: every listed axis (negative counts from the end) must have size 1; unknown (-1) dims
// listed in axes are taken to be 1 and checked at run time. With no axes, the known 1s are dropped.
DDim SqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& xdesc) {
  std::vector<bool> drop(x.size(), false);
  for (int32_t a : axes) {
    const int ax = NormalizeAxis(a, x.size(), "squeeze2", Str(xdesc, " (axes ", DDim(std::vector<int64_t>(
                                                                       axes.begin(), axes.end())), ")"));
    FL_ENFORCE(x[ax] == 1 || x[ax] < 0, "squeeze2: axis ", a, " of ", xdesc, " has size ", x[ax],
               "; only size-1 dims can be squeezed");
    drop[ax] = true;
  }
  if (axes.empty())
    for (int i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  DDim out;
  for (int i = 0; i < x.size(); ++i)
    if (!drop[i]) out.push_back(x[i]);
  return out;
}

}  // namespace

FL_REGISTER_OP(squeeze2, op) {
  op.Doc("Out = X with the size-1 dims in `axes` removed (all size-1 dims if axes is empty), sharing X's buffer.")
      .Input("X", "input tensor")
      .Output("Out", "X's data without the squeezed dims")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<std::vector<int32_t>>("axes", {}, "the size-1 axes to remove; negative counts from the end")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const DDim out = SqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), ctx.Describe("X"));
        SetViewOutputs(ctx, x, out);
      })
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kShareXAsOut)
      .SetGradMaker(XShapeGradMaker);
}

FL_REGISTER_OP(squeeze2_grad, op) {
  op.Doc("Gradient of squeeze2: X@GRAD = Out@GRAD with X's dims (from XShape), sharing the buffer.");
  XShapeGradOp(op, "squeeze2")
      .Attr<std::vector<int32_t>>("axes", {}, "as in squeeze2")
      .CPUKernel<float, double, int32_t, int64_t>(kShareOutGradAsXGrad);
}

}  // namespace fl
