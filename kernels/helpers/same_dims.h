// Shape checks the loss and similarity ops share: two inputs of one shape, and a rank requirement, each
// error naming the op and both variables with their dims. Unknown (-1) compile-time dims pass.
#pragma once
#include "op_context.h"

namespace fl {

// True when a and b have the same rank and every dim pair is equal or unknown (-1).
inline bool DimsCompatible(const DDim& a, const DDim& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

// Throws unless inputs `a` and `b` have the same dims (and the same dtype, when `same_dtype`).
inline void EnforceSameDims(const InferShapeContext& ctx, const char* a, const char* b, bool same_dtype = true) {
  FL_ENFORCE(DimsCompatible(ctx.InputDim(a), ctx.InputDim(b)), ctx.Type(), ": ", ctx.Describe(a), " and ",
             ctx.Describe(b), " must have the same shape");
  if (same_dtype) ctx.EnforceSameDType(a, b);
}

// Throws unless input `slot` has rank `rank` and, when last >= 0, a last dim of `last` (or unknown).
inline void EnforceRank(const InferShapeContext& ctx, const char* slot, int rank, int64_t last = -1,
                        const char* what = "") {
  const DDim d = ctx.InputDim(slot);
  FL_ENFORCE(d.size() == rank && (last < 0 || d[rank - 1] < 0 || d[rank - 1] == last), ctx.Type(), ": ",
             ctx.Describe(slot), " must have rank ", rank, last >= 0 ? Str(" with last dim ", last) : std::string(),
             what);
}

}  // namespace fl
