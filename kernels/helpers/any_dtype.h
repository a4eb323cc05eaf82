// Ops that work on every plain dtype (assign, cast, fill_zeros_like) register their kernels through
// here, so the list of dtypes lives in one place and matches what VisitDType can dispatch.
#pragma once
#include <cstdint>

#include "op_registry.h"

namespace fl {

// Registers f(ctx, TypeTag<T>{}) on the CPU for bool, int8/16/32/64, uint8, float32 and float64.
template <typename F>
OpBuilder& CPUKernelAnyDType(OpBuilder& op, F f) {
  return op.CPUKernel<bool, int8_t, uint8_t, int16_t, int32_t, int64_t, float, double>(f);
}

// True for the dtypes CPUKernelAnyDType registers (so VisitDType will not throw on them).
inline bool IsPlainDType(DType t) {
  switch (t) {
    case DType::BOOL: case DType::INT8: case DType::UINT8: case DType::INT16:
    case DType::INT32: case DType::INT64: case DType::FP32: case DType::FP64: return true;
    default: return false;
  }
}

}  // namespace fl
