// unsqueeze2: Out = X with size-1 dims inserted at `axes`, sharing X's buffer like reshape2; XShape
// records [0] + X.dims for the grad.
#include "helpers/xshape.h"

namespace fl {

namespace {

// Fluid's algorithm: axes are applied in order, each against the rank reached so far (a negative axis
// counts from the end of that rank + 1), and earlier inserted 1s move right past a later insertion.
DDim UnsqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& xdesc) {
  const int out_rank = x.size() + static_cast<int>(axes.size());
  FL_ENFORCE(out_rank <= DDim::kMaxRank, "unsqueeze2: ", xdesc, " with ", axes.size(), " new axes exceeds rank ",
             DDim::kMaxRank);
  std::vector<int> mark(out_rank + 1, 0);  // 1: an inserted axis
  int cur_rank = x.size();
  for (int32_t a : axes) {
    const int cur = a < 0 ? a + cur_rank + 1 : a;
    FL_ENFORCE(cur >= 0 && cur <= cur_rank, "unsqueeze2: axis ", a, " in axes ",
               DDim(std::vector<int64_t>(axes.begin(), axes.end())), " is out of range [", -cur_rank - 1, ", ",
               cur_rank, "] for ", xdesc, " (rank ", cur_rank, " at that point)");
    for (int i = cur_rank; i >= cur; --i) {
      if (mark[i] == 1) {
        mark[i + 1] = 1;
        mark[i] = 0;
      }
    }
    mark[cur] = 1;
    ++cur_rank;
  }
  DDim out;
  for (int i = 0, in = 0; i < out_rank; ++i) out.push_back(mark[i] ? 1 : x[in++]);
  return out;
}

}  // namespace

FL_REGISTER_OP(unsqueeze2, op) {
  op.Doc("Out = X with a size-1 dim inserted at each of `axes` (applied in order), sharing X's buffer.")
      .Input("X", "input tensor")
      .Output("Out", "X's data with the new dims")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<std::vector<int32_t>>("axes", {}, "where to insert size-1 dims; negative counts from the end")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const DDim out = UnsqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), ctx.Describe("X"));
        SetViewOutputs(ctx, x, out);
      })
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kShareXAsOut)
      .SetGradMaker(XShapeGradMaker);
}

FL_REGISTER_OP(unsqueeze2_grad, op) {
  op.Doc("Gradient of unsqueeze2: X@GRAD = Out@GRAD with X's dims (from XShape), sharing the buffer.");
  XShapeGradOp(op, "unsqueeze2")
      .Attr<std::vector<int32_t>>("axes", {}, "as in unsqueeze2")
      .CPUKernel<float, double, int32_t, int64_t>(kShareOutGradAsXGrad);
}

}  // namespace fl
