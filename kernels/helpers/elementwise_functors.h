// The per-element functors of the binary elementwise ops (kernels/elementwise.cc registers them) and of scale,
// shared with the fused elementwise op (kernels/fused_elementwise.cc), which runs the same functors tile by tile so
// that a fused chain gives bit-identical results.
#pragma once
#include <cmath>
#include <type_traits>

#include "host_device.h"

namespace fl {
namespace binary_fn {

// a / b; for integers b != 0 is checked beforehand and b == -1 is a wrapping negation (INT_MIN / -1 traps).
template <typename T>
FL_HD inline T Divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == -1) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  }
  return a / b;
}

// Fwd(x, y) = out; Dx/Dy(x, y, g) = g * d(out)/dx, g * d(out)/dy for the ops with a grad kernel.
struct AddOp {
  static constexpr const char* kFormula = "X + Y";
  template <typename T> FL_HD static T Fwd(T x, T y) { return x + y; }
  template <typename T> FL_HD static T Dx(T, T, T g) { return g; }
  template <typename T> FL_HD static T Dy(T, T, T g) { return g; }
};
struct SubOp {
  static constexpr const char* kFormula = "X - Y";
  template <typename T> FL_HD static T Fwd(T x, T y) { return x - y; }
  template <typename T> FL_HD static T Dx(T, T, T g) { return g; }
  template <typename T> FL_HD static T Dy(T, T, T g) { return -g; }
};
struct MulOp {
  static constexpr const char* kFormula = "X * Y";
  template <typename T> FL_HD static T Fwd(T x, T y) { return x * y; }
  template <typename T> FL_HD static T Dx(T, T y, T g) { return g * y; }
  template <typename T> FL_HD static T Dy(T x, T, T g) { return g * x; }
};
struct DivOp {
  static constexpr const char* kFormula = "X / Y (integers truncate toward zero)";
  static constexpr bool kDivides = true;
  template <typename T> FL_HD static T Fwd(T x, T y) { return Divide(x, y); }
};
// Ties send the gradient to Y, as in Fluid: dX = dOut * (X > Y), dY = dOut * (X <= Y).
struct MaxOp {
  static constexpr const char* kFormula = "max(X, Y)";
  template <typename T> FL_HD static T Fwd(T x, T y) { return x > y ? x : y; }
};
struct MinOp {
  static constexpr const char* kFormula = "min(X, Y)";
  template <typename T> FL_HD static T Fwd(T x, T y) { return x < y ? x : y; }
};

// std::pow of the element type, as Fluid's kernel (powf for float32: LR schedules match it bit for bit).
// Integers go through double pow and round to the nearest integer (exact while the result fits 2^53).
struct PowOp {
  static constexpr const char* kFormula = "X ^ Y (integers: rounded to the nearest integer)";
  template <typename T> FL_HD static T Fwd(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(std::llrint(std::pow(static_cast<double>(x), static_cast<double>(y))));
    } else {
      return std::pow(x, y);
    }
  }
  template <typename T> FL_HD static T Dx(T x, T y, T g) { return g * y * std::pow(x, y - T(1)); }
  template <typename T> FL_HD static T Dy(T x, T y, T g) { return g * std::log(x) * std::pow(x, y); }
};

// Fluid's floordiv truncates toward zero (std::trunc(a / b)), as C's integer division does; mod takes the sign
// of the divisor (Python's %, Fluid's ModFunctor). No gradient: both are piecewise constant in practice
// (beam search's beam and token indices).
struct FloorDivOp {
  static constexpr const char* kFormula = "trunc(X / Y) (Fluid's floordiv truncates toward zero)";
  static constexpr bool kDivides = true;
  template <typename T> FL_HD static T Fwd(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      return Divide(x, y);
    } else {
      return std::trunc(x / y);
    }
  }
};
struct ModOp {
  static constexpr const char* kFormula = "X mod Y, with the sign of Y (Python's %)";
  static constexpr bool kDivides = true;
  template <typename T> FL_HD static T Fwd(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      if (y == -1) return 0;  // INT_MIN % -1 traps
      T r = x % y;
      return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    } else {
      T r = std::fmod(x, y);
      return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    }
  }
};

}  // namespace binary_fn

// scale: Out = scale * X + bias, or scale * (X + bias) when bias_after_scale is false, computed as
// scale * X + (bias * scale) (Fluid's kernel).
template <typename T>
struct ScaleFn {
  T scale, bias;
  ScaleFn(float s, float b, bool bias_after_scale) : scale(static_cast<T>(s)), bias(static_cast<T>(b)) {
    if (!bias_after_scale) bias = bias * scale;
  }
  FL_HD T operator()(T x) const { return scale * x + bias; }
};

}  // namespace fl
