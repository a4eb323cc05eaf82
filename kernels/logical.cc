// Logical ops on bool tensors: logical_and / logical_or / logical_xor (X, Y -> Out, Y broadcast into X by the
// trailing-dims rule) and logical_not (X -> Out). Fluid 1.8 registers them for bool only and without a
// gradient; so do these. (Fluid 1.8 asks X and Y for the same number of elements; broadcasting is a superset.)
#include "helpers/broadcast.h"

namespace fl {

namespace {

void EnforceBool(const InferShapeContext& ctx, const char* slot) {
  FL_ENFORCE(ctx.InputDType(slot) == DType::BOOL, ctx.Type(), ": ", ctx.Describe(slot), " must be bool, got ",
             DTypeName(ctx.InputDType(slot)));
}

template <typename F>
void RegisterBinaryLogical(OpBuilder& op, const char* doc) {
  op.Doc(doc)
      .Input("X", "left operand (bool)")
      .Input("Y", "right operand (bool), broadcast into X by trailing dims")
      .Output("Out", "bool result")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceBool(ctx, "X");
        EnforceBool(ctx, "Y");
        const DDim out = BroadcastOutDims(ctx.InputDim("X"), ctx.InputDim("Y"), -1, ctx.Type(), ctx.InputName("X"),
                                          ctx.InputName("Y"));
        ctx.SetOutput("Out", out, DType::BOOL);
        ctx.ShareLoD("X", "Out");
      })
      .template CPUKernel<bool>([](const ExecutionContext& ctx, auto) {
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        const BroadcastPlan plan =
            MakeBroadcastPlan(x.dims(), y.dims(), -1, ctx.Type(), ctx.InputName("X"), ctx.InputName("Y"));
        Tensor* out = ctx.Output("Out");
        out->Resize(plan.out_dims);
        BroadcastBinary(plan, x.data<bool>(), y.data<bool>(), out->mutable_data<bool>(ctx.place()), F{});
      });
}

struct And {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct Or {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct Xor {
  bool operator()(bool a, bool b) const { return a != b; }
};

}  // namespace

FL_REGISTER_OP(logical_and, op) { RegisterBinaryLogical<And>(op, "Out = X AND Y (bool), elementwise."); }
FL_REGISTER_OP(logical_or, op) { RegisterBinaryLogical<Or>(op, "Out = X OR Y (bool), elementwise."); }
FL_REGISTER_OP(logical_xor, op) { RegisterBinaryLogical<Xor>(op, "Out = X XOR Y (bool), elementwise."); }

FL_REGISTER_OP(logical_not, op) {
  op.Doc("Out = NOT X elementwise (bool in, bool out).")
      .Input("X", "operand (bool)")
      .Output("Out", "bool result, X's shape")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceBool(ctx, "X");
        ctx.SetOutput("Out", ctx.InputDim("X"), DType::BOOL);
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<bool>([](const ExecutionContext& ctx, auto) {
        const Tensor& x = ctx.Input("X");
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        const bool* xp = x.data<bool>();
        bool* op = out->mutable_data<bool>(ctx.place());
        for (int64_t i = 0; i < x.numel(); ++i) op[i] = !xp[i];
      });
}

}  // namespace fl
