// sequence_reverse: Y has X's dims and LoD, the rows of each sequence in reverse order. One LoD level only, as in
// Fluid (with two, "reverse each sequence" could mean either level). Its gradient is the same op on Y@GRAD.
#include <cstring>

#include "grad_op_maker.h"
#include "helpers/lod.h"

namespace fl {

FL_REGISTER_OP(sequence_reverse, op) {
  op.Doc("Y = the rows of each sequence of X (one LoD level) in reverse order; Y has X's dims and LoD.")
      .Input("X", "LoDTensor of rank >= 2 with one LoD level")
      .Output("Y", "X with each sequence's rows reversed")
      .SetInferShape([](InferShapeContext& ctx) {
        FL_ENFORCE(ctx.InputDim("X").size() >= 2, ctx.Type(), ": ", ctx.Describe("X"), " must have rank >= 2");
        SameShapeAsInput(ctx, "X", "Y");
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t, uint8_t, int8_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
        FL_ENFORCE(xt.lod().size() == 1, ctx.Type(), ": X '", ctx.InputName("X"), "' ", xt.dims(), " has ",
                   xt.lod().size(), " LoD levels ", xt.LoDString(), "; only one level is supported");
        const int64_t width = xt.dims()[0] > 0 ? xt.numel() / xt.dims()[0] : 0;
        const T* x = xt.data<T>();
        T* y = ctx.Alloc<T>("Y");
        ParallelForEachSequence(offsets, width, [&](int64_t, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) std::memcpy(y + i * width, x + (b + e - 1 - i) * width, width * sizeof(T));
        });
      })
      .Grad([](GradOpMaker& g) {  // reversing is its own inverse: X@GRAD = sequence_reverse(Y@GRAD)
        OpDesc& op = g.NewOp("sequence_reverse");
        op.SetInput("X", g.OutputGrad("Y"));
        op.SetOutput("Y", g.InputGrad("X"));
      });
}

}  // namespace fl
