// XShape: reshape2/transpose2 record X's dims as [0] + X.dims in a dims-only variable (no data), so their
// grads know X's shape without keeping X alive (Fluid's convention).
#pragma once
#include "ddim.h"

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

}  // namespace fl
