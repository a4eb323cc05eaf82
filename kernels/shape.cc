// shape: Out = Input's dims as an int32 vector. size: Out = Input's element count as an int64 [1]. Neither
// reads Input's values, and no gradient flows through them. Their CUDA kernels are the CPU ones writing host memory:
// a GPU program reads the dims without copying Input to the host, and Out (small, read on the host by the shape
// consumers' attributes) is copied to the device only if a GPU kernel reads it.
#include "op_context.h"

namespace fl {

namespace {

void WriteShape(const ExecutionContext& ctx) {
  const DDim d = ctx.Input("Input").dims();
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{static_cast<int64_t>(d.size())});
  int32_t* p = out->mutable_data<int32_t>(Place::CPU());
  for (int i = 0; i < d.size(); ++i) p[i] = static_cast<int32_t>(d[i]);
}

void WriteSize(const ExecutionContext& ctx) {
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{1});
  *out->mutable_data<int64_t>(Place::CPU()) = ctx.Input("Input").numel();
}

}  // namespace

FL_REGISTER_OP(shape, op) {
  op.Doc("Out = the dims of Input, int32 [rank(Input)].")
      .Input("Input", "the tensor whose shape is read")
      .Output("Out", "int32 [rank(Input)]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", DDim{static_cast<int64_t>(ctx.InputDim("Input").size())}, DType::INT32);
      })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) { WriteShape(ctx); })
      .KernelAnyDType(PlaceKind::CUDA, [](const ExecutionContext& ctx, auto) { WriteShape(ctx); });
}

FL_REGISTER_OP(size, op) {
  op.Doc("Out = the number of elements of Input, int64 [1].")
      .Input("Input", "the tensor whose elements are counted")
      .Output("Out", "int64 [1]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) { ctx.SetOutput("Out", DDim{1}, DType::INT64); })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) { WriteSize(ctx); })
      .KernelAnyDType(PlaceKind::CUDA, [](const ExecutionContext& ctx, auto) { WriteSize(ctx); });
}

}  // namespace fl
