// XShape: reshape2/transpose2/squeeze2/unsqueeze2/flatten2 record X's dims as [0] + X.dims in a dims-only
// variable (no data), so their grads know X's shape without keeping X alive (Fluid's convention).
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

// Forward InferShape: Out gets `out` dims and X's dtype; XShape = [0] + X.dims where the op has it.
inline void SetOutAndXShape(InferShapeContext& ctx, const DDim& x, const DDim& out) {
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  if (ctx.HasOutput("XShape")) ctx.SetOutput("XShape", XShapeDims(x), ctx.InputDType("X"));
}

// SetOutAndXShape plus Fluid's LoD rule for reshape2/squeeze2/unsqueeze2/flatten2: Out shares X's LoD when the
// leading dim is unchanged (at build time an unknown -1 matches -1).
inline void SetViewOutputs(InferShapeContext& ctx, const DDim& x, const DDim& out) {
  SetOutAndXShape(ctx, x, out);
  if (x.size() > 0 && out.size() > 0 && x[0] == out[0]) ctx.ShareLoD("X", "Out");
}

}  // namespace fl
