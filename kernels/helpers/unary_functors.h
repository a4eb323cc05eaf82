// The per-element functors of the unary ops (kernels/unary.cc registers one op per row) and of their gradients,
// shared with the fused elementwise op (kernels/fused_elementwise.cc), which runs the same functors tile by tile so
// that a fused chain gives bit-identical results.
//
// A row derives from Unary<kFrom>, which says what its gradient is computed from: kX or kOut (the grad op
// keeps only that variable alive), or kZero (piecewise constant: the gradient is zeros). Grad(v, g) is
// g * d(Out)/dX written in v; GradGrad(v, g, dd), where given, is dd * d(Grad)/dv, the second derivative
// that double grad needs (rows without it are piecewise linear: zero). Attributes are declared by a static
// Attrs(op) and read in the constructor from any context with Attr<T>(name); Check(ctx) adds build-time checks.
#pragma once
#include <cmath>
#include <type_traits>

#include "host_device.h"
#include "op_context.h"
#include "op_registry.h"
#include "vec_act.h"  // sigmoid/tanh/exp that vectorise (std::exp/std::tanh keep loops scalar)

namespace fl {
namespace unary_fn {

enum class GradFrom { kX, kOut, kZero };

template <GradFrom kFrom>
struct Unary {
  static constexpr GradFrom kGradFrom = kFrom;
  static void Attrs(OpBuilder&) {}
  static void Check(const InferShapeContext&) {}
};

// Whether row A has a second derivative (its grad op has a grad_grad op), and the variable its gradient reads.
template <typename A, typename = void>
struct HasGradGrad : std::false_type {};
template <typename A>
struct HasGradGrad<A, std::void_t<decltype(&A::template GradGrad<float>)>> : std::true_type {};

template <typename A>
constexpr const char* GradSource() {
  return A::kGradFrom == GradFrom::kX ? "X" : "Out";
}

// ------------------------------------------------------------------ the table

struct Abs : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "|X|";
  template <typename C> explicit Abs(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::abs(x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return x > T(0) ? g : (x < T(0) ? -g : T(0)); }
};
struct Relu : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "max(X, 0)";
  template <typename C> explicit Relu(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return x > T(0) ? x : T(0); }
  template <typename T> FL_HD T Grad(T y, T g) const { return y > T(0) ? g : T(0); }
};
struct Sigmoid : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "1 / (1 + exp(-X))";
  template <typename C> explicit Sigmoid(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return VecSigmoid(x); }
  template <typename T> FL_HD T Grad(T y, T g) const { return g * y * (T(1) - y); }
  template <typename T> FL_HD T GradGrad(T y, T g, T dd) const { return dd * g * (T(1) - T(2) * y); }
};
struct Tanh : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "tanh(X)";
  template <typename C> explicit Tanh(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return VecTanh(x); }
  template <typename T> FL_HD T Grad(T y, T g) const { return g * (T(1) - y * y); }
  template <typename T> FL_HD T GradGrad(T y, T g, T dd) const { return T(-2) * dd * g * y; }
};
struct Exp : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "exp(X)";
  template <typename C> explicit Exp(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return VecExp(x); }
  template <typename T> FL_HD T Grad(T y, T g) const { return g * y; }
  template <typename T> FL_HD T GradGrad(T, T g, T dd) const { return dd * g; }
};
struct Log : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "ln(X)";
  template <typename C> explicit Log(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::log(x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return g / x; }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const { return -dd * g / (x * x); }
};
struct Sqrt : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "sqrt(X)";
  template <typename C> explicit Sqrt(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::sqrt(x); }
  template <typename T> FL_HD T Grad(T y, T g) const { return g * T(0.5) / y; }
  template <typename T> FL_HD T GradGrad(T y, T g, T dd) const { return -dd * g * T(0.5) / (y * y); }
};
struct Square : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X * X";
  template <typename C> explicit Square(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return x * x; }
  template <typename T> FL_HD T Grad(T x, T g) const { return g * T(2) * x; }
  template <typename T> FL_HD T GradGrad(T, T g, T dd) const { return T(2) * dd * g; }
};
struct Floor : Unary<GradFrom::kZero> {  // staircase LR decay
  static constexpr const char* kFormula = "floor(X)";
  template <typename C> explicit Floor(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::floor(x); }
};
struct Ceil : Unary<GradFrom::kZero> {  // polynomial_decay(cycle=True)
  static constexpr const char* kFormula = "ceil(X)";
  template <typename C> explicit Ceil(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::ceil(x); }
};
struct Cos : Unary<GradFrom::kX> {  // cosine_decay; std::cos of the element type (cosf for float32)
  static constexpr const char* kFormula = "cos(X)";
  template <typename C> explicit Cos(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::cos(x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return -g * std::sin(x); }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const { return -dd * g * std::cos(x); }
};
struct Sign : Unary<GradFrom::kZero> {  // L1 weight decay
  static constexpr const char* kFormula = "sign(X) (-1, 0 or 1)";
  template <typename C> explicit Sign(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return static_cast<T>((x > T(0)) - (x < T(0))); }
};
// Fluid 1.x writes the forward as max(X, alpha * X), the same for 0 <= alpha <= 1; the select form keeps
// forward and gradient consistent for any alpha.
struct LeakyRelu : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X if X >= 0 else alpha * X";
  static void Attrs(OpBuilder& op) { op.Attr<float>("alpha", 0.02f, "slope for negative inputs"); }
  float alpha;
  template <typename C> explicit LeakyRelu(const C& ctx) : alpha(ctx.template Attr<float>("alpha")) {}
  template <typename T> FL_HD T Fwd(T x) const { return x >= T(0) ? x : T(alpha) * x; }
  template <typename T> FL_HD T Grad(T x, T g) const { return x >= T(0) ? g : T(alpha) * g; }
};
struct Relu6 : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "min(max(X, 0), threshold)";
  static void Attrs(OpBuilder& op) { op.Attr<float>("threshold", 6.0f, "upper clip value"); }
  float t;
  template <typename C> explicit Relu6(const C& ctx) : t(ctx.template Attr<float>("threshold")) {}
  // Two plain selects (not nested, no &&): GCC vectorises them (the nested form ran 7x slower than relu).
  template <typename T> FL_HD T Fwd(T x) const {
    const T y = x > T(0) ? x : T(0);
    return y < T(t) ? y : T(t);
  }
  template <typename T> FL_HD T Grad(T y, T g) const { return ((y > T(0)) & (y < T(t))) ? g : T(0); }
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
  template <typename T> FL_HD T Fwd(T x) const { return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return x > T(lo) && x < T(hi) ? g : T(0); }
};

