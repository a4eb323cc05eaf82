// Grad makers (and grad InferShapes) that several ops share word for word.
#pragma once
#include "op_context.h"

namespace fl {

// For piecewise-constant ops (floor, sign): X@GRAD = zeros like X, via fill_any_like.
inline void ZeroGradMaker(GradOpMaker& g) {
  OpDesc& op = g.NewOp("fill_any_like", false);
  op.SetInput("X", g.Input("X"));
  op.SetOutput("Out", g.InputGrad("X"));
  op.SetAttr("value", 0.0f);
}

}  // namespace fl
