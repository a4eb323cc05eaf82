// sequence_reshape: each sequence's values re-cut into rows of new_dim: a sequence of len rows of D values becomes
// len * D / new_dim rows. The bytes do not move, so Out is a view of X's buffer (as reshape2 is) and only the dims
// and the last LoD level change; the gradient is the same view back.
#include <vector>

#include "helpers/lod.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(sequence_reshape, op) {
  op.Doc(
        "Out = X's sequences with rows of new_dim values: sequence i of len_i rows of D values becomes "
        "len_i * D / new_dim rows (len_i * D must divide by new_dim). Out shares X's buffer.")
      .Input("X", "[N, D] LoDTensor")
      .Output("Out", "[N * D / new_dim, new_dim], the last LoD level rescaled")
      .RequiredAttr<int32_t>("new_dim", 1, "the row width of Out")
      .Min(1)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 2, ctx.Type(), ": ", ctx.Describe("X"), " must have rank 2 [rows, D]");
        if (ctx.IsRuntime()) return;  // the kernel sets Out's dims and LoD (it checks each sequence)
        ctx.SetOutput("Out", DDim{-1, ctx.Attr<int32_t>("new_dim")}, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .KernelDTypeFrom("X")
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) {
        const Tensor& x = ctx.Input("X");
        const LoD& lod = CheckedLoD(ctx, "X");
        const int64_t width = x.dims()[1], new_dim = ctx.Attr<int32_t>("new_dim");
        LoD out_lod = lod;
        std::vector<size_t>& out_offsets = out_lod.back();
        ForEachSequence(lod.back(), [&](int64_t s, int64_t begin, int64_t end) {
          const int64_t values = (end - begin) * width;
          FL_ENFORCE(values % new_dim == 0, ctx.Type(), ": sequence ", s, " of X '", ctx.InputName("X"), "' ", x.dims(),
                     " LoD ", x.LoDString(), " (rows [", begin, ", ", end, "), ", end - begin, " x ", width, " = ",
                     values, " values) does not divide into rows of new_dim = ", new_dim);
          out_offsets[s + 1] = out_offsets[s] + values / new_dim;
        });
        Tensor* out = ctx.Output("Out");
        out->ShareDataWith(x);
        out->Resize(DDim{x.dims()[0] * width / new_dim, new_dim});
        out->set_lod(out_lod);
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD's buffer with X's dims (a view).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto) {
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(dout.numel() == x.numel() && dout.dtype() == x.dtype(), ctx.Type(), ": Out@GRAD '",
                   ctx.InputName("Out@GRAD"), "' ", DTypeName(dout.dtype()), " ", dout.dims(), " must hold the ",
                   x.numel(), " ", DTypeName(x.dtype()), " values of X '", ctx.InputName("X"), "' ", x.dims());
        dx->ShareDataWith(dout);
        dx->Resize(x.dims());
      });
}

}  // namespace fl
