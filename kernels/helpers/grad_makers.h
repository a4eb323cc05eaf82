// Grad makers (and grad InferShapes) that several ops share word for word.
#pragma once
#include "op_context.h"
#include "op_registry.h"

namespace fl {

// For piecewise-constant ops (floor, sign): X@GRAD = zeros like X, via fill_any_like.
inline void ZeroGradMaker(GradOpMaker& g) {
  OpDesc& op = g.NewOp("fill_any_like", false);
  op.SetInput("X", g.Input("X"));
  op.SetOutput("Out", g.InputGrad("X"));
  op.SetAttr("value", 0.0f);
}

// For products Out = f(X, Y) whose grad reads only X, Y and Out@GRAD (mul, matmul): <type>_grad with
// those inputs and the forward attrs, X@GRAD and Y@GRAD out.
inline void XYGradMaker(GradOpMaker& g) {
  OpDesc& op = g.NewOp(g.Forward().type() + "_grad");
  op.SetInput("X", g.Input("X"));
  op.SetInput("Y", g.Input("Y"));
  op.SetInput("Out@GRAD", g.OutputGrad("Out"));
  op.SetOutput("X@GRAD", g.InputGrad("X"));
  op.SetOutput("Y@GRAD", g.InputGrad("Y"));
}

// InferShape of such a grad: X@GRAD and Y@GRAD (each optional) take X's and Y's dims and dtypes.
inline void InferXYGradShape(InferShapeContext& ctx) {
  if (ctx.HasOutput("X@GRAD")) ctx.SetOutput("X@GRAD", ctx.InputDim("X"), ctx.InputDType("X"));
  if (ctx.HasOutput("Y@GRAD")) ctx.SetOutput("Y@GRAD", ctx.InputDim("Y"), ctx.InputDType("Y"));
}

// The slots, kernel dtype and InferShape of such a grad op; the caller adds the doc, attrs and kernels.
inline OpBuilder& XYGradOp(OpBuilder& op) {
  return op.Input("X", "forward X")
      .Input("Y", "forward Y")
      .Input("Out@GRAD", "gradient of Out")
      .DispensableOutput("X@GRAD", "gradient of X")
      .DispensableOutput("Y@GRAD", "gradient of Y")
      .KernelDTypeFrom("Out@GRAD")
      .SetInferShape(InferXYGradShape);
}

}  // namespace fl
