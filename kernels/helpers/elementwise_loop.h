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

// Out[i] = f(in_0[i], in_1[i], ...) over equally sized inputs (activation gradients and second derivatives).
template <typename T, typename F, typename... Slots>
void MapSameShape(const ExecutionContext& ctx, const char* out, F f, const char* first, Slots... rest) {
  const Tensor& t0 = ctx.Input(first);
  for (const char* slot : {rest...}) {
    const Tensor& t = ctx.Input(slot);
    FL_ENFORCE(t.numel() == t0.numel(), "op ", ctx.Type(), ": ", first, " '", ctx.InputName(first), "' ", t0.dims(),
               " and ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " must have the same number of elements");
  }
  Tensor* o = ctx.Output(out);
  o->Resize(t0.dims());
  const T* in[] = {t0.data<T>(), ctx.Input(rest).template data<T>()...};
  T* op = o->mutable_data<T>(ctx.place());
  ParallelFor(t0.numel(), kMinParallelElements, [&](int64_t b, int64_t e) {
    const T* p0 = in[0];
    const T* p1 = in[1];
    if constexpr (sizeof...(rest) == 1) {
      for (int64_t i = b; i < e; ++i) op[i] = f(p0[i], p1[i]);
    } else {
      const T* p2 = in[2];
      for (int64_t i = b; i < e; ++i) op[i] = f(p0[i], p1[i], p2[i]);
    }
  });
}

template <typename T, typename F>
void BinaryMapSameShape(const ExecutionContext& ctx, const char* a, const char* b, const char* out, F f) {
  MapSameShape<T>(ctx, out, f, a, b);
}

template <typename T, typename F>
void TernaryMapSameShape(const ExecutionContext& ctx, const char* a, const char* b, const char* c, const char* out,
                         F f) {
  MapSameShape<T>(ctx, out, f, a, b, c);
}

}  // namespace fl
