// A dispensable 1-element int32/int64 input that overrides an int attribute at run time (top_k's K,
// one_hot's depth_tensor, as in Fluid): its build-time dtype check and its run-time read.
#pragma once
#include <cstdint>

#include "op_context.h"

namespace fl {

// Build time: the input, when declared, is int32 or int64 (or not yet known).
inline void CheckIntScalarInputDType(InferShapeContext& ctx, const char* slot) {
  const DType dt = ctx.InputDType(slot);
  FL_ENFORCE(dt == DType::INT32 || dt == DType::INT64 || dt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot),
             " must be int32 or int64, got ", DTypeName(dt));
}

// Run time: the input's one value (a CUDA kernel's input on the GPU is read through a host copy).
inline int64_t ReadIntScalarInput(const ExecutionContext& ctx, const char* slot) {
  Tensor host;
  const Tensor& in = ctx.Input(slot);
  if (!in.place().is_cpu()) TensorCopy(in, Place::CPU(), &host);
  const Tensor& t = in.place().is_cpu() ? in : host;
  FL_ENFORCE(t.numel() == 1 && (t.dtype() == DType::INT32 || t.dtype() == DType::INT64), ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' must be a 1-element int32 or int64 tensor, got ", DTypeName(t.dtype()), " ",
             t.dims());
  return t.dtype() == DType::INT32 ? t.data<int32_t>()[0] : t.data<int64_t>()[0];
}

}  // namespace fl
