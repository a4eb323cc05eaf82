// fill_constant_batch_size_like: a constant tensor of `shape` whose dim output_dim_idx is taken from
// Input's dim input_dim_idx (StaticRNN boots memories with it: the batch size is known only at run time).
#include <algorithm>

#include "op_context.h"

namespace fl {

namespace {
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

FL_REGISTER_OP(fill_constant_batch_size_like, op) {
  op.Doc("Out = a tensor of `shape` filled with `value`, with Out.dims[output_dim_idx] = Input.dims[input_dim_idx].")
      .Input("Input", "tensor whose batch size is copied")
      .Output("Out", "the filled tensor")
      .Attr<std::vector<int32_t>>("shape", {}, "output shape (the batch dim is replaced)")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "output dtype (VarType value)")
      .Attr<float>("value", 0.0f, "fill value")
      .Attr<int32_t>("input_dim_idx", 0, "which dim of Input holds the batch size")
      .Attr<int32_t>("output_dim_idx", 0, "which dim of Out receives it")
      .Attr<bool>("force_cpu", false, "keep the output on the CPU")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", BatchSizeLikeDims(ctx), static_cast<DType>(ctx.Attr<int32_t>("dtype")));
      })
      .SetKernelDType([](const ExecutionContext& ctx) { return static_cast<DType>(ctx.Attr<int32_t>("dtype")); })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        T* p = out->mutable_data<T>(ctx.place());
        std::fill(p, p + out->numel(), static_cast<T>(ctx.Attr<float>("value")));
      });
}

}  // namespace fl
