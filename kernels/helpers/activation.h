// The gate, cell and candidate activations of Fluid's recurrent ops (lstm, lstmp, gru, gru_unit), chosen by an
// attribute: by name ("sigmoid", "tanh", "relu", "identity") or, in gru_unit, by Fluid's integer code
// (identity 0, sigmoid 1, tanh 2, relu 3). The switch is outside the loops, so each loop is one vectorisable
// pass; derivatives are taken from the activation's output, which the recurrent kernels keep anyway.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "enforce.h"
#include "vec_act.h"

namespace fl {

enum class Activation { kIdentity = 0, kSigmoid = 1, kTanh = 2, kRelu = 3 };

// The names an activation attribute accepts (for OpBuilder::OneOf).
inline std::vector<std::string> ActivationNames() { return {"sigmoid", "tanh", "relu", "identity"}; }

inline Activation ActivationByName(const std::string& name) {
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "relu") return Activation::kRelu;
  FL_ENFORCE(name == "identity" || name.empty(), "unknown activation '", name,
             "', expected sigmoid, tanh, relu or identity");
  return Activation::kIdentity;
}

inline Activation ActivationByCode(int code) {
  FL_ENFORCE(code >= 0 && code <= 3, "unknown activation code ", code,
             ", expected 0 (identity), 1 (sigmoid), 2 (tanh) or 3 (relu)");
  return static_cast<Activation>(code);
}

// y[i] = act(x[i]); y may be x.
template <typename T>
void Activate(Activation act, const T* x, T* y, int64_t n) {
  switch (act) {
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = VecSigmoid(x[i]);
      break;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = VecTanh(x[i]);
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
      break;
    case Activation::kIdentity:
      if (y != x)
        for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      break;
  }
}

// dx[i] = dy[i] * act'(x[i]), written with y = act(x); dx may be dy.
template <typename T>
void ActivationGrad(Activation act, const T* y, const T* dy, T* dx, int64_t n) {
  switch (act) {
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
      break;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
      break;
    case Activation::kIdentity:
      if (dx != dy)
        for (int64_t i = 0; i < n; ++i) dx[i] = dy[i];
      break;
  }
}

}  // namespace fl
