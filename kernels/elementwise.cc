// elementwise_{add,sub,mul,div,max,min}: Out = X op Y with Fluid's axis broadcasting, and their grads.
// Each op is one functor (forward value and the two per-element partials); the signature, shape
// inference, broadcasting loops (helpers/broadcast.h) and registration are shared by all six.
#include <limits>
#include <type_traits>

#include "helpers/broadcast.h"

namespace fl {

namespace {

// a / b; for integers b != 0 is checked beforehand and b == -1 is a wrapping negation (INT_MIN / -1 traps).
template <typename T>
inline T Divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == -1) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  }
  return a / b;
}

// Fwd(x, y) = out; Dx/Dy(x, y, out, dout) = dout * d(out)/dx, dout * d(out)/dy.
struct AddOp {
  static constexpr const char* kFormula = "X + Y";
  static constexpr bool kUsesOut = false, kDivides = false;
  template <typename T> static T Fwd(T x, T y) { return x + y; }
  template <typename T> static T Dx(T, T, T, T g) { return g; }
  template <typename T> static T Dy(T, T, T, T g) { return g; }
};
struct SubOp {
  static constexpr const char* kFormula = "X - Y";
  static constexpr bool kUsesOut = false, kDivides = false;
  template <typename T> static T Fwd(T x, T y) { return x - y; }
  template <typename T> static T Dx(T, T, T, T g) { return g; }
  template <typename T> static T Dy(T, T, T, T g) { return -g; }
};
struct MulOp {
  static constexpr const char* kFormula = "X * Y";
  static constexpr bool kUsesOut = false, kDivides = false;
  template <typename T> static T Fwd(T x, T y) { return x * y; }
  template <typename T> static T Dx(T, T y, T, T g) { return g * y; }
  template <typename T> static T Dy(T x, T, T, T g) { return g * x; }
};
struct DivOp {
  static constexpr const char* kFormula = "X / Y (integers truncate toward zero)";
  static constexpr bool kUsesOut = true, kDivides = true;
  template <typename T> static T Fwd(T x, T y) { return Divide(x, y); }
  template <typename T> static T Dx(T, T y, T, T g) { return Divide(g, y); }
  template <typename T> static T Dy(T, T y, T out, T g) { return Divide(static_cast<T>(-g * out), y); }
};
// Ties send the gradient to Y, as in Fluid: dX = dOut * (X > Y), dY = dOut * (X <= Y).
struct MaxOp {
  static constexpr const char* kFormula = "max(X, Y)";
  static constexpr bool kUsesOut = false, kDivides = false;
  template <typename T> static T Fwd(T x, T y) { return x > y ? x : y; }
  template <typename T> static T Dx(T x, T y, T, T g) { return x > y ? g : T(0); }
  template <typename T> static T Dy(T x, T y, T, T g) { return x > y ? T(0) : g; }
};
struct MinOp {
  static constexpr const char* kFormula = "min(X, Y)";
  static constexpr bool kUsesOut = false, kDivides = false;
  template <typename T> static T Fwd(T x, T y) { return x < y ? x : y; }
  template <typename T> static T Dx(T x, T y, T, T g) { return x < y ? g : T(0); }
  template <typename T> static T Dy(T x, T y, T, T g) { return x < y ? T(0) : g; }
};

constexpr const char* kAxisDoc =
    "Y's dims align with X's starting at this dim (-1: trailing alignment); size-1 dims broadcast";

BroadcastPlan PlanFor(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  FL_ENFORCE(x.dtype() == y.dtype(), ctx.Type(), ": X '", ctx.InputName("X"), "' is ", DTypeName(x.dtype()),
             " but Y '", ctx.InputName("Y"), "' is ", DTypeName(y.dtype()));
  return MakeBroadcastPlan(x.dims(), y.dims(), ctx.Attr<int32_t>("axis"), ctx.Type(), ctx.InputName("X"),
                           ctx.InputName("Y"));
}

template <typename Op, typename T>
void CheckDivisor(const ExecutionContext& ctx, const Tensor& y) {
  if constexpr (Op::kDivides && std::is_integral_v<T>) {
    const T* p = y.data<T>();
    for (int64_t i = 0, n = y.numel(); i < n; ++i)
      FL_ENFORCE(p[i] != 0, ctx.Type(), ": Y '", ctx.InputName("Y"), "' has a zero at flat index ", i,
                 " (integer division by zero)");
  }
}

