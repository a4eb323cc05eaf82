// Shared loops for elementwise kernels: one place that walks tensors, so kernels only give functors.
// Large tensors are split across the thread pool.
#pragma once
#include <cstdint>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

// Out[i] = f(X[i]) over the whole tensor (Out already shaped by InferShape).
template <typename T, typename F>
void UnaryMap(const ExecutionContext& ctx, F f, const char* in = "X", const char* out = "Out") {
  const Tensor& x = ctx.Input(in);
  Tensor* o = ctx.Output(out);
  o->Resize(x.dims());
  const T* xp = x.data<T>();
  T* op = o->mutable_data<T>(ctx.place());
  ParallelFor(x.numel(), kMinParallelElements, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) op[i] = f(xp[i]);
  });
}

// G[i] = f(a[i], b[i]) for two equally shaped inputs (typical for activation gradients).
template <typename T, typename F>
void BinaryMapSameShape(const ExecutionContext& ctx, const char* a, const char* b, const char* out, F f) {
  const Tensor& ta = ctx.Input(a);
  const Tensor& tb = ctx.Input(b);
  FL_ENFORCE(ta.numel() == tb.numel(), "op ", ctx.Type(), ": ", a, " ", ta.dims(), " and ", b, " ", tb.dims(),
             " must have the same number of elements");
  Tensor* o = ctx.Output(out);
  o->Resize(ta.dims());
  const T* ap = ta.data<T>();
  const T* bp = tb.data<T>();
  T* op = o->mutable_data<T>(ctx.place());
  ParallelFor(ta.numel(), kMinParallelElements, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) op[i] = f(ap[i], bp[i]);
  });
}

}  // namespace fl
