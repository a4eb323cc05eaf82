// The fill ops: a tensor of one value, shaped by an attribute (fill_constant), by another tensor
// (fill_any_like, fill_zeros_like), or by an attribute whose batch dim comes from another tensor at run time
// (fill_constant_batch_size_like: StaticRNN boots memories with it). No gradient flows through the *_like
// ops: their outputs do not depend on the values they take a shape from.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "helpers/shape_attr.h"
#include "op_context.h"

namespace fl {

namespace {

// Out = `value` everywhere (Out already shaped).
template <typename T>
void FillOut(const ExecutionContext& ctx, T value) {
  Tensor* out = ctx.Output("Out");
  T* p = out->mutable_data<T>(ctx.place());
  std::fill(p, p + out->numel(), value);
}

DType DTypeAttr(const ExecutionContext& ctx) { return static_cast<DType>(ctx.Attr<int32_t>("dtype")); }

DDim BatchSizeLikeDims(InferShapeContext& ctx) {
  const auto& shape = ctx.Attr<std::vector<int32_t>>("shape");
  int in_idx = ctx.Attr<int32_t>("input_dim_idx"), out_idx = ctx.Attr<int32_t>("output_dim_idx");
  DDim in = ctx.InputDim("Input");
  FL_ENFORCE(in_idx >= 0 && in_idx < in.size(), "fill_constant_batch_size_like: input_dim_idx ", in_idx,
             " is out of range for Input '", ctx.InputName("Input"), "' ", in);
  FL_ENFORCE(out_idx >= 0 && out_idx < static_cast<int>(shape.size()), "fill_constant_batch_size_like: output_dim_idx ",
             out_idx, " is out of range for shape of rank ", shape.size());
  DDim out;
  for (auto d : shape) out.push_back(d);
  out[out_idx] = in[in_idx];
  return out;
}

}  // namespace

FL_REGISTER_OP(fill_constant, op) {
  op.Doc("Creates a tensor of the given shape and dtype filled with `value`.")
      .Output("Out", "the filled tensor")
      .Attr<std::vector<int64_t>>("shape", {}, "output shape")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "output dtype (VarType value)")
      .DTypeValue()
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<std::string>("str_value", "", "fill value as a string (exact for int64)")
      .Attr<bool>("force_cpu", false, "keep the output on the CPU")
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", DimsFromShapeAttr(ctx.Attr<std::vector<int64_t>>("shape"), "fill_constant"),
                      static_cast<DType>(ctx.Attr<int32_t>("dtype")));
      })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const std::string& s = ctx.Attr<std::string>("str_value");
        if (s.empty()) return FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
        if constexpr (std::is_floating_point_v<T>) FillOut<T>(ctx, static_cast<T>(std::stod(s)));
        else FillOut<T>(ctx, static_cast<T>(std::stoll(s)));
      });
}

// Seeds gradients of targets whose batch dim is only known at run time.
FL_REGISTER_OP(fill_any_like, op) {
  op.Doc("Out = a tensor with X's shape filled with `value` (dtype: X's, or `dtype` if set >= 0).")
      .Input("X", "shape reference")
      .Output("Out", "the filled tensor")
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<int32_t>("dtype", -1, "output dtype (VarType value); -1 keeps X's dtype")
      .DTypeValue(true)
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        int dt = ctx.Attr<int32_t>("dtype");
        ctx.SetOutput("Out", ctx.InputDim("X"), dt < 0 ? ctx.InputDType("X") : static_cast<DType>(dt));
        ctx.ShareLoD("X", "Out");
      })
      .SetKernelDType([](const ExecutionContext& ctx) {
        return ctx.Attr<int32_t>("dtype") < 0 ? ctx.Input("X").dtype() : DTypeAttr(ctx);
      })
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        ctx.Output("Out")->Resize(ctx.Input("X").dims());
        FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
      });
}

FL_REGISTER_OP(fill_zeros_like, op) {
  op.Doc("Out = zeros shaped and typed like X.")
      .Input("X", "tensor whose dims and dtype Out takes")
      .Output("Out", "zeros")
      .SetInferShape(InferSameShapeAsX)
      .NoGradient()
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        T* p = out->mutable_data<T>(ctx.place());
        std::memset(static_cast<void*>(p), 0, out->numel() * sizeof(T));  // all-zero bytes are 0 for every T
      });
}

FL_REGISTER_OP(fill_constant_batch_size_like, op) {
  op.Doc("Out = a tensor of `shape` filled with `value`, with Out.dims[output_dim_idx] = Input.dims[input_dim_idx].")
      .Input("Input", "tensor whose batch size is copied")
      .Output("Out", "the filled tensor")
      .Attr<std::vector<int32_t>>("shape", {}, "output shape (the batch dim is replaced)")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "output dtype (VarType value)")
      .DTypeValue()
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<int32_t>("input_dim_idx", 0, "which dim of Input holds the batch size")
      .Range(0, DDim::kMaxRank - 1)
      .Attr<int32_t>("output_dim_idx", 0, "which dim of Out receives it")
      .Range(0, DDim::kMaxRank - 1)
      .Attr<bool>("force_cpu", false, "keep the output on the CPU")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", BatchSizeLikeDims(ctx), static_cast<DType>(ctx.Attr<int32_t>("dtype")));
      })
      .SetKernelDType(DTypeAttr)
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
      });
}

}  // namespace fl
