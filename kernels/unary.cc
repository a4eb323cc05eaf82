// Unary elementwise ops (X -> Out), one functor each (helpers/unary_functors.h: its formula, its attributes, the
// forward value and the gradient), registered here with its grad and double-grad ops. Adding one is a row in that
// header, a FL_UNARY_OP line here and a row in tests/ops/test_unary.py.
#include <cmath>

#include "grad_op_maker.h"
#include "helpers/elementwise_loop.h"
#include "helpers/unary_functors.h"

namespace fl {

namespace {

using namespace unary_fn;  // NOLINT: the table of functors

// ------------------------------------------------------------------ registration

// The gradient of <op>_grad(V, Out@GRAD) -> X@GRAD, which is linear in Out@GRAD: d(Out@GRAD) is <op>_grad
// applied to the incoming X@GRAD@GRAD; dV (rows with a second derivative) is <op>_grad_grad.
template <typename A>
void UnaryGradGrad(GradOpMaker& g) {
  const std::string v = GradSource<A>();
  const std::string ddx = FirstArg(g.OutputGrad("X@GRAD"));
  if (ddx.empty()) return;
  if (const std::string d_dout = FirstArg(g.InputGrad("Out@GRAD")); !d_dout.empty()) {
    OpDesc& op = g.NewOp(g.Forward().type());
    op.SetInput(v, g.Input(v));
    op.SetInput("Out@GRAD", {ddx});
    op.SetOutput("X@GRAD", {d_dout});
  }
  if constexpr (HasGradGrad<A>::value) {
    if (const std::string dv = FirstArg(g.InputGrad(v)); !dv.empty()) {
      OpDesc& op = g.NewOp(g.Info().forward->type + "_grad_grad");
      op.SetInput(v, g.Input(v));
      op.SetInput("DOut", g.Input("Out@GRAD"));
      op.SetInput("DDX", {ddx});
      op.SetOutput(v == "X" ? "DX" : "DOutNew", {dv});
    }
  }
}

template <typename A>
void RegisterUnary(OpBuilder& op, const std::string& type) {
  op.Doc(Str("Out = ", A::kFormula, ", elementwise."));
  op.Input("X", "input tensor").Output("Out", "output tensor, same shape as X").Inplace("Out", "X");
  A::Attrs(op);
  op.SetInferShape([](InferShapeContext& ctx) {
    A::Check(ctx);
    SameShapeAsInput(ctx);
  });
  op.CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const A a(ctx);
    UnaryMap<T>(ctx, [a](T x) { return a.template Fwd<T>(x); });
  });
  if constexpr (A::kGradFrom == GradFrom::kZero) {
    op.Grad(ZeroGrad);
  } else {
    const char* v = GradSource<A>();
    OpBuilder grad = op.GradOp({v, "Out@GRAD"});
    if (A::kGradFrom == GradFrom::kOut) grad.ShapeLike("X", "Out");
    grad.Inplace("X@GRAD", "Out@GRAD");  // the kernel reads each element of Out@GRAD before writing X@GRAD's
    grad.Grad(UnaryGradGrad<A>).template CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
      using T = typename decltype(tag)::type;
      if (!ctx.HasOutput("X@GRAD")) return;
      const A a(ctx);
      BinaryMapSameShape<T>(ctx, GradSource<A>(), "Out@GRAD", "X@GRAD",
                            [a](T v, T g) { return a.template Grad<T>(v, g); });
    });
    if constexpr (HasGradGrad<A>::value) {
      // <op>_grad_grad(V, DOut, DDX) -> dV = DDX * d(<op>_grad)/dV, named as in Fluid (DX, or DOutNew for V = Out).
      const std::string dv = A::kGradFrom == GradFrom::kX ? "DX" : "DOutNew";
      OpBuilder gg(OpRegistry::Instance().GetOrCreate(type + "_grad_grad"));
      gg.Doc(Str("Second derivative of Out = ", A::kFormula, ": ", dv, " = DDX * d(X@GRAD)/d", v, "."))
          .Input(v, Str("forward ", v))
          .Input("DOut", "the first backward pass's Out@GRAD")
          .Input("DDX", "gradient of the first pass's X@GRAD")
          .Output(dv, Str("gradient of ", v));
      A::Attrs(gg);
      gg.SetInferShape([](InferShapeContext& ctx) {
        SameShapeAsInput(ctx, GradSource<A>(), A::kGradFrom == GradFrom::kX ? "DX" : "DOutNew");
      });
      gg.CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const A a(ctx);
        TernaryMapSameShape<T>(ctx, GradSource<A>(), "DOut", "DDX", A::kGradFrom == GradFrom::kX ? "DX" : "DOutNew",
                               [a](T v, T g, T dd) { return a.template GradGrad<T>(v, g, dd); });
      });
    }
  }
}

}  // namespace

#define FL_UNARY_OP(name, Functor) \
  FL_REGISTER_OP(name, op) { RegisterUnary<Functor>(op, #name); }

FL_UNARY_OP(abs, Abs)
FL_UNARY_OP(relu, Relu)
FL_UNARY_OP(sigmoid, Sigmoid)
FL_UNARY_OP(tanh, Tanh)
FL_UNARY_OP(exp, Exp)
FL_UNARY_OP(log, Log)
FL_UNARY_OP(sqrt, Sqrt)
FL_UNARY_OP(square, Square)
FL_UNARY_OP(floor, Floor)
FL_UNARY_OP(ceil, Ceil)
FL_UNARY_OP(cos, Cos)
FL_UNARY_OP(sign, Sign)
FL_UNARY_OP(leaky_relu, LeakyRelu)
FL_UNARY_OP(relu6, Relu6)
FL_UNARY_OP(clip, Clip)
FL_UNARY_OP(gelu, Gelu)
FL_UNARY_OP(elu, Elu)
FL_UNARY_OP(selu, Selu)
FL_UNARY_OP(swish, Swish)
FL_UNARY_OP(hard_swish, HardSwish)
FL_UNARY_OP(hard_sigmoid, HardSigmoid)
FL_UNARY_OP(softplus, Softplus)
FL_UNARY_OP(softsign, Softsign)
FL_UNARY_OP(rsqrt, Rsqrt)
FL_UNARY_OP(reciprocal, Reciprocal)
FL_UNARY_OP(sin, Sin)
FL_UNARY_OP(pow, Pow)
FL_UNARY_OP(round, Round)

}  // namespace fl
