// Outputs a kernel adds into (scatter-style gradients: only some entries receive a value), so they start
// as zeros.
#pragma once
#include <algorithm>

#include "op_context.h"

namespace fl {

// `out` sized `dims` and filled with zeros.
template <typename T>
T* ZeroedOutput(Tensor* out, const DDim& dims, const Place& place) {
  out->Resize(dims);
  T* p = out->mutable_data<T>(place);
  std::fill(p, p + out->numel(), T(0));
  return p;
}

// Output `slot` with the dims shape inference gave it, filled with zeros; null when the slot is absent
// (a gradient nobody needs).
template <typename T>
T* ZeroedOutputOrNull(const ExecutionContext& ctx, const char* slot) {
  Tensor* out = ctx.OutputOrNull(slot);
  return out ? ZeroedOutput<T>(out, out->dims(), ctx.place()) : nullptr;
}

}  // namespace fl
