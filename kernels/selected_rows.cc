// Ops on SelectedRows (sparse gradients), as Fluid names them:
//   merge_selected_rows:            Out = X with repeated rows summed, rows ascending (Fluid's MergeAdd);
//   get_tensor_from_selected_rows:  Out = X's value tensor [len(rows), ...] (dense), rows dropped.
// Gradient clipping uses them (fluidlite/clip.py), as Fluid's does. This file also lists the ops that accept a
// SelectedRows X by computing on its value (the executor's rule, csrc/sparse_rows.h): scale and
// elementwise_mul (linear: rows kept as they are), clip and clip_by_norm (merged first, as Fluid's kernels do).
#include <cstring>

#include "op_context.h"
#include "sparse_rows.h"

namespace fl {

namespace {

const SelectedRows& RowsInput(const ExecutionContext& ctx) {
  const SelectedRows* sr = ctx.InputRowsOrNull("X");
  FL_ENFORCE(sr != nullptr, ctx.Type(), ": input X '", ctx.InputName("X"), "' must hold a SelectedRows, but holds ",
             ctx.InputVar("X")->KindName());
  return *sr;
}

const bool kValueOps = [] {
  RegisterSelectedRowsValueOp("scale", false);
  RegisterSelectedRowsValueOp("elementwise_mul", false);
  RegisterSelectedRowsValueOp("clip", true);
  RegisterSelectedRowsValueOp("clip_by_norm", true);  // the norm of the merged rows is the dense gradient's
  return true;
}();

}  // namespace

FL_REGISTER_OP(merge_selected_rows, op) {
  op.Doc("Out = X (SelectedRows) with repeated rows summed into one, rows ascending (Fluid's MergeAdd).")
      .Input("X", "a SelectedRows")
      .Output("Out", "the merged SelectedRows")
      .SetInferShape([](InferShapeContext& ctx) {
        if (!ctx.IsRuntime()) ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto) {
        const SelectedRows& x = RowsInput(ctx);
        SelectedRows merged = MergeAdd(x, Str(ctx.Type(), ": X '", ctx.InputName("X"), "'"));
        *ctx.OutputVar("Out")->GetMutableSelectedRows() = std::move(merged);
      });
}

FL_REGISTER_OP(get_tensor_from_selected_rows, op) {
  op.Doc("Out = the value tensor of X (SelectedRows), [len(rows), ...]: a dense copy without the rows.")
      .Input("X", "a SelectedRows")
      .Output("Out", "its value as a LoDTensor")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.IsRuntime()) return;  // the kernel sizes Out: the number of rows is known only then
        DDim d = ctx.InputDim("X");
        if (d.size() >= 1) d[0] = -1;
        ctx.SetOutput("Out", d, ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const SelectedRows& x = RowsInput(ctx);
        Tensor* out = ctx.Output("Out");
        T* o = out->mutable_data<T>(x.value.dims(), ctx.place());
        if (x.value.numel()) std::memcpy(o, x.value.data<T>(), x.value.numel() * sizeof(T));
      });
}

}  // namespace fl
