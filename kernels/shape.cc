// shape: Out = Input's dims as an int32 vector. size: Out = Input's element count as an int64 [1]. Neither
// reads Input's values, and no gradient flows through them.
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(shape, op) {
  op.Doc("Out = the dims of Input, int32 [rank(Input)].")
      .Input("Input", "the tensor whose shape is read")
      .Output("Out", "int32 [rank(Input)]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", DDim{static_cast<int64_t>(ctx.InputDim("Input").size())}, DType::INT32);
      })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) {
        const DDim d = ctx.Input("Input").dims();
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{static_cast<int64_t>(d.size())});
        int32_t* p = out->mutable_data<int32_t>(ctx.place());
        for (int i = 0; i < d.size(); ++i) p[i] = static_cast<int32_t>(d[i]);
      });
}

FL_REGISTER_OP(size, op) {
  op.Doc("Out = the number of elements of Input, int64 [1].")
      .Input("Input", "the tensor whose elements are counted")
      .Output("Out", "int64 [1]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) { ctx.SetOutput("Out", DDim{1}, DType::INT64); })
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) {
        ctx.Output("Out")->Resize(DDim{1});
        *ctx.Alloc<int64_t>("Out") = ctx.Input("Input").numel();
      });
}

}  // namespace fl
