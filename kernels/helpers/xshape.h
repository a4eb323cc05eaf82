// XShape: reshape2/transpose2/squeeze2/unsqueeze2/flatten2 record X's dims as [0] + X.dims in a dims-only
// variable (no data), so their grads know X's shape without keeping X alive (Fluid's convention). They
// share the XShape plumbing below (InferShape outputs, grad maker, grad op signature). The view ops
// (reshape2, squeeze2, unsqueeze2, flatten2) also share their kernels: Out re-points at X's buffer, and
// the grad re-points X@GRAD at Out@GRAD's with X's dims.
#pragma once
#include <string>

#include "ddim.h"
#include "op_context.h"
#include "op_registry.h"

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

// The view kernels as registrable lambdas (any dtype, any place).
inline const auto kShareXAsOut = [](const ExecutionContext& ctx, auto) { ShareXAsOut(ctx); };
inline const auto kShareOutGradAsXGrad = [](const ExecutionContext& ctx, auto) { ShareOutGradAsXGrad(ctx); };

// Forward InferShape: Out gets `out` dims and X's dtype; XShape = [0] + X.dims where the op has it.
inline void SetOutAndXShape(InferShapeContext& ctx, const DDim& x, const DDim& out) {
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  if (ctx.HasOutput("XShape")) ctx.SetOutput("XShape", XShapeDims(x), ctx.InputDType("X"));
}

// SetOutAndXShape for reshape2/squeeze2/unsqueeze2, plus Fluid's LoD rule for them: Out shares X's LoD
// when the leading dim is unchanged.
inline void SetViewOutputs(InferShapeContext& ctx, const DDim& x, const DDim& out) {
  SetOutAndXShape(ctx, x, out);
  if (x.size() > 0 && out.size() > 0 && x[0] == out[0]) ctx.ShareLoD("X", "Out");
}

// The grad op of an XShape op: `type` with XShape and Out@GRAD in, X@GRAD out.
inline void MakeXShapeGradOp(GradOpMaker& g, const std::string& type, bool copy_attrs) {
  OpDesc& op = g.NewOp(type, copy_attrs);
  op.SetInput("XShape", g.Output("XShape"));
  op.SetInput("Out@GRAD", g.OutputGrad("Out"));
  op.SetOutput("X@GRAD", g.InputGrad("X"));
}

// Grad maker of an XShape op whose grad is <type>_grad with the forward attrs.
inline void XShapeGradMaker(GradOpMaker& g) { MakeXShapeGradOp(g, g.Forward().type() + "_grad", true); }

// X@GRAD's compile-time shape from XShape (XShape has no data at run time: the kernel sets the dims).
inline void InferXGradFromXShape(InferShapeContext& ctx) {
  if (ctx.IsRuntime() || !ctx.HasOutput("X@GRAD")) return;
  ctx.SetOutput("X@GRAD", DimsFromXShape(ctx.InputDim("XShape")), ctx.InputDType("Out@GRAD"));
}

// The slots, kernel dtype and InferShape every XShape grad op (<fwd>_grad) shares; the caller adds the
// doc, attrs and kernels.
inline OpBuilder& XShapeGradOp(OpBuilder& op, const std::string& fwd) {
  return op.Input("XShape", "[0] + X.dims from " + fwd)
      .Input("Out@GRAD", "gradient of Out")
      .DispensableOutput("X@GRAD", "gradient of X")
      .KernelDTypeFrom("Out@GRAD")
      .SetInferShape(InferXGradFromXShape);
}

}  // namespace fl
