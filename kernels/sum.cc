// sum: Out = X[0] + X[1] + ... + X[n-1]. Backward aggregates gradients with it, so it is one pass
// over memory: each output block is accumulated in a small stack buffer that stays in L1, reading
// every input once and writing Out once. Empty or uninitialized inputs are skipped (a gradient nobody
// produced is zero). When Out is X[0] the result lands in X[0]'s buffer with no extra copy.
#include <algorithm>
#include <cstring>
#include <vector>

#include "grad_op_maker.h"
#include "op_context.h"
#include "sum_into.h"

namespace fl {

namespace {

void InferSum(InferShapeContext& ctx) {
  // At run time the kernel shapes Out from the inputs that are actually there (some may be unset).
  if (ctx.IsRuntime()) return;
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n > 0, "sum: input X is empty (Out '", ctx.OutputName("Out"), "')");
  int first = -1;  // first input with known dims: Out takes its dims and dtype
  for (int i = 0; i < n; ++i) {
    DDim d = ctx.InputDim("X", i);
    // Rank 0 is a shape not set at build time; unknown or empty inputs are not checked (empty ones are
    // skipped at run time).
    if (d.size() == 0 || d.numel() <= 0) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    DDim f = ctx.InputDim("X", first);
    FL_ENFORCE(d.numel() == f.numel(), "sum: inputs must have the same number of elements; X[", first, "] '",
               ctx.InputName("X", first), "' ", f, " vs X[", i, "] '", ctx.InputName("X", i), "' ", d);
  }
  int src = first < 0 ? 0 : first;
  ctx.SetOutput("Out", ctx.InputDim("X", src), ctx.InputDType("X", src));
  ctx.ShareLoD("X", "Out", src);
}

}  // namespace

FL_REGISTER_OP(sum, op) {
  op.Doc("Out = sum of all inputs X (equal numbers of elements); empty or unset inputs are skipped.")
      .DuplicableInput("X", "tensors to add; all with the same number of elements")
      .Output("Out", "their sum, shaped like the first non-empty input; may be X[0] itself (in place)")
      .Inplace("Out", "X")  // the regularizer's sum(X=[grad, decay], Out=grad); any X[i] (blocks go via a buffer)
      .SetInferShape(InferSum)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const int n = ctx.InputSize("X");
        Tensor* out = ctx.Output("Out");
        const Variable* out_var = ctx.OutputVar("Out");
        std::vector<const T*> ptrs;
        ptrs.reserve(n);
        const Tensor* first = nullptr;  // first non-empty input
        const Tensor* empty = nullptr;  // some initialized but empty input
        int first_i = -1;
        bool out_is_input = false;
        for (int i = 0; i < n; ++i) {
          const Tensor* t = ctx.InputOrNull("X", i);
          if (!t) continue;
          if (t->numel() == 0) {
            empty = t;
            continue;
          }
          if (!first) {
            first = t;
            first_i = i;
          } else {
            FL_ENFORCE(t->numel() == first->numel(), "sum: inputs must have the same number of elements; X[", first_i,
                       "] '", ctx.InputName("X", first_i), "' ", first->dims(), " vs X[", i, "] '",
                       ctx.InputName("X", i), "' ", t->dims());
            FL_ENFORCE(t->dtype() == first->dtype(), "sum: inputs must have the same dtype; X[", first_i, "] '",
                       ctx.InputName("X", first_i), "' is ", DTypeName(first->dtype()), " but X[", i, "] '",
                       ctx.InputName("X", i), "' is ", DTypeName(t->dtype()));
          }
          out_is_input |= ctx.InputVar("X", i) == out_var;
          ptrs.push_back(t->data<T>());
        }
        if (!first) {  // every input is empty (the kernel dtype came from one of them): so is Out
          FL_ENFORCE(empty != nullptr, "sum: no input of X is initialized");
          out->Resize(empty->dims());
          out->mutable_data<T>(ctx.place());
          return;
        }
        // A fed (non-owned) buffer is replaced by mutable_data; keep it alive while it is read.
        std::shared_ptr<Allocation> keep = out_is_input ? out->holder() : nullptr;
        const DDim dims = first->dims();
        const LoD* lod = &first->lod();
        LoD lod_copy;
        if (out_is_input && !lod->empty()) lod = &(lod_copy = *lod);
        out->Resize(dims);
        T* o = out->mutable_data<T>(ctx.place());
        const int64_t numel = dims.numel();
        if (ptrs.size() == 1) {
          if (o != ptrs[0]) std::memcpy(o, ptrs[0], numel * sizeof(T));
        } else {  // in place (o == ptrs[0]) X[0] is read once, through Out
          SumInto<T>(ptrs, o, numel);
        }
        if (out->lod() != *lod) out->set_lod(*lod);
      })
      .Grad([](GradOpMaker& g) {
        // d(sum)/dX[i] = Out@GRAD for every i: one scale(1.0) per input, as Fluid does.
        const auto dout = g.OutputGrad("Out");
        for (const auto& dx : g.InputGrad("X")) {
          if (dx == kEmptyVarName) continue;
          OpDesc& op = g.NewOp("scale", false);
          op.SetInput("X", dout);
          op.SetOutput("Out", {dx});
          op.SetAttr("scale", 1.0f);
          op.SetAttr("bias", 0.0f);
          op.SetAttr("bias_after_scale", true);
        }
      });
}

}  // namespace fl
