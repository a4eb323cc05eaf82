// Unary elementwise ops (X -> Out), one functor each: its formula, its attributes, the forward value and
// the gradient. Adding one is a row here and a row in tests/ops/test_unary.py.
//
// A row derives from Unary<kFrom>, which says what its gradient is computed from: kX or kOut (the grad op
// keeps only that variable alive), or kZero (piecewise constant: the gradient is zeros). Grad(v, g) is
// g * d(Out)/dX written in v; GradGrad(v, g, dd), where given, is dd * d(Grad)/dv, the second derivative
// that double grad needs (rows without it are piecewise linear: zero). Attributes are declared by a static
// Attrs(op) and read in the constructor; Check(ctx) adds build-time checks.
#include <cmath>

#include "grad_op_maker.h"
#include "helpers/elementwise_loop.h"
#include "helpers/vec_act.h"  // sigmoid/tanh/exp that vectorise (std::exp/std::tanh keep loops scalar)

namespace fl {

namespace {

enum class GradFrom { kX, kOut, kZero };

template <GradFrom kFrom>
struct Unary {
  static constexpr GradFrom kGradFrom = kFrom;
  static void Attrs(OpBuilder&) {}
  static void Check(const InferShapeContext&) {}
};

// ------------------------------------------------------------------ the table

struct Abs : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "|X|";
  template <typename C> explicit Abs(const C&) {}
  template <typename T> T Fwd(T x) const { return std::abs(x); }
  template <typename T> T Grad(T x, T g) const { return x > T(0) ? g : (x < T(0) ? -g : T(0)); }
};
struct Relu : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "max(X, 0)";
  template <typename C> explicit Relu(const C&) {}
  template <typename T> T Fwd(T x) const { return x > T(0) ? x : T(0); }
  template <typename T> T Grad(T y, T g) const { return y > T(0) ? g : T(0); }
};
struct Sigmoid : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "1 / (1 + exp(-X))";
  template <typename C> explicit Sigmoid(const C&) {}
  template <typename T> T Fwd(T x) const { return VecSigmoid(x); }
  template <typename T> T Grad(T y, T g) const { return g * y * (T(1) - y); }
  template <typename T> T GradGrad(T y, T g, T dd) const { return dd * g * (T(1) - T(2) * y); }
};
struct Tanh : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "tanh(X)";
  template <typename C> explicit Tanh(const C&) {}
  template <typename T> T Fwd(T x) const { return VecTanh(x); }
  template <typename T> T Grad(T y, T g) const { return g * (T(1) - y * y); }
  template <typename T> T GradGrad(T y, T g, T dd) const { return T(-2) * dd * g * y; }
};
struct Exp : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "exp(X)";
  template <typename C> explicit Exp(const C&) {}
  template <typename T> T Fwd(T x) const { return VecExp(x); }
  template <typename T> T Grad(T y, T g) const { return g * y; }
  template <typename T> T GradGrad(T, T g, T dd) const { return dd * g; }
};
struct Log : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "ln(X)";
  template <typename C> explicit Log(const C&) {}
  template <typename T> T Fwd(T x) const { return std::log(x); }
  template <typename T> T Grad(T x, T g) const { return g / x; }
  template <typename T> T GradGrad(T x, T g, T dd) const { return -dd * g / (x * x); }
};
struct Sqrt : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "sqrt(X)";
  template <typename C> explicit Sqrt(const C&) {}
  template <typename T> T Fwd(T x) const { return std::sqrt(x); }
  template <typename T> T Grad(T y, T g) const { return g * T(0.5) / y; }
  template <typename T> T GradGrad(T y, T g, T dd) const { return -dd * g * T(0.5) / (y * y); }
};
struct Square : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X * X";
  template <typename C> explicit Square(const C&) {}
  template <typename T> T Fwd(T x) const { return x * x; }
  template <typename T> T Grad(T x, T g) const { return g * T(2) * x; }
  template <typename T> T GradGrad(T, T g, T dd) const { return T(2) * dd * g; }
};
struct Floor : Unary<GradFrom::kZero> {  // staircase LR decay
  static constexpr const char* kFormula = "floor(X)";
  template <typename C> explicit Floor(const C&) {}
  template <typename T> T Fwd(T x) const { return std::floor(x); }
};
struct Sign : Unary<GradFrom::kZero> {  // L1 weight decay
  static constexpr const char* kFormula = "sign(X) (-1, 0 or 1)";
  template <typename C> explicit Sign(const C&) {}
  template <typename T> T Fwd(T x) const { return static_cast<T>((x > T(0)) - (x < T(0))); }
};
// Fluid 1.x writes the forward as max(X, alpha * X), the same for 0 <= alpha <= 1; the select form keeps
// forward and gradient consistent for any alpha.
struct LeakyRelu : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X if X >= 0 else alpha * X";
  static void Attrs(OpBuilder& op) { op.Attr<float>("alpha", 0.02f, "slope for negative inputs"); }
  float alpha;
  template <typename C> explicit LeakyRelu(const C& ctx) : alpha(ctx.template Attr<float>("alpha")) {}
  template <typename T> T Fwd(T x) const { return x >= T(0) ? x : T(alpha) * x; }
  template <typename T> T Grad(T x, T g) const { return x >= T(0) ? g : T(alpha) * g; }
};
struct Relu6 : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "min(max(X, 0), threshold)";
  static void Attrs(OpBuilder& op) { op.Attr<float>("threshold", 6.0f, "upper clip value"); }
  float t;
  template <typename C> explicit Relu6(const C& ctx) : t(ctx.template Attr<float>("threshold")) {}
  // Two plain selects (not nested, no &&): GCC vectorises them (the nested form ran 7x slower than relu).
  template <typename T> T Fwd(T x) const {
    const T y = x > T(0) ? x : T(0);
    return y < T(t) ? y : T(t);
  }
  template <typename T> T Grad(T y, T g) const { return ((y > T(0)) & (y < T(t))) ? g : T(0); }
};
struct Clip : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "min(max(X, min), max)";
  static void Attrs(OpBuilder& op) {
    op.RequiredAttr<float>("min", 0.0f, "lower bound").RequiredAttr<float>("max", 0.0f, "upper bound");
  }
  static void Check(const InferShapeContext& ctx) {
    FL_ENFORCE(ctx.Attr<float>("min") <= ctx.Attr<float>("max"), "clip: min ", ctx.Attr<float>("min"),
               " must not exceed max ", ctx.Attr<float>("max"), " for ", ctx.Describe("X"));
  }
  float lo, hi;
  template <typename C>
  explicit Clip(const C& ctx) : lo(ctx.template Attr<float>("min")), hi(ctx.template Attr<float>("max")) {}
  template <typename T> T Fwd(T x) const { return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x); }
  template <typename T> T Grad(T x, T g) const { return x > T(lo) && x < T(hi) ? g : T(0); }
};

// ------------------------------------------------------------------ registration

template <typename A, typename = void>
struct HasGradGrad : std::false_type {};
template <typename A>
struct HasGradGrad<A, std::void_t<decltype(&A::template GradGrad<float>)>> : std::true_type {};

template <typename A>
constexpr const char* GradSource() {
  return A::kGradFrom == GradFrom::kX ? "X" : "Out";
}

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
FL_UNARY_OP(sign, Sign)
FL_UNARY_OP(leaky_relu, LeakyRelu)
FL_UNARY_OP(relu6, Relu6)
FL_UNARY_OP(clip, Clip)

}  // namespace fl
