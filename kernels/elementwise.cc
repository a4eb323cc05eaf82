// elementwise_{add,sub,mul,div,max,min,pow,floordiv,mod}: Out = X op Y with Fluid's axis broadcasting
// (helpers/broadcast.h). Each op is a functor. add, sub and mul, on every model's hot path, have a dedicated grad
// kernel (the two per-element partials, summed over broadcast dims in one pass); div, max and min compose their
// gradient from those ops, so every gradient here is differentiable again. pow (LR decay's rate ** (step / steps)) has
// a grad kernel and no second derivative.
#include <cmath>
#include <type_traits>

#include "grad_op_maker.h"
#include "helpers/broadcast.h"
#include "helpers/elementwise_functors.h"
#include "helpers/elementwise_plan.h"

namespace fl {

namespace {

using namespace binary_fn;  // NOLINT: the table of functors

template <typename Op, typename T>
void ForwardKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  BroadcastPlan plan = ElementwisePlan(ctx, x, y);
  if constexpr (Divides<Op>::value && std::is_integral_v<T>) {
    const T* p = y.data<T>();
    for (int64_t i = 0, n = y.numel(); i < n; ++i)
      FL_ENFORCE(p[i] != 0, ctx.Type(), ": Y '", ctx.InputName("Y"), "' has a zero at flat index ", i,
                 " (integer division by zero)");
  }
  Tensor* out = ctx.Output("Out");
  // Writing in place into an operand is fine only if it already has the output's size.
  FL_ENFORCE((out != &x || x.numel() == plan.numel) && (out != &y || y.numel() == plan.numel), ctx.Type(), ": Out '",
             ctx.OutputName("Out"), "' aliases an input that is smaller than the output ", plan.out_dims);
  out->Resize(plan.out_dims);
  T* o = out->mutable_data<T>(ctx.place());
  BroadcastBinary(plan, x.data<T>(), y.data<T>(), o, [](T a, T b) { return Op::template Fwd<T>(a, b); });
}

template <typename Op, typename T>
void GradKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  BroadcastPlan plan = ElementwiseGradPlan(ctx, x, y, dout);
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  const T* gp = dout.data<T>();
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
    dx->Resize(x.dims());
    BroadcastReduce<BroadcastSide::X>(plan, xp, yp, gp, dx->mutable_data<T>(ctx.place()),
                                      [](T a, T b, T g) { return Op::template Dx<T>(a, b, g); });
  }
  if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {
    dy->Resize(y.dims());
    BroadcastReduce<BroadcastSide::Y>(plan, xp, yp, gp, dy->mutable_data<T>(ctx.place()),
                                      [](T a, T b, T g) { return Op::template Dy<T>(a, b, g); });
  }
}

// ------------------------------------------------------------------ composed gradients

// Emits <type>(a, b) -> out with the forward op's axis (operands of the out shape broadcast as X and Y did;
// identical shapes ignore it).
std::string Binary(GradOpMaker& g, const char* type, const std::string& a, const std::string& b,
                   const std::string& out) {
  OpDesc& op = g.NewOp(type);
  op.SetInput("X", {a});
  op.SetInput("Y", {b});
  op.SetOutput("Out", {out});
  return out;
}

std::string Unary(GradOpMaker& g, const char* type, const std::string& x, const std::string& out) {
  OpDesc& op = g.NewOp(type, false);
  op.SetInput("X", {x});
  op.SetOutput("Out", {out});
  return out;
}

// dX = t reduced to X's shape, and dY = u (or -u with kNegateY) reduced to Y's shape, for t and u of the out
// shape: the grad kernels of elementwise_add and elementwise_sub are exactly these reductions.
template <bool kNegateY = false>
void ReduceToOperands(GradOpMaker& g, const std::string& t, const std::string& u) {
  const std::string dx = FirstArg(g.InputGrad("X")), dy = FirstArg(g.InputGrad("Y"));
  auto reduce = [&g](const char* type, const char* slot, const std::string& value, const std::string& grad) {
    OpDesc& op = g.NewOp(type);
    op.SetInput("X", g.Input("X"));
    op.SetInput("Y", g.Input("Y"));
    op.SetInput("Out@GRAD", {value});
    op.SetOutput(slot, {grad});
  };
  if (!dx.empty()) reduce("elementwise_add_grad", "X@GRAD", t, dx);
  if (!dy.empty()) reduce(kNegateY ? "elementwise_sub_grad" : "elementwise_add_grad", "Y@GRAD", u, dy);
}

