// Tensor arrays (LOD_TENSOR_ARRAY, a list of LoDTensors in the scope), Fluid 1.8's
// controlflow/tensor_array_read_write_op.cc and lod_array_length_op.cc:
//   write_to_array   Out[I] = X (a copy, with X's LoD); the array grows to I + 1 entries, the others untouched
//   read_from_array  Out = X[I] (a copy, with the entry's LoD)
//   lod_array_length Out = len(X), int64 [1]
// Kernel-less ops: they move tensors of any dtype. Gradients: read_from_array's writes Out@GRAD into the gradient
// array at I (write_to_array, as Fluid); write_to_array's reads the gradient array at I, or gives zeros shaped like
// X where that entry is missing or empty (an entry the loss does not depend on). Inside a While loop the gradient
// array is shared by every iteration, so a write grows it and leaves the other entries alone.
#include "grad_op_maker.h"
#include "helpers/tensor_array.h"
#include "logging.h"
#include "op_context.h"
#include "step_block_runner.h"  // FillZerosLike

namespace fl {

namespace {

void InferWriteToArray(InferShapeContext& ctx) {
  CheckArrayIndexInput(ctx);
  if (!ctx.HasInputAt("X", 0)) return;  // as Fluid: nothing to infer without X
  FL_ENFORCE(ctx.InputKind("X") != VarKind::LOD_TENSOR_ARRAY, ctx.Type(), ": X '", ctx.InputName("X"),
             "' is a LOD_TENSOR_ARRAY; an array entry is a LoDTensor");
  // The array's desc takes the dims, dtype and LoD level of its last write (Fluid's rule). Its entries may have
  // other shapes (a shrinking batch), so write_to_array_grad, which runs this function over its own inputs to check
  // them (CheckAgainstForward), must not compare a gradient entry with the array's dims: only the op itself sets them.
  if (ctx.Type() == ctx.Info().type) ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

void InferReadFromArray(InferShapeContext& ctx) {
  CheckArrayIndexInput(ctx);
  CheckArrayInput(ctx, "X");
  ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

void RunWriteToArray(const ExecutionContext& ctx) {
  const int64_t i = ArrayIndexInput(ctx);
  FL_ENFORCE(i < kMaxTensorArrayLength, "write_to_array: index I '", ctx.InputName("I"), "' is ", i,
             ", beyond the longest array fluidlite makes (", kMaxTensorArrayLength, " entries); array Out '",
             ctx.OutputName("Out"), "'");
  TensorList& array = OutputArray(ctx, "Out");
  const Tensor* x = ctx.InputOrNull("X");
  if (array.size() <= static_cast<size_t>(i)) {
    FL_VLOG(10) << "Resize " << ctx.OutputName("Out") << " from " << array.size() << " to " << i + 1;
    array.resize(i + 1);
  }
  // A fresh buffer, never the old entry's: a tensor read out of the array earlier may still share that one.
  Tensor entry;
  if (x) TensorCopy(*x, ctx.place(), &entry);
  else FL_VLOG(10) << "write_to_array: X '" << ctx.InputName("X") << "' holds no tensor; entry " << i << " is empty";
  array[i] = std::move(entry);
}

void RunReadFromArray(const ExecutionContext& ctx) {
  const TensorList& array = InputArray(ctx, "X");
  const int64_t i = ArrayIndexInput(ctx);
  FL_ENFORCE(i < static_cast<int64_t>(array.size()), "read_from_array: index I '", ctx.InputName("I"), "' is ", i,
             ", out of range for array X '", ctx.InputName("X"), "' of length ", array.size());
  const Tensor& entry = array[i];
  FL_ENFORCE(entry.IsInitialized(), "read_from_array: entry ", i, " of array X '", ctx.InputName("X"), "' (length ",
             array.size(), ") was never written");
  TensorCopy(entry, ctx.place(), ctx.Output("Out"));  // a copy, as Fluid: ops may write Out in place
}

void RunWriteToArrayGrad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  CheckCPUPlace(ctx);
  const Tensor* x = ctx.InputOrNull("X");
  if (!x) return;  // the forward op wrote an empty entry: no gradient flows to an unset X
  const int64_t i = ArrayIndexInput(ctx);
  const TensorList* dout = ctx.HasInput("Out@GRAD") ? &InputArray(ctx, "Out@GRAD") : nullptr;
  const Tensor* g = dout && i < static_cast<int64_t>(dout->size()) ? &(*dout)[i] : nullptr;
  if (!g || !g->IsInitialized() || g->numel() == 0) {
    FillZerosLike(*x, ctx.place(), dx);  // the loss does not depend on this entry
  } else {
    FL_ENFORCE(g->dims() == x->dims() && g->dtype() == x->dtype(), "write_to_array_grad: entry ", i,
               " of the gradient array Out@GRAD '", ctx.InputName("Out@GRAD"), "' is ", DTypeName(g->dtype()), " ",
               g->dims(), ", but X '", ctx.InputName("X"), "' written there is ", DTypeName(x->dtype()), " ",
               x->dims());
    dx->Clear();  // a buffer of its own: the gradient array keeps its entry
    TensorCopy(*g, ctx.place(), dx);
  }
  dx->set_lod(x->lod());
}

}  // namespace

FL_REGISTER_OP(write_to_array, op) {
  op.Doc(
        "Out[I] = X: writes a copy of X (with its LoD) at index I of the LoDTensorArray Out, growing it to I + 1 "
        "entries if it is shorter; the other entries are kept.")
      .Input("X", "the LoDTensor to write (any dtype)")
      .Input("I", "the index, an int64 (or int32) tensor of one element, >= 0")
      .Output("Out", "the LoDTensorArray written (LOD_TENSOR_ARRAY)")
      .NonDifferentiable({"I"})
      .SetInferShape(InferWriteToArray)
      .SetRun(RunWriteToArray);
  // Fluid's gradient is read_from_array of Out@GRAD, which leaves X@GRAD unset when that entry is missing; this one
  // gives zeros shaped like X there, so the ops before the write still get a gradient.
  op.GradOp({"X", "I", "Out@GRAD"})
      .Doc(
          "X@GRAD = Out@GRAD[I] (the gradient array's entry at I), or zeros shaped like X where that entry is missing "
          "or empty.")
      .Optional({"Out@GRAD"})
      .SetRun(RunWriteToArrayGrad);
}

FL_REGISTER_OP(read_from_array, op) {
  op.Doc(
        "Out = X[I]: a copy of entry I of the LoDTensorArray X, with its LoD. An index beyond the array's length, or "
        "an entry never written, is an error.")
      .Input("X", "the LoDTensorArray to read (LOD_TENSOR_ARRAY)")
      .Input("I", "the index, an int64 (or int32) tensor of one element, >= 0")
      .Output("Out", "the entry read")
      .NonDifferentiable({"I"})
      .SetInferShape(InferReadFromArray)
      .SetRun(RunReadFromArray)
      .Grad([](GradOpMaker& g) {  // X@GRAD[I] = Out@GRAD, in the gradient array (Fluid's gradient)
        OpDesc& op = g.NewOp("write_to_array");
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetInput("I", g.Input("I"));
        op.SetOutput("Out", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(lod_array_length, op) {
  op.Doc("Out = the number of entries of the LoDTensorArray X, int64 [1].")
      .Input("X", "the LoDTensorArray (LOD_TENSOR_ARRAY)")
      .Output("Out", "int64 [1]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        CheckArrayInput(ctx, "X");
        ctx.SetOutput("Out", DDim{1}, DType::INT64);
      })
      .SetRun([](const ExecutionContext& ctx) {
        const TensorList& array = InputArray(ctx, "X");
        ctx.Output("Out")->mutable_data<int64_t>(DDim{1}, Place::CPU())[0] = static_cast<int64_t>(array.size());
      });
}

}  // namespace fl
