// Label handling shared by cross_entropy and softmax_with_cross_entropy: the shape rule (Label matches X
// except on the class axis, where hard labels have size 1) and the run-time range check of hard labels.
#pragma once
#include "op_context.h"

namespace fl {

// Checks Label against the class-scores input `x_slot` for classes on `axis` (already normalised) and
// returns the loss shape: X's dims with the class axis set to 1.
inline DDim CheckLabelShape(const InferShapeContext& ctx, const char* x_slot, int axis, bool soft_label) {
  const DDim x = ctx.InputDim(x_slot);
  const DDim label = ctx.InputDim("Label");
  FL_ENFORCE(label.size() == x.size(), ctx.Type(), ": ", ctx.Describe("Label"), " must have the same rank as ",
             ctx.Describe(x_slot));
  for (int i = 0; i < x.size(); ++i) {
    const int64_t want = (i == axis && !soft_label) ? 1 : x[i];
    if (want < 0 || label[i] < 0) continue;  // unknown at compile time
    FL_ENFORCE(label[i] == want, ctx.Type(), ": ", ctx.Describe("Label"), " does not match ", ctx.Describe(x_slot),
               " at dim ", i, ": expected ", want,
               soft_label ? " (soft labels have X's shape)" : " (hard labels have size 1 on the class axis)");
  }
  const DType lt = ctx.InputDType("Label");
  if (soft_label)
    FL_ENFORCE(lt == ctx.InputDType(x_slot), ctx.Type(), ": soft Label '", ctx.InputName("Label"), "' is ",
               DTypeName(lt), " but ", x_slot, " is ", DTypeName(ctx.InputDType(x_slot)));
  else
    FL_ENFORCE(lt == DType::INT64, ctx.Type(), ": hard Label '", ctx.InputName("Label"), "' must be int64, got ",
               DTypeName(lt), " (set soft_label=True for probabilities)");
  DDim out = x;
  out[axis] = 1;
  return out;
}

[[noreturn]] inline void ThrowBadLabel(const ExecutionContext& ctx, const char* x_slot, int64_t value, int64_t pos,
                                       int64_t classes) {
  FL_THROW(ctx.Type(), ": Label '", ctx.InputName("Label"), "' holds ", value, " at position ", pos,
           ", out of range [0, ", classes, ") for ", x_slot, " '", ctx.InputName(x_slot), "' ",
           ctx.Input(x_slot).dims(), " (ignore_index=", ctx.Attr<int32_t>("ignore_index"), ")");
}

// True if the label at `pos` is ignored; throws if it is neither ignored nor a valid class.
inline bool LabelIgnored(const ExecutionContext& ctx, const char* x_slot, int64_t value, int64_t pos, int64_t classes,
                         int64_t ignore_index) {
  if (value == ignore_index) return true;
  if (__builtin_expect(value < 0 || value >= classes, 0)) ThrowBadLabel(ctx, x_slot, value, pos, classes);
  return false;
}

}  // namespace fl
