// Comparison ops: Out (bool) = X <op> Y elementwise, with the elementwise broadcasting rule (`axis`).
// No gradient flows through them (the output is boolean). LR schedules use them (piecewise_decay), as do
// user conditions.
#include <functional>

#include "helpers/broadcast.h"

namespace fl {

namespace {

template <typename Cmp>
void RegisterCompare(OpBuilder& op, const char* doc) {
  op.Doc(doc)
      .Input("X", "left operand")
      .Input("Y", "right operand, broadcast into X by the elementwise rule")
      .Output("Out", "bool result")
      .Attr<int32_t>("axis", -1, "where Y's dims align inside X's (-1: trailing)")
      .Attr<bool>("force_cpu", false, "keep the result on the CPU")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        InferBroadcastShape(ctx);
        ctx.SetOutputDType("Out", DType::BOOL);
      })
      .template CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        FL_ENFORCE(x.dtype() == y.dtype(), ctx.Type(), ": X '", ctx.InputName("X"), "' is ", DTypeName(x.dtype()),
                   " but Y '", ctx.InputName("Y"), "' is ", DTypeName(y.dtype()));
        BroadcastPlan plan = MakeBroadcastPlan(x.dims(), y.dims(), ctx.Attr<int32_t>("axis"), ctx.Type(),
                                               ctx.InputName("X"), ctx.InputName("Y"));
        Tensor* out = ctx.Output("Out");
        out->Resize(plan.out_dims);
        BroadcastBinary(plan, x.data<T>(), y.data<T>(), out->mutable_data<bool>(ctx.place()),
                        [](T a, T b) { return Cmp{}(a, b); });
      });
}

}  // namespace

FL_REGISTER_OP(less_than, op) {
  RegisterCompare<std::less<>>(op, "Out = X < Y (bool), elementwise with broadcasting.");
}
FL_REGISTER_OP(less_equal, op) {
  RegisterCompare<std::less_equal<>>(op, "Out = X <= Y (bool), elementwise with broadcasting.");
}
FL_REGISTER_OP(greater_than, op) {
  RegisterCompare<std::greater<>>(op, "Out = X > Y (bool), elementwise with broadcasting.");
}
FL_REGISTER_OP(greater_equal, op) {
  RegisterCompare<std::greater_equal<>>(op, "Out = X >= Y (bool), elementwise with broadcasting.");
}
FL_REGISTER_OP(equal, op) {
  RegisterCompare<std::equal_to<>>(op, "Out = X == Y (bool), elementwise with broadcasting.");
}
FL_REGISTER_OP(not_equal, op) {
  RegisterCompare<std::not_equal_to<>>(op, "Out = X != Y (bool), elementwise with broadcasting.");
}

}  // namespace fl
