// fill_constant: Out = a tensor of `shape` filled with `value`, of any dtype.
#include "op_context.h"

namespace fl {

namespace {
DDim ShapeAttr(const std::vector<int64_t>& shape, const std::string& op) {
  for (auto d : shape) FL_ENFORCE(d >= 0, op, ": shape ", DDim(shape), " has a negative dim");
  return DDim(shape);
}
}  // namespace

FL_REGISTER_OP(fill_constant, op) {
  op.Doc("Creates a tensor of the given shape and dtype filled with `value`.")
      .Output("Out", "the filled tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "output shape")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "output dtype (VarType value)")
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<std::string>("str_value", "", "fill value as a string (exact for int64)")
      .Attr<bool>("force_cpu", false, "keep the output on the CPU")
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", ShapeAttr(ctx.Attr<std::vector<int64_t>>("shape"), "fill_constant"),
                      static_cast<DType>(ctx.Attr<int32_t>("dtype")));
      })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const std::string& s = ctx.Attr<std::string>("str_value");
        T v;
        if (!s.empty()) {
          if constexpr (std::is_floating_point_v<T>) v = static_cast<T>(std::stod(s));
          else v = static_cast<T>(std::stoll(s));
        } else {
          v = static_cast<T>(ctx.Attr<float>("value"));
        }
        Tensor* out = ctx.Output("Out");
        T* p = out->mutable_data<T>(ctx.place());
        std::fill(p, p + out->numel(), v);
      });
}

}  // namespace fl

namespace fl {

// fill_any_like: a tensor shaped like X filled with `value` (seeds gradients of targets whose batch
// dim is only known at run time).
FL_REGISTER_OP(fill_any_like, op) {
  op.Doc("Out = a tensor with X's shape filled with `value` (dtype: X's, or `dtype` if set >= 0).")
      .Input("X", "shape reference")
      .Output("Out", "the filled tensor")
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<int32_t>("dtype", -1, "output dtype (VarType value); -1 keeps X's dtype")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        int dt = ctx.Attr<int32_t>("dtype");
        ctx.SetOutput("Out", ctx.InputDim("X"), dt < 0 ? ctx.InputDType("X") : static_cast<DType>(dt));
      })
      .SetKernelDType([](const ExecutionContext& ctx) {
        int dt = ctx.Attr<int32_t>("dtype");
        return dt < 0 ? ctx.Input("X").dtype() : static_cast<DType>(dt);
      })
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        out->Resize(ctx.Input("X").dims());
        T* p = out->mutable_data<T>(ctx.place());
        std::fill(p, p + out->numel(), static_cast<T>(ctx.Attr<float>("value")));
      });
}

}  // namespace fl