// ------------------------------------------------------------------ activations of Fluid 1.8's activation_op.cc

// gelu: exact (erf) form by default; approximate=true is the tanh form of Hendrycks & Gimpel.
struct Gelu : Unary<GradFrom::kX> {
  static constexpr const char* kFormula =
      "0.5 * X * (1 + erf(X / sqrt(2))), or with approximate 0.5 * X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * "
      "X^3)))";
  static void Attrs(OpBuilder& op) { op.Attr<bool>("approximate", false, "use the tanh approximation"); }
  bool approx;
  template <typename C> explicit Gelu(const C& ctx) : approx(ctx.template Attr<bool>("approximate")) {}
  static constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
  static constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1 / sqrt(2)
  static constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
  template <typename T> FL_HD T Fwd(T x) const {
    if (approx) return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
    return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
  }
  template <typename T> FL_HD T Grad(T x, T g) const {
    if (approx) {
      const T t = std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x));
      const T dt = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
      return g * T(0.5) * (T(1) + t + x * (T(1) - t * t) * dt);
    }
    return g * (T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x));
  }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    if (approx) {
      const T t = std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x));
      const T dt = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
      const T d2t = T(kSqrt2OverPi * 6 * 0.044715) * x;
      return dd * g * T(0.5) * (T(1) - t * t) * (T(2) * dt - T(2) * x * t * dt * dt + x * d2t);
    }
    return dd * g * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x) * (T(2) - x * x);
  }
};
struct Elu : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X if X > 0 else alpha * (exp(X) - 1)";
  static void Attrs(OpBuilder& op) { op.Attr<float>("alpha", 1.0f, "scale of the negative part"); }
  float alpha;
  template <typename C> explicit Elu(const C& ctx) : alpha(ctx.template Attr<float>("alpha")) {}
  template <typename T> FL_HD T Fwd(T x) const { return x > T(0) ? x : T(alpha) * std::expm1(x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return x > T(0) ? g : g * T(alpha) * std::exp(x); }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    return x > T(0) ? T(0) : dd * g * T(alpha) * std::exp(x);
  }
};
struct Selu : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "scale * (X if X > 0 else alpha * (exp(X) - 1))";
  static void Attrs(OpBuilder& op) {
    op.Attr<float>("scale", 1.0507009873554804934193349852946f, "output scale (lambda)")
        .Attr<float>("alpha", 1.6732632423543772848170429916717f, "scale of the negative part");
  }
  float scale, alpha;
  template <typename C>
  explicit Selu(const C& ctx) : scale(ctx.template Attr<float>("scale")), alpha(ctx.template Attr<float>("alpha")) {}
  template <typename T> FL_HD T Fwd(T x) const { return T(scale) * (x > T(0) ? x : T(alpha) * std::expm1(x)); }
  template <typename T> FL_HD T Grad(T x, T g) const {
    return x > T(0) ? g * T(scale) : g * T(scale) * T(alpha) * std::exp(x);
  }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    return x > T(0) ? T(0) : dd * g * T(scale) * T(alpha) * std::exp(x);
  }
};
struct Swish : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X * sigmoid(beta * X)";
  static void Attrs(OpBuilder& op) { op.Attr<float>("beta", 1.0f, "slope inside the sigmoid"); }
  float beta;
  template <typename C> explicit Swish(const C& ctx) : beta(ctx.template Attr<float>("beta")) {}
  template <typename T> FL_HD T Fwd(T x) const { return x * VecSigmoid(T(beta) * x); }
  template <typename T> FL_HD T Grad(T x, T g) const {
    const T s = VecSigmoid(T(beta) * x);
    return g * (s + T(beta) * x * s * (T(1) - s));
  }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    const T s = VecSigmoid(T(beta) * x);
    return dd * g * T(beta) * s * (T(1) - s) * (T(2) + T(beta) * x * (T(1) - T(2) * s));
  }
};
struct HardSwish : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X * min(max(X + offset, 0), threshold) / scale";
  static void Attrs(OpBuilder& op) {
    op.Attr<float>("threshold", 6.0f, "upper clip of X + offset")
        .Attr<float>("scale", 6.0f, "divisor")
        .Attr<float>("offset", 3.0f, "added to X before clipping");
  }
  static void Check(const InferShapeContext& ctx) {
    FL_ENFORCE(ctx.Attr<float>("scale") != 0.0f, "hard_swish: scale must not be 0 for ", ctx.Describe("X"));
  }
  float t, s, o;
  template <typename C>
  explicit HardSwish(const C& ctx)
      : t(ctx.template Attr<float>("threshold")),
        s(ctx.template Attr<float>("scale")),
        o(ctx.template Attr<float>("offset")) {}
  template <typename T> FL_HD T Fwd(T x) const {
    const T c = x + T(o);
    return x * (c < T(0) ? T(0) : (c > T(t) ? T(t) : c)) / T(s);
  }
  template <typename T> FL_HD T Grad(T x, T g) const {
    const T c = x + T(o);
    if (c <= T(0)) return T(0);
    if (c >= T(t)) return g * T(t) / T(s);
    return g * (T(2) * x + T(o)) / T(s);
  }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    const T c = x + T(o);
    return c > T(0) && c < T(t) ? dd * g * T(2) / T(s) : T(0);
  }
};
struct HardSigmoid : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "min(max(slope * X + offset, 0), 1)";
  static void Attrs(OpBuilder& op) {
    op.Attr<float>("slope", 0.2f, "slope of the linear part").Attr<float>("offset", 0.5f, "offset of the linear part");
  }
  float slope, offset;
  template <typename C>
  explicit HardSigmoid(const C& ctx)
      : slope(ctx.template Attr<float>("slope")), offset(ctx.template Attr<float>("offset")) {}
  template <typename T> FL_HD T Fwd(T x) const {
    const T v = T(slope) * x + T(offset);
    return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
  }
  template <typename T> FL_HD T Grad(T y, T g) const { return y > T(0) && y < T(1) ? g * T(slope) : T(0); }
};
// log(1 + exp(X)) written so that it neither overflows for large X nor loses digits for very negative X.
struct Softplus : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "ln(1 + exp(X))";
  template <typename C> explicit Softplus(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::abs(x))); }
  template <typename T> FL_HD T Grad(T x, T g) const { return g * VecSigmoid(x); }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    const T s = VecSigmoid(x);
    return dd * g * s * (T(1) - s);
  }
};
struct Softsign : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X / (1 + |X|)";
  template <typename C> explicit Softsign(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return x / (T(1) + std::abs(x)); }
  template <typename T> FL_HD T Grad(T x, T g) const {
    const T d = T(1) + std::abs(x);
    return g / (d * d);
  }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    const T d = T(1) + std::abs(x);
    const T sign = static_cast<T>((x > T(0)) - (x < T(0)));
    return T(-2) * dd * g * sign / (d * d * d);
  }
};
struct Rsqrt : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "1 / sqrt(X)";
  template <typename C> explicit Rsqrt(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return T(1) / std::sqrt(x); }
  template <typename T> FL_HD T Grad(T y, T g) const { return T(-0.5) * g * y * y * y; }
  template <typename T> FL_HD T GradGrad(T y, T g, T dd) const { return T(-1.5) * dd * g * y * y; }
};
struct Reciprocal : Unary<GradFrom::kOut> {
  static constexpr const char* kFormula = "1 / X";
  template <typename C> explicit Reciprocal(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return T(1) / x; }
  template <typename T> FL_HD T Grad(T y, T g) const { return -g * y * y; }
  template <typename T> FL_HD T GradGrad(T y, T g, T dd) const { return T(-2) * dd * g * y; }
};
struct Sin : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "sin(X)";
  template <typename C> explicit Sin(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::sin(x); }
  template <typename T> FL_HD T Grad(T x, T g) const { return g * std::cos(x); }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const { return -dd * g * std::sin(x); }
};
// Fluid 1.8's pow also takes the exponent from a FactorTensor input; here it is the `factor` attribute only
// (the layer refuses a Variable factor).
struct Pow : Unary<GradFrom::kX> {
  static constexpr const char* kFormula = "X ^ factor";
  static void Attrs(OpBuilder& op) { op.Attr<float>("factor", 1.0f, "the exponent"); }
  float factor;
  template <typename C> explicit Pow(const C& ctx) : factor(ctx.template Attr<float>("factor")) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::pow(x, T(factor)); }
  template <typename T> FL_HD T Grad(T x, T g) const { return g * T(factor) * std::pow(x, T(factor) - T(1)); }
  template <typename T> FL_HD T GradGrad(T x, T g, T dd) const {
    return dd * g * T(factor) * (T(factor) - T(1)) * std::pow(x, T(factor) - T(2));
  }
};
// Fluid rounds halves away from zero (std::round).
struct Round : Unary<GradFrom::kZero> {
  static constexpr const char* kFormula = "round(X) (halves away from zero)";
  template <typename C> explicit Round(const C&) {}
  template <typename T> FL_HD T Fwd(T x) const { return std::round(x); }
};

}  // namespace unary_fn
}  // namespace fl
