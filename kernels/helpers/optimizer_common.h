// Shared checks for optimizer ops: Param, Grad and accumulators must agree in shape, and the learning
// rate is a one-element tensor read once per run.
#pragma once
#include "op_context.h"

namespace fl {

// Compile/run-time shape check: every listed input slot has Param's dims; outputs take Param's dims.
inline void InferOptimizerShapes(InferShapeContext& ctx, std::initializer_list<const char*> same_as_param,
                                 std::initializer_list<std::pair<const char*, const char*>> out_from_in) {
  DDim p = ctx.InputDim("Param");
  for (const char* slot : same_as_param) {
    DDim d = ctx.InputDim(slot);
    bool ok = d.size() == p.size();
    for (int i = 0; ok && i < d.size(); ++i) ok = d[i] < 0 || p[i] < 0 || d[i] == p[i];
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe(slot), " must have the shape of ", ctx.Describe("Param"));
  }
  DDim lr = ctx.InputDim("LearningRate");
  FL_ENFORCE(lr.numel() == 1 || lr.numel() < 0, ctx.Type(), ": ", ctx.Describe("LearningRate"),
             " must hold exactly one element");
  for (auto& io : out_from_in) {
    if (ctx.HasOutput(io.first)) ctx.SetOutput(io.first, ctx.InputDim(io.second), ctx.InputDType(io.second));
  }
}

template <typename T>
T ScalarInput(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must hold one element, has dims ",
             t.dims());
  FL_ENFORCE(t.dtype() == DTypeOf<T>::value || t.dtype() == DType::FP32 || t.dtype() == DType::FP64, ctx.Type(), ": ",
             slot, " must be float32/float64, got ", DTypeName(t.dtype()));
  return t.dtype() == DType::FP64 ? static_cast<T>(*t.data<double>()) : static_cast<T>(*t.data<float>());
}

// Output `out` aliases input `in` (in-place update, Fluid's ParamOut = Param) or gets its own buffer.
template <typename T>
T* InPlaceOutput(const ExecutionContext& ctx, const char* out, const char* in) {
  Tensor* o = ctx.Output(out);
  o->Resize(ctx.Input(in).dims());
  return o->mutable_data<T>(ctx.place());
}

}  // namespace fl
