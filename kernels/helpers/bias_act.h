// The epilogue of the fused inference ops (fc, conv2d_fusion): y = act(y + bias) applied to a GEMM's or a
// convolution's output tile while it is in cache, instead of elementwise_add and an activation op each making a
// pass over the whole output. The activations are those fluidlite's unary ops compute, with the same formulas
// (relu, relu6's min(max(x, 0), threshold), sigmoid and tanh through VecSigmoid/VecTanh), so a fused op gives the
// unfused ops' results bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "enforce.h"
#include "vec_act.h"

namespace fl {

enum class EpilogueAct { kIdentity, kRelu, kRelu6, kSigmoid, kTanh };

// The activation names a fused op's attribute accepts ("" is identity, as Fluid's fc activation_type).
inline std::vector<std::string> EpilogueActNames() { return {"", "identity", "relu", "relu6", "sigmoid", "tanh"}; }

inline EpilogueAct EpilogueActByName(const std::string& name) {
  if (name == "relu") return EpilogueAct::kRelu;
  if (name == "relu6") return EpilogueAct::kRelu6;
  if (name == "sigmoid") return EpilogueAct::kSigmoid;
  if (name == "tanh") return EpilogueAct::kTanh;
  FL_ENFORCE(name.empty() || name == "identity", "unknown activation '", name,
             "', expected one of relu, relu6, sigmoid, tanh, identity");
  return EpilogueAct::kIdentity;
}

// Whether an activation op of this type can be an epilogue (the passes ask before fusing it).
inline bool IsEpilogueActOp(const std::string& type) {
  return type == "relu" || type == "relu6" || type == "sigmoid" || type == "tanh";
}

template <typename T>
struct BiasAct {
  EpilogueAct act = EpilogueAct::kIdentity;
  T threshold = T(6);  // relu6's

  template <typename Op>
  void Each(T* y, int64_t n, Op add) const {  // y[i] = act(add(i, y[i]))
    switch (act) {
      case EpilogueAct::kIdentity:
        for (int64_t i = 0; i < n; ++i) y[i] = add(i, y[i]);
        break;
      case EpilogueAct::kRelu:
        for (int64_t i = 0; i < n; ++i) {
          const T v = add(i, y[i]);
          y[i] = v > T(0) ? v : T(0);
        }
        break;
      case EpilogueAct::kRelu6:
        for (int64_t i = 0; i < n; ++i) {  // relu6's two plain selects (they vectorise)
          const T v = add(i, y[i]);
          const T r = v > T(0) ? v : T(0);
          y[i] = r < threshold ? r : threshold;
        }
        break;
      case EpilogueAct::kSigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = VecSigmoid(add(i, y[i]));
        break;
      case EpilogueAct::kTanh:
        for (int64_t i = 0; i < n; ++i) y[i] = VecTanh(add(i, y[i]));
        break;
    }
  }

  // A row-major tile [rows, cols] with leading dimension ld: y[r, c] = act(y[r, c] + bias[c]) (bias may be null).
  void Rows(T* y, int64_t rows, int64_t cols, int64_t ld, const T* bias) const {
    for (int64_t r = 0; r < rows; ++r) {
      T* row = y + r * ld;
      if (bias) Each(row, cols, [bias](int64_t i, T v) { return v + bias[i]; });
      else if (act != EpilogueAct::kIdentity) Each(row, cols, [](int64_t, T v) { return v; });
    }
  }

  // One channel's plane of n values: y[i] = act(y[i] + b).
  void Plane(T* y, int64_t n, T b, bool has_bias) const {
    if (has_bias) Each(y, n, [b](int64_t, T v) { return v + b; });
    else if (act != EpilogueAct::kIdentity) Each(y, n, [](int64_t, T v) { return v; });
  }
};

}  // namespace fl
