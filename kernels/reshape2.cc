// reshape2: Out = X with new dims, sharing X's buffer (no copy). XShape records [0] + X.dims (dims only,
// no data) so the grad can restore X's shape without keeping X alive.
#include "helpers/xshape.h"
#include "op_context.h"

namespace fl {

namespace {

// Resolves the shape attr against X's dims: 0 copies X's dim at that index, one -1 takes what is left.
// At compile time X may have unknown (-1) dims: the result is exact when X's unknown dims are all
// copied through 0s, else the inferred dim stays unknown.
DDim ReshapeDims(const DDim& x, const std::vector<int32_t>& shape, const std::string& xdesc) {
  const std::string sdesc = DDim(std::vector<int64_t>(shape.begin(), shape.end())).ToString();
  DDim out;
  int infer = -1;
  int64_t out_known = 1, x_known = 1;
  int out_unknown = 0, x_unknown = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == -1) {
      FL_ENFORCE(infer < 0, "reshape2: shape ", sdesc, " has more than one -1");
      infer = static_cast<int>(i);
    } else if (d == 0) {
      FL_ENFORCE(static_cast<int>(i) < x.size(), "reshape2: shape ", sdesc, " copies dim ", i, " (0) but ", xdesc,
                 " has rank ", x.size());
      d = x[i];
    } else {
      FL_ENFORCE(d > 0, "reshape2: shape ", sdesc, " has an invalid dim ", d, " (only -1, 0 or positive)");
    }
    out.push_back(d);
    if (static_cast<int>(i) == infer) continue;
    if (d < 0) ++out_unknown;
    else out_known *= d;
  }
  for (int64_t d : x) {
    if (d < 0) ++x_unknown;
    else x_known *= d;
  }
  // Unknown dims cancel only when X's are all passed through by 0s (one-to-one, e.g. the batch dim).
  const bool comparable = out_unknown == x_unknown;
  if (infer >= 0) {
    if (!comparable) {
      out[infer] = -1;
    } else {
      FL_ENFORCE(out_known > 0 && x_known % out_known == 0, "reshape2: cannot reshape ", xdesc, " to ", sdesc,
                 ": ", x_known, " elements are not divisible by ", out_known);
      out[infer] = x_known / out_known;
    }
  } else if (comparable) {
    FL_ENFORCE(x_known == out_known, "reshape2: cannot reshape ", xdesc, " (", x_known, " elements) to ", sdesc,
               " (", out_known, " elements)");
  }
  return out;
}

}  // namespace

FL_REGISTER_OP(reshape2, op) {
  op.Doc("Out = X reshaped to `shape` without copying: a 0 copies X's dim at that index, one -1 is inferred.")
      .Input("X", "input tensor")
      .Output("Out", "X's data with the new dims")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<std::vector<int32_t>>("shape", {}, "the new shape (0: copy X's dim, -1: infer)")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const DDim out = ReshapeDims(x, ctx.Attr<std::vector<int32_t>>("shape"), ctx.Describe("X"));
        SetViewOutputs(ctx, x, out);
      })
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kShareXAsOut)
      .Kernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(PlaceKind::CUDA, kShareXAsOut)
      .SetGradMaker(XShapeGradMaker);
}

FL_REGISTER_OP(reshape2_grad, op) {
  op.Doc("Gradient of reshape2: X@GRAD = Out@GRAD with X's dims (from XShape), sharing the buffer.");
  XShapeGradOp(op, "reshape2")
      .Attr<std::vector<int32_t>>("shape", {}, "as in reshape2")
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kShareOutGradAsXGrad)
      .Kernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(PlaceKind::CUDA, kShareOutGradAsXGrad);
}

}  // namespace fl
