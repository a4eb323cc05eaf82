// Activations abs, relu, sigmoid, tanh, exp, log, sqrt, square (X -> Out) and their grads. Each is one
// functor: the forward value and the gradient expressed in whichever of X / Out it is cheapest in
// (kGradFrom), so the grad op only keeps that variable alive. Loops are helpers/elementwise_loop.h.
#include <cmath>

#include "helpers/elementwise_loop.h"
#include "helpers/vec_act.h"  // sigmoid/tanh/exp that vectorise (std::exp/std::tanh keep loops scalar)

namespace fl {

namespace {

enum class GradFrom { X, Out };

// Fwd(x) = out; Grad(v, dout) = dout * d(out)/dx written in v, which is X or Out per kGradFrom.
struct AbsAct {
  static constexpr const char* kFormula = "|X|";
  static constexpr GradFrom kGradFrom = GradFrom::X;
  template <typename T> static T Fwd(T x) { return std::abs(x); }
  template <typename T> static T Grad(T x, T g) { return x > T(0) ? g : (x < T(0) ? -g : T(0)); }
};
struct ReluAct {
  static constexpr const char* kFormula = "max(X, 0)";
  static constexpr GradFrom kGradFrom = GradFrom::Out;
  template <typename T> static T Fwd(T x) { return x > T(0) ? x : T(0); }
  template <typename T> static T Grad(T out, T g) { return out > T(0) ? g : T(0); }
};
struct SigmoidAct {
  static constexpr const char* kFormula = "1 / (1 + exp(-X))";
  static constexpr GradFrom kGradFrom = GradFrom::Out;
  template <typename T> static T Fwd(T x) { return VecSigmoid(x); }
  template <typename T> static T Grad(T out, T g) { return g * out * (T(1) - out); }
};
struct TanhAct {
  static constexpr const char* kFormula = "tanh(X)";
  static constexpr GradFrom kGradFrom = GradFrom::Out;
  template <typename T> static T Fwd(T x) { return VecTanh(x); }
  template <typename T> static T Grad(T out, T g) { return g * (T(1) - out * out); }
};
struct ExpAct {
  static constexpr const char* kFormula = "exp(X)";
  static constexpr GradFrom kGradFrom = GradFrom::Out;
  template <typename T> static T Fwd(T x) { return VecExp(x); }
  template <typename T> static T Grad(T out, T g) { return g * out; }
};
struct LogAct {
  static constexpr const char* kFormula = "ln(X)";
  static constexpr GradFrom kGradFrom = GradFrom::X;
  template <typename T> static T Fwd(T x) { return std::log(x); }
  template <typename T> static T Grad(T x, T g) { return g / x; }
};
struct SqrtAct {
  static constexpr const char* kFormula = "sqrt(X)";
  static constexpr GradFrom kGradFrom = GradFrom::Out;
  template <typename T> static T Fwd(T x) { return std::sqrt(x); }
  template <typename T> static T Grad(T out, T g) { return g * T(0.5) / out; }
};
struct SquareAct {
  static constexpr const char* kFormula = "X * X";
  static constexpr GradFrom kGradFrom = GradFrom::X;
  template <typename T> static T Fwd(T x) { return x * x; }
  template <typename T> static T Grad(T x, T g) { return g * T(2) * x; }
};

template <typename A>
constexpr const char* DepSlot() { return A::kGradFrom == GradFrom::X ? "X" : "Out"; }

template <typename A>
void RegisterForward(OpBuilder& op) {
  // Calls with A-dependent arguments are kept out of the builder chain (they would make it dependent).
  op.Doc(Str("Out = ", A::kFormula, ", elementwise."));
  op.Input("X", "input tensor")
      .Output("Out", "output tensor, same shape as X")
      .SetInferShape(InferSameShapeAsX)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        UnaryMap<T>(ctx, [](T x) { return A::template Fwd<T>(x); });
      })
      .SetGradMaker([](GradOpMaker& g) {
        OpDesc& op = g.NewOp(g.Forward().type() + "_grad");
        if (A::kGradFrom == GradFrom::X) op.SetInput("X", g.Input("X"));
        else op.SetInput("Out", g.Output("Out"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
      });
}

template <typename A>
void InferGradShape(InferShapeContext& ctx) {
  if (ctx.HasOutput("X@GRAD")) SameShapeAsInput(ctx, DepSlot<A>(), "X@GRAD");
}

template <typename A>
void RegisterGrad(OpBuilder& op) {
  op.Doc(Str("X@GRAD of Out = ", A::kFormula, ", computed from ", DepSlot<A>(), " and Out@GRAD."));
  op.Input(DepSlot<A>(), A::kGradFrom == GradFrom::X ? "forward input X" : "forward output Out");
  op.Input("Out@GRAD", "gradient of Out").DispensableOutput("X@GRAD", "gradient of X");
  op.SetInferShape(InferGradShape<A>);
  op.CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    if (!ctx.HasOutput("X@GRAD")) return;
    BinaryMapSameShape<T>(ctx, DepSlot<A>(), "Out@GRAD", "X@GRAD", [](T v, T g) { return A::template Grad<T>(v, g); });
  });
}

}  // namespace

#define FL_ACTIVATION_OP(name, Functor)                                  \
  FL_REGISTER_OP(name, op) { RegisterForward<Functor>(op); }             \
  FL_REGISTER_OP(name##_grad, op) { RegisterGrad<Functor>(op); }

FL_ACTIVATION_OP(abs, AbsAct)
FL_ACTIVATION_OP(relu, ReluAct)
FL_ACTIVATION_OP(sigmoid, SigmoidAct)
FL_ACTIVATION_OP(tanh, TanhAct)
FL_ACTIVATION_OP(exp, ExpAct)
FL_ACTIVATION_OP(log, LogAct)
FL_ACTIVATION_OP(sqrt, SqrtAct)
FL_ACTIVATION_OP(square, SquareAct)

}  // namespace fl
