// XShape: reshape2/transpose2/squeeze2/unsqueeze2 record X's dims as [0] + X.dims in a dims-only variable
// (no data), so their grads know X's shape without keeping X alive (Fluid's convention). The view ops
// (reshape2, squeeze2, unsqueeze2) share their kernels below: Out re-points at X's buffer, and the grad
// re-points X@GRAD at Out@GRAD's with X's dims.
#pragma once
#include "ddim.h"
#include "op_context.h"

namespace fl {

inline DDim XShapeDims(const DDim& x) {
  DDim d{0};
  for (int64_t v : x) d.push_back(v);
  return d;
}

inline DDim DimsFromXShape(const DDim& xshape) {
  FL_ENFORCE(xshape.size() >= 1, "XShape ", xshape, " must have rank >= 1 ([0] + X.dims)");
  return DDim(xshape.data() + 1, xshape.size() - 1);
}

// Out = X's buffer with the dims the runtime InferShape gave Out (no copy). Any dtype, any place.
inline void ShareXAsOut(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const DDim dims = out->dims();
  out->ShareDataWith(x);
  out->Resize(dims);
}

// X@GRAD = Out@GRAD's buffer with X's dims read from XShape.
inline void ShareOutGradAsXGrad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& dout = ctx.Input("Out@GRAD");
  const Tensor* xshape = ctx.InputVar("XShape")->GetTensor();
  FL_ENFORCE(xshape && xshape->dims().size() >= 1, ctx.Type(), ": XShape '", ctx.InputName("XShape"),
             "' holds no shape (did the forward op run?)");
  const DDim dims = DimsFromXShape(xshape->dims());
  FL_ENFORCE(dims.numel() == dout.numel(), ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ",
             dout.dims(), " does not have the ", dims.numel(), " elements of X ", dims);
  dx->ShareDataWith(dout);
  dx->Resize(dims);
}

// X@GRAD's compile-time shape from XShape (XShape has no data at run time: the kernel sets the dims).
inline void InferXGradFromXShape(InferShapeContext& ctx) {
  if (ctx.IsRuntime() || !ctx.HasOutput("X@GRAD")) return;
  ctx.SetOutput("X@GRAD", DimsFromXShape(ctx.InputDim("XShape")), ctx.InputDType("Out@GRAD"));
}

}  // namespace fl
