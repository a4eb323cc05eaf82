// tensor_array_to_tensor (Fluid 1.8's tensor_array_to_tensor_op.cc): the entries of a LoDTensorArray joined along
// `axis`, concatenated (use_stack=false: the entries differ only at axis) or stacked (a new axis; equal dims), and
// OutIndex = each entry's size along axis (int32). The gradient splits Out@GRAD back into an array shaped like X.
// Fluid runs a concat or stack op over the entries; here both are the part copies of helpers/concat_split.h.
#include "helpers/concat_split.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

void InferTensorArrayToTensor(InferShapeContext& ctx) {
  CheckArrayInput(ctx, "X");
  ctx.SetOutput("OutIndex", DDim{-1}, DType::INT32);
  DDim d = ctx.InputDim("X");  // the array's desc: the dims of its last write
  if (d.size() == 0) {         // nothing written at build time: the entries' shape is not known
    ctx.SetOutputDType("Out", ctx.InputDType("X"));
    return;
  }
  const bool stack = ctx.Attr<bool>("use_stack");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), d.size() + (stack ? 1 : 0), "tensor_array_to_tensor",
                                 Str("the entries of X '", ctx.InputName("X"), "' ", d));
  if (stack) d = InsertDim(d, axis, -1);
  else d[axis] = -1;
  ctx.SetOutput("Out", d, ctx.InputDType("X"));
}

// The entries, checked to be joinable along axis (normalised, for the entries' rank); returns Out's dims and each
// entry's part of Out along the joined axis.
struct Join {
  int axis;  // on Out
  DDim out_dims;
  std::vector<int64_t> sizes;
};
Join CheckJoin(const ExecutionContext& ctx, const TensorList& x) {
  FL_ENFORCE(!x.empty(), ctx.Type(), ": X '", ctx.InputName("X"), "' is an empty array: there is nothing to join");
  for (size_t k = 0; k < x.size(); ++k)
    FL_ENFORCE(x[k].IsInitialized(), ctx.Type(), ": entry ", k, " of X '", ctx.InputName("X"), "' (length ", x.size(),
               ") was never written");
  const bool stack = ctx.Attr<bool>("use_stack");
  const DDim& d0 = x[0].dims();
  Join j;
  j.axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), d0.size() + (stack ? 1 : 0), ctx.Type(),
                         Str("entry 0 of X '", ctx.InputName("X"), "' ", d0));
  int64_t total = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const DDim& d = x[k].dims();
    bool fits = d.size() == d0.size() && x[k].dtype() == x[0].dtype();
    for (int i = 0; fits && i < d.size(); ++i) fits = d[i] == d0[i] || (!stack && i == j.axis);
    FL_ENFORCE(fits, ctx.Type(), ": entry ", k, " of X '", ctx.InputName("X"), "' is ", DTypeName(x[k].dtype()), " ", d,
               " but entry 0 is ", DTypeName(x[0].dtype()), " ", d0,
               stack ? " (use_stack: all entries must have the same dims)"
                     : Str(" (concatenated along axis ", j.axis, ": the other dims must match)"));
    j.sizes.push_back(stack ? 1 : d[j.axis]);
    total += j.sizes.back();
  }
  if (stack) {
    j.out_dims = InsertDim(d0, j.axis, static_cast<int64_t>(x.size()));
  } else {
    j.out_dims = d0;
    j.out_dims[j.axis] = total;
  }
  return j;
}

void RunTensorArrayToTensor(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);
  const TensorList& x = InputArray(ctx, "X");
  const Join j = CheckJoin(ctx, x);
  const bool stack = ctx.Attr<bool>("use_stack");
  Tensor* index = ctx.Output("OutIndex");
  int32_t* sizes = index->mutable_data<int32_t>(DDim{static_cast<int64_t>(x.size())}, Place::CPU());
  // Fluid's OutIndex: each entry's dim at `axis` (for a stack at the end, where entries have no such dim, 1).
  for (size_t k = 0; k < x.size(); ++k)
    sizes[k] = static_cast<int32_t>(stack ? (j.axis < x[k].rank() ? x[k].dims()[j.axis] : 1) : j.sizes[k]);
  Tensor* out = ctx.Output("Out");
  out->Resize(j.out_dims);
  void* dst = out->mutable_data(ctx.place(), x[0].dtype());
  out->set_lod({});
  std::vector<const void*> parts;
  for (const Tensor& e : x) parts.push_back(e.numel() ? e.raw_data() : nullptr);
  if (out->numel()) ConcatParts(MakeAxisParts(j.out_dims, j.axis, j.sizes, SizeOf(x[0].dtype())), parts, dst);
}

void RunTensorArrayToTensorGrad(const ExecutionContext& ctx) {
  Variable* dx_var = ctx.HasOutput("X@GRAD") ? ctx.OutputVar("X@GRAD") : nullptr;
  if (!dx_var) return;
  CheckCPUPlace(ctx);
  const TensorList& x = InputArray(ctx, "X");
  const Join j = CheckJoin(ctx, x);
  const Tensor& dout = ctx.Input("Out@GRAD");
  FL_ENFORCE(dout.dims() == j.out_dims && dout.dtype() == x[0].dtype(), "tensor_array_to_tensor_grad: Out@GRAD '",
             ctx.InputName("Out@GRAD"), "' is ", DTypeName(dout.dtype()), " ", dout.dims(),
             ", but joining the entries of X '", ctx.InputName("X"), "' gives ", DTypeName(x[0].dtype()), " ",
             j.out_dims);
  TensorList dx(x.size());
  std::vector<void*> parts;
  for (size_t k = 0; k < x.size(); ++k) {
    dx[k].Resize(x[k].dims());
    parts.push_back(dx[k].mutable_data(ctx.place(), x[k].dtype()));
    dx[k].set_lod(x[k].lod());
    if (!x[k].numel()) parts.back() = nullptr;
  }
  if (dout.numel())
    SplitParts(MakeAxisParts(j.out_dims, j.axis, j.sizes, SizeOf(dout.dtype())), dout.raw_data(), parts);
  OutputArray(ctx, "X@GRAD") = std::move(dx);
}

}  // namespace

FL_REGISTER_OP(tensor_array_to_tensor, op) {
  op.Doc(
        "Out = the entries of the LoDTensorArray X joined along `axis`: concatenated (they differ only at axis) or, "
        "with use_stack, stacked on a new axis (equal dims); OutIndex = each entry's size along axis, int32.")
      .Input("X", "the LoDTensorArray (LOD_TENSOR_ARRAY), every entry written")
      .Output("Out", "the joined tensor")
      .Output("OutIndex", "int32 [len(X)]: each entry's size along axis")
      .Attr<int32_t>("axis", 0, "the axis to join along (negative counts from the last)")
      .Attr<bool>("use_stack", false, "stack the entries on a new axis instead of concatenating them")
      .SetInferShape(InferTensorArrayToTensor)
      .SetRun(RunTensorArrayToTensor);
  op.GradOp({"X", "OutIndex", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD split back into an array of entries shaped like X's.")
      .AcceptsUnread({"OutIndex"})
      .SetRun(RunTensorArrayToTensorGrad);
}

}  // namespace fl
