// cast: Out = X converted to out_dtype (C++ static_cast per element; to bool means != 0, like numpy).
// The kernel is chosen by X's dtype and the output type by VisitDType, so every pair of plain dtypes
// works without a table of pairs.
#include "grad_op_maker.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(cast, op) {
  op.Doc("Out = X converted to out_dtype.")
      .Input("X", "tensor to convert")
      .Output("Out", "X's values as out_dtype, same shape")
      .Attr<int32_t>("in_dtype", static_cast<int32_t>(DType::FP32), "dtype of X (VarType value)")
      .DTypeValue()
      .Attr<int32_t>("out_dtype", static_cast<int32_t>(DType::FP32), "dtype of Out (VarType value)")
      .DTypeValue()
      .SetInferShape([](InferShapeContext& ctx) {
        const DType out = static_cast<DType>(ctx.Attr<int32_t>("out_dtype"));
        FL_ENFORCE(IsPlainDType(out), "cast: out_dtype ", DTypeName(out), " (", static_cast<int>(out), ") of Out '",
                   ctx.OutputName("Out"), "' is not supported");
        ctx.SetOutput("Out", ctx.InputDim("X"), out);
        ctx.ShareLoD("X", "Out");
      });
  op.CPUKernelAnyDType([](const ExecutionContext& ctx, auto in_tag) {
      using In = typename decltype(in_tag)::type;
      const Tensor& x = ctx.Input("X");
      Tensor* out = ctx.Output("Out");
      // Out may be X itself: keep X's buffer alive in case mutable_data replaces it.
      std::shared_ptr<Allocation> keep = x.holder();
      const In* xp = x.data<In>();
      const int64_t n = x.numel();
      VisitDType(static_cast<DType>(ctx.Attr<int32_t>("out_dtype")), [&](auto out_tag) {
        using O = typename decltype(out_tag)::type;
        O* op = out->mutable_data<O>(ctx.place());
        for (int64_t i = 0; i < n; ++i) op[i] = static_cast<O>(xp[i]);
      });
    }).Grad([](GradOpMaker& g) {
    // The gradient flows back through the inverse cast.
    OpDesc& op = g.NewOp("cast", false);
    op.SetInput("X", g.OutputGrad("Out"));
    op.SetOutput("Out", g.InputGrad("X"));
    op.SetAttr("in_dtype", g.Attr<int32_t>("out_dtype"));
    op.SetAttr("out_dtype", g.Attr<int32_t>("in_dtype"));
  });
}

}  // namespace fl