// Out = X / Y: dX = reduce(dOut / Y), dY = -reduce(dOut / Y * Out).
void DivGrad(GradOpMaker& g) {
  const std::string t =
      Binary(g, "elementwise_div", FirstArg(g.OutputGrad("Out")), FirstArg(g.Input("Y")), g.Temp("dout_over_y"));
  std::string u;
  if (!FirstArg(g.InputGrad("Y")).empty())
    u = Binary(g, "elementwise_mul", t, FirstArg(g.Output("Out")), g.Temp("dout_out_over_y"));
  ReduceToOperands<true>(g, t, u);
}

// Out = max(X, Y) (kMax) or min(X, Y): the mask relu(sign(X - Y)) (of Y - X for min) is 1 where X is taken
// and 0 on ties, so dX = reduce(dOut * mask) and dY = reduce(dOut - dOut * mask).
template <bool kMax>
void SelectGrad(GradOpMaker& g) {
  const std::string x = FirstArg(g.Input("X")), y = FirstArg(g.Input("Y")), dout = FirstArg(g.OutputGrad("Out"));
  const std::string diff = Binary(g, "elementwise_sub", kMax ? x : y, kMax ? y : x, g.Temp("diff"));
  const std::string mask = Unary(g, "relu", Unary(g, "sign", diff, g.Temp("sign")), g.Temp("x_taken"));
  const std::string t = Binary(g, "elementwise_mul", dout, mask, g.Temp("dout_x"));
  std::string u;
  if (!FirstArg(g.InputGrad("Y")).empty()) u = Binary(g, "elementwise_sub", dout, t, g.Temp("dout_y"));
  ReduceToOperands(g, t, u);
}

constexpr const char* kAxisDoc =
    "Y's dims align with X's starting at this dim (-1: trailing alignment); size-1 dims broadcast";

template <typename Op>
OpBuilder& RegisterForward(OpBuilder& op) {
  // The doc depends on Op, so it is set apart from the (non-dependent) builder chain.
  op.Doc(Str("Out = ", Op::kFormula, ", elementwise, with Y broadcast into X's shape (or X into Y's) by `axis`."));
  return op.Input("X", "first operand")
      .Input("Y", "second operand")
      .Output("Out", "result, of the broadcast shape")
      .Inplace("Out", "X")  // when that operand has the broadcast shape (the executor checks)
      .Inplace("Out", "Y")
      .Attr<int32_t>("axis", -1, kAxisDoc)
      .Range(-1, DDim::kMaxRank - 1)
      .SetInferShape(InferBroadcastShape)
      .CPUKernel<float, double, int32_t, int64_t>(
          [](const ExecutionContext& ctx, auto tag) { ForwardKernel<Op, typename decltype(tag)::type>(ctx); });
}

template <typename Op>
OpBuilder RegisterWithGradKernel(OpBuilder& op) {
  return RegisterForward<Op>(op)
      .GradOp({"X", "Y", "Out@GRAD"})
      .template CPUKernel<float, double, int32_t, int64_t>(
          [](const ExecutionContext& ctx, auto tag) { GradKernel<Op, typename decltype(tag)::type>(ctx); });
}

}  // namespace

FL_REGISTER_OP(elementwise_add, op) { RegisterWithGradKernel<AddOp>(op).Grad(LinearGradGrad); }
FL_REGISTER_OP(elementwise_sub, op) { RegisterWithGradKernel<SubOp>(op).Grad(LinearGradGrad); }
FL_REGISTER_OP(elementwise_mul, op) { RegisterWithGradKernel<MulOp>(op).Grad(BilinearGradGrad); }
FL_REGISTER_OP(elementwise_div, op) { RegisterForward<DivOp>(op).Grad(DivGrad); }
FL_REGISTER_OP(elementwise_max, op) { RegisterForward<MaxOp>(op).Grad(SelectGrad<true>); }
FL_REGISTER_OP(elementwise_min, op) { RegisterForward<MinOp>(op).Grad(SelectGrad<false>); }
FL_REGISTER_OP(elementwise_floordiv, op) { RegisterForward<FloorDivOp>(op).NoGradient(); }
FL_REGISTER_OP(elementwise_mod, op) { RegisterForward<ModOp>(op).NoGradient(); }
// The gradient is defined for float types only (dY = dOut * ln(X) * Out needs X > 0 where Y's gradient counts).
FL_REGISTER_OP(elementwise_pow, op) {
  RegisterForward<PowOp>(op)
      .GradOp({"X", "Y", "Out@GRAD"})
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { GradKernel<PowOp, typename decltype(tag)::type>(ctx); });
}

}  // namespace fl
