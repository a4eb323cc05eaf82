// What the random-tensor ops (uniform_random, gaussian_random) share: the InferShape of Out from the
// `shape` and `dtype` attrs, and the kernel that fills Out from the engine `seed` selects. Each op
// brings only its distribution: the check of its attrs and the fill.
#pragma once
#include <random>

#include "op_context.h"
#include "random.h"
#include "shape_attr.h"

namespace fl {

// Out = `shape` attr dims with the `dtype` attr (float32 or float64 only). check_params(ctx) checks the
// distribution's attrs after the dtype and before Out is set.
template <typename CheckParams>
void InferRandomOut(InferShapeContext& ctx, CheckParams check_params) {
  const DType dtype = static_cast<DType>(ctx.Attr<int32_t>("dtype"));
  FL_ENFORCE(dtype == DType::FP32 || dtype == DType::FP64, ctx.Type(), ": dtype ", DTypeName(dtype), " of Out '",
             ctx.OutputName("Out"), "' is not supported (float32, float64)");
  check_params(ctx);
  ctx.SetOutput("Out", DimsFromShapeAttr(ctx.Attr<std::vector<int64_t>>("shape"), ctx.Type()), dtype);
}

// Fills Out by fill(engine, data, numel) with the engine the `seed` attr selects (see random.h).
template <typename T, typename Fill>
void FillRandomOut(const ExecutionContext& ctx, Fill fill) {
  Tensor* out = ctx.Output("Out");
  T* p = out->mutable_data<T>(ctx.place());
  WithRandomEngine(ctx.Attr<int32_t>("seed"), [&](std::mt19937& e) { fill(e, p, out->numel()); });
}

}  // namespace fl
