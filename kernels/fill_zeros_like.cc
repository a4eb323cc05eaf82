// fill_zeros_like: Out = zeros with X's dims, dtype and LoD.
#include <cstring>

#include "op_context.h"

namespace fl {

FL_REGISTER_OP(fill_zeros_like, op) {
  op.Doc("Out = zeros shaped and typed like X.")
      .Input("X", "tensor whose dims and dtype Out takes")
      .Output("Out", "zeros")
      .SetInferShape(InferSameShapeAsX)
      .NoGradient();
  op.CPUKernelAnyDType([](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    Tensor* out = ctx.Output("Out");
    T* p = out->mutable_data<T>(ctx.place());
    std::memset(static_cast<void*>(p), 0, out->numel() * sizeof(T));  // all-zero bytes are 0 for every T
  });
}

}  // namespace fl
