// accuracy: the fraction of rows whose label is among their top-k Indices (from top_k).
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(accuracy, op) {
  op.Doc("Accuracy = Correct / Total, where a row is correct if Label is among its top-k Indices.")
      .Input("Out", "top-k scores [N, k] (only its dtype and shape are used)")
      .Input("Indices", "top-k class ids, int64 [N, k]")
      .Input("Label", "true class ids, int64 [N, 1]")
      .Output("Accuracy", "correct / total, float32 [1]")
      .Output("Correct", "number of correct rows, int32 [1]")
      .Output("Total", "number of rows, int32 [1]")
      .KernelDTypeFrom("Out")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim out = ctx.InputDim("Out");
        const DDim idx = ctx.InputDim("Indices");
        const DDim label = ctx.InputDim("Label");
        FL_ENFORCE(idx.size() == 2, "accuracy: ", ctx.Describe("Indices"), " must be [N, k]");
        FL_ENFORCE(out.size() == 2 && (out[0] < 0 || idx[0] < 0 || out[0] == idx[0]) &&
                       (out[1] < 0 || idx[1] < 0 || out[1] == idx[1]),
                   "accuracy: ", ctx.Describe("Out"), " and ", ctx.Describe("Indices"), " must have the same shape");
        FL_ENFORCE(label.size() == 2 && (label[1] == 1 || label[1] < 0), "accuracy: ", ctx.Describe("Label"),
                   " must be [N, 1]");
        FL_ENFORCE(label[0] < 0 || idx[0] < 0 || label[0] == idx[0], "accuracy: ", ctx.Describe("Label"), " and ",
                   ctx.Describe("Indices"), " have different numbers of rows");
        FL_ENFORCE(ctx.InputDType("Indices") == DType::INT64 && ctx.InputDType("Label") == DType::INT64,
                   "accuracy: Indices '", ctx.InputName("Indices"), "' and Label '", ctx.InputName("Label"),
                   "' must be int64, got ", DTypeName(ctx.InputDType("Indices")), " and ",
                   DTypeName(ctx.InputDType("Label")));
        ctx.SetOutput("Accuracy", DDim{1}, DType::FP32);
        if (ctx.HasOutput("Correct")) ctx.SetOutput("Correct", DDim{1}, DType::INT32);
        if (ctx.HasOutput("Total")) ctx.SetOutput("Total", DDim{1}, DType::INT32);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto) {
        const Tensor& idx_t = ctx.Input("Indices");
        const Tensor& label_t = ctx.Input("Label");
        const int64_t rows = idx_t.dims()[0];
        const int64_t k = idx_t.dims()[1];
        FL_ENFORCE(label_t.numel() == rows, "accuracy: Label '", ctx.InputName("Label"), "' ", label_t.dims(),
                   " does not have one label per row of Indices ", idx_t.dims());
        const int64_t* idx = idx_t.data<int64_t>();
        const int64_t* label = label_t.data<int64_t>();
        int64_t correct = 0;
        for (int64_t n = 0; n < rows; ++n) {
          bool hit = false;
          for (int64_t j = 0; j < k; ++j) hit |= idx[n * k + j] == label[n];
          correct += hit;
        }
        *ctx.Alloc<float>("Accuracy") = rows ? static_cast<float>(correct) / static_cast<float>(rows) : 0.0f;
        if (Tensor* t = ctx.OutputOrNull("Correct"))
          *t->mutable_data<int32_t>(DDim{1}, ctx.place()) = static_cast<int32_t>(correct);
        if (Tensor* t = ctx.OutputOrNull("Total"))
          *t->mutable_data<int32_t>(DDim{1}, ctx.place()) = static_cast<int32_t>(rows);
      });
}

}  // namespace fl
