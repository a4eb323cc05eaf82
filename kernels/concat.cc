// concat: Out = the X tensors joined along `axis`; its grad hands each X its slice of Out@GRAD.
#include "grad_op_maker.h"
#include "helpers/concat_split.h"

namespace fl {

namespace {

void ConcatInferShape(InferShapeContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n >= 1, "concat: X needs at least one tensor");
  DDim out = ctx.InputDim("X", 0);
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), out.size(), "concat", ctx.Describe("X", 0));
  for (int i = 1; i < n; ++i) {
    const DDim d = ctx.InputDim("X", i);
    FL_ENFORCE(d.size() == out.size(), "concat: ", ctx.Describe("X", 0), " and ", ctx.Describe("X", i),
               " have different ranks");
    for (int j = 0; j < d.size(); ++j) {
      if (j == axis) {
        out[j] = out[j] < 0 || d[j] < 0 ? -1 : out[j] + d[j];
      } else {
        FL_ENFORCE(out[j] < 0 || d[j] < 0 || out[j] == d[j], "concat: ", ctx.Describe("X", 0), " and ",
                   ctx.Describe("X", i), " differ in dim ", j, " (only the axis=", axis, " dim may differ)");
        if (out[j] < 0) out[j] = d[j];
      }
    }
  }
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

// Each X's size along the axis, and the axis itself, from the runtime tensors.
std::vector<int64_t> AxisSizes(const std::vector<const Tensor*>& xs, int axis) {
  std::vector<int64_t> sizes;
  for (const Tensor* t : xs) sizes.push_back(t->dims()[axis]);
  return sizes;
}

std::vector<const Tensor*> Inputs(const ExecutionContext& ctx, const char* slot) {
  std::vector<const Tensor*> xs;
  for (int i = 0; i < ctx.InputSize(slot); ++i) xs.push_back(&ctx.Input(slot, i));
  return xs;
}

const auto kConcat = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const std::vector<const Tensor*> xs = Inputs(ctx, "X");
  Tensor* out = ctx.Output("Out");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), out->rank(), "concat", "Out");
  std::vector<const void*> parts;
  for (const Tensor* t : xs) parts.push_back(t->data<T>());
  ConcatParts(MakeAxisParts(out->dims(), axis, AxisSizes(xs, axis), sizeof(T)), parts,
              out->mutable_data<T>(ctx.place()));
};

const auto kConcatGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const std::vector<const Tensor*> xs = Inputs(ctx, "X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), dout.rank(), "concat_grad", "Out@GRAD");
  std::vector<void*> parts(xs.size(), nullptr);
  const int ngrad = ctx.OutputSize("X@GRAD");
  for (int i = 0; i < ngrad && i < static_cast<int>(xs.size()); ++i) {
    if (Tensor* dx = ctx.OutputOrNull("X@GRAD", i)) {
      dx->Resize(xs[i]->dims());
      parts[i] = dx->mutable_data<T>(ctx.place());
    }
  }
  SplitParts(MakeAxisParts(dout.dims(), axis, AxisSizes(xs, axis), sizeof(T)), dout.data<T>(), parts);
};

}  // namespace

FL_REGISTER_OP(concat, op) {
  op.Doc("Joins the X tensors along `axis`; all other dims must match.")
      .DuplicableInput("X", "the tensors to join, same rank and dtype")
      .Output("Out", "the joined tensor")
      .Attr<int32_t>("axis", 0, "the axis to join along; negative counts from the end")
      .Axis()
      .SetInferShape(ConcatInferShape)
      .CPUKernelAnyDType(kConcat);
  op.GradOp({"X", "Out@GRAD"})
      .Doc("Gradient of concat: X@GRAD[i] = the slice of Out@GRAD that X[i] filled (@EMPTY@ entries skipped).")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double, int32_t, int64_t>(kConcatGrad);
}

}  // namespace fl
