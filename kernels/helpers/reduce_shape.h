// The shape rule of the reduce ops (reduce_sum, reduce_mean, reduce_max, ... and fused_reduce, which computes
// several of them at once): X with the reduced axes dropped (or kept as 1 with keep_dim); reducing every axis
// without keep_dim gives [1], as in Fluid. Out keeps X's LoD unless the first axis is reduced.
#pragma once
#include <vector>

#include "op_context.h"

namespace fl {

inline DDim ReducedDims(const DDim& x, const std::vector<bool>& mask, bool keep_dim) {
  DDim out;
  for (int i = 0; i < x.size(); ++i) {
    if (!mask[i]) out.push_back(x[i]);
    else if (keep_dim) out.push_back(1);
  }
  if (out.size() == 0) out.push_back(1);
  return out;
}

// Sets output `i` of slot `out` to X reduced over `mask` (dtype of X), sharing X's LoD where the rows survive.
inline void SetReducedOutput(InferShapeContext& ctx, const std::vector<bool>& mask, const char* out = "Out",
                             int i = 0) {
  const DDim x = ctx.InputDim("X");
  ctx.SetOutput(out, ReducedDims(x, mask, ctx.Attr<bool>("keep_dim")), ctx.InputDType("X"), i);
  if (x.size() > 0 && !mask[0]) ctx.ShareLoD("X", out, 0, i);
}

}  // namespace fl
