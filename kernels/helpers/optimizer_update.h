// What the optimizer update ops share (kernels/optimizer_ops.cc, kernels/adaptive_optimizers.cc): their
// build/run-time shape and dtype check, the read of a one-element float input (LearningRate, Beta1Pow) and
// the in-place output buffer.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "op_context.h"

namespace fl {

// Every listed input slot has Param's dims and dtype; a one-element LearningRate when `lr` (adadelta has none);
// each (output, input) pair's output takes the input's dims and dtype.
inline void InferUpdateShapes(InferShapeContext& ctx, std::initializer_list<const char*> same_as_param,
                              std::initializer_list<std::pair<const char*, const char*>> out_from_in, bool lr = true) {
  const DDim p = ctx.InputDim("Param");
  const DType pt = ctx.InputDType("Param");
  for (const char* slot : same_as_param) {
    const DDim d = ctx.InputDim(slot);
    bool ok = d.size() == p.size();
    for (int i = 0; ok && i < d.size(); ++i) ok = d[i] < 0 || p[i] < 0 || d[i] == p[i];
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe(slot), " must have the shape of ", ctx.Describe("Param"));
    const DType t = ctx.InputDType(slot);
    FL_ENFORCE(t == pt || t == DType::UNDEFINED || pt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot),
               " must have Param's dtype ", DTypeName(pt), ", got ", DTypeName(t));
  }
  if (lr) {
    const DDim d = ctx.InputDim("LearningRate");
    FL_ENFORCE(d.numel() == 1 || d.numel() < 0, ctx.Type(), ": ", ctx.Describe("LearningRate"),
               " must hold exactly one element");
  }
  for (auto& io : out_from_in) {
    if (ctx.HasOutput(io.first)) ctx.SetOutput(io.first, ctx.InputDim(io.second), ctx.InputDType(io.second));
  }
}

// The one value of a one-element float32/float64 input, as T.
template <typename T>
T ReadFloatScalarInput(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must hold one element, has dims ",
             t.dims());
  FL_ENFORCE(t.dtype() == DType::FP32 || t.dtype() == DType::FP64, ctx.Type(), ": ", slot, " '", ctx.InputName(slot),
             "' must be float32/float64, got ", DTypeName(t.dtype()));
  return t.dtype() == DType::FP64 ? static_cast<T>(*t.data<double>()) : static_cast<T>(*t.data<float>());
}

// Output `out`, sized like input `in`: the input's own buffer when the op updates in place (ParamOut = Param).
template <typename T>
T* UpdateOutput(const ExecutionContext& ctx, const char* out, const char* in) {
  Tensor* o = ctx.Output(out);
  o->Resize(ctx.Input(in).dims());
  return o->mutable_data<T>(ctx.place());
}

// Output `out` holding input `in`'s values, to be updated in place: the input's own buffer when the op updates in
// place (ParamOut = Param, the usual case), else a copy of it. A sparse update then writes only the rows it
// touches; a dense one reads and writes through one pointer, which the compiler vectorises without a run-time
// overlap check (separate input and output pointers fail that check when they are the same buffer).
template <typename T>
T* InPlaceOutput(const ExecutionContext& ctx, const char* out, const char* in) {
  const Tensor& src = ctx.Input(in);
  T* o = UpdateOutput<T>(ctx, out, in);
  if (o != src.data<T>()) std::memcpy(o, src.data<T>(), src.numel() * sizeof(T));
  return o;
}

// sqrt(sum x^2), accumulated in double.
template <typename T>
double L2Norm(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return std::sqrt(s);
}

}  // namespace fl