template <typename Op, typename T>
void ForwardKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  BroadcastPlan plan = PlanFor(ctx, x, y);
  CheckDivisor<Op, T>(ctx, y);
  Tensor* out = ctx.Output("Out");
  // Writing in place into an operand is fine only if it already has the output's size.
  FL_ENFORCE((out != &x || x.numel() == plan.numel) && (out != &y || y.numel() == plan.numel), ctx.Type(),
             ": Out '", ctx.OutputName("Out"), "' aliases an input that is smaller than the output ", plan.out_dims);
  out->Resize(plan.out_dims);
  T* o = out->mutable_data<T>(ctx.place());
  BroadcastBinary(plan, x.data<T>(), y.data<T>(), o, [](T a, T b) { return Op::template Fwd<T>(a, b); });
}

template <typename Op, typename T>
void GradKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  BroadcastPlan plan = PlanFor(ctx, x, y);
  FL_ENFORCE(dout.dims() == plan.out_dims, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' has dims ",
             dout.dims(), " but the forward output has ", plan.out_dims);
  CheckDivisor<Op, T>(ctx, y);
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  const T* gp = dout.data<T>();
  const T* op = gp;  // stand-in of the output's size when the partials do not read Out
  if constexpr (Op::kUsesOut) {
    const Tensor& out = ctx.Input("Out");
    FL_ENFORCE(out.dims() == plan.out_dims, ctx.Type(), ": Out '", ctx.InputName("Out"), "' has dims ", out.dims(),
               ", expected ", plan.out_dims);
    op = out.data<T>();
  }
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
    dx->Resize(x.dims());
    BroadcastReduce<BroadcastSide::X>(plan, xp, yp, op, gp, dx->mutable_data<T>(ctx.place()),
                                      [](T a, T b, T o, T g) { return Op::template Dx<T>(a, b, o, g); });
  }
  if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {
    dy->Resize(y.dims());
    BroadcastReduce<BroadcastSide::Y>(plan, xp, yp, op, gp, dy->mutable_data<T>(ctx.place()),
                                      [](T a, T b, T o, T g) { return Op::template Dy<T>(a, b, o, g); });
  }
}

template <typename Op>
void RegisterForward(OpBuilder& op) {
  // The doc depends on Op, so it is set apart from the (non-dependent) builder chain.
  op.Doc(Str("Out = ", Op::kFormula, ", elementwise, with Y broadcast into X's shape (or X into Y's) by `axis`."));
  op.Input("X", "first operand")
      .Input("Y", "second operand")
      .Output("Out", "result, of the broadcast shape")
      .Attr<int32_t>("axis", -1, kAxisDoc)
      .SetInferShape(InferBroadcastShape)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        ForwardKernel<Op, typename decltype(tag)::type>(ctx);
      })
      .SetGradMaker([](GradOpMaker& g) { g.DefaultGradOp(); });
}

void InferBinaryGradShape(InferShapeContext& ctx) {
  // Re-check the broadcast so a hand-built grad op with mismatched operands fails at build time too.
  BroadcastOutDims(ctx.InputDim("X"), ctx.InputDim("Y"), ctx.Attr<int32_t>("axis"), ctx.Type(), ctx.InputName("X"),
                   ctx.InputName("Y"));
  for (const char* slot : {"X", "Y"}) {
    std::string grad = GradName(slot);
    if (!ctx.HasOutput(grad.c_str())) continue;
    ctx.SetOutput(grad.c_str(), ctx.InputDim(slot), ctx.InputDType(slot));
    ctx.ShareLoD(slot, grad.c_str());
  }
}

template <typename Op>
void RegisterGrad(OpBuilder& op) {
  op.Doc(Str("Gradients of Out = ", Op::kFormula, ": X@GRAD and Y@GRAD, summed over broadcast dims."));
  op.Input("X", "forward X")
      .Input("Y", "forward Y")
      .DispensableInput("Out", "forward Out (read only by elementwise_div_grad)")
      .Input("Out@GRAD", "gradient of Out")
      .DispensableOutput("X@GRAD", "gradient of X (absent or @EMPTY@ if not needed)")
      .DispensableOutput("Y@GRAD", "gradient of Y (absent or @EMPTY@ if not needed)")
      .Attr<int32_t>("axis", -1, kAxisDoc)
      .SetInferShape(InferBinaryGradShape)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        GradKernel<Op, typename decltype(tag)::type>(ctx);
      });
}

}  // namespace

#define FL_ELEMENTWISE_OP(name, Functor)                                                 \
  FL_REGISTER_OP(elementwise_##name, op) { RegisterForward<Functor>(op); }               \
  FL_REGISTER_OP(elementwise_##name##_grad, op) { RegisterGrad<Functor>(op); }

FL_ELEMENTWISE_OP(add, AddOp)
FL_ELEMENTWISE_OP(sub, SubOp)
FL_ELEMENTWISE_OP(mul, MulOp)
FL_ELEMENTWISE_OP(div, DivOp)
FL_ELEMENTWISE_OP(max, MaxOp)
FL_ELEMENTWISE_OP(min, MinOp)

}  // namespace fl
