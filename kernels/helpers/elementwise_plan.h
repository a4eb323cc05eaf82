// What the binary elementwise ops' CPU and CUDA kernels (kernels/elementwise.cc, kernels/cuda/elementwise.cu) both
// start with: the broadcast plan of X and Y under the op's axis (dtypes checked), and whether the op divides (its
// integer kernels check for zero divisors first).
#pragma once
#include <type_traits>

#include "broadcast.h"
#include "op_context.h"

namespace fl {
namespace binary_fn {

template <typename Op, typename = void>
struct Divides : std::false_type {};
template <typename Op>
struct Divides<Op, std::void_t<decltype(Op::kDivides)>> : std::true_type {};

}  // namespace binary_fn

inline BroadcastPlan ElementwisePlan(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  FL_ENFORCE(x.dtype() == y.dtype(), ctx.Type(), ": X '", ctx.InputName("X"), "' is ", DTypeName(x.dtype()), " but Y '",
             ctx.InputName("Y"), "' is ", DTypeName(y.dtype()));
  return MakeBroadcastPlan(x.dims(), y.dims(), ctx.Attr<int32_t>("axis"), ctx.Type(), ctx.InputName("X"),
                           ctx.InputName("Y"));
}

// The grad ops' plan: the forward's, with Out@GRAD checked to have the forward output's dims.
inline BroadcastPlan ElementwiseGradPlan(const ExecutionContext& ctx, const Tensor& x, const Tensor& y,
                                         const Tensor& dout) {
  BroadcastPlan plan = ElementwisePlan(ctx, x, y);
  FL_ENFORCE(dout.dims() == plan.out_dims, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' has dims ",
             dout.dims(), " but the forward output has ", plan.out_dims);
  return plan;
}

}  // namespace fl
