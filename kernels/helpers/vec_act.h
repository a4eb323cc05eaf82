// sigmoid and tanh on top of VecExp, so loops that call them vectorise (std::exp / std::tanh keep a loop
// scalar). Saturating: large |x| gives exactly 0/1 and -1/1. Absolute error ~1 ulp of 1.
#pragma once
#include "vec_exp.h"

namespace fl {

template <typename T>
FL_HD inline T VecSigmoid(T x) {
  return T(1) / (T(1) + VecExp(-x));
}

template <typename T>
FL_HD inline T VecTanh(T x) {
#ifdef __CUDA_ARCH__
  return tanh(x);  // the CUDA math function (float or double overload)
#else
  return T(1) - T(2) / (VecExp(x + x) + T(1));
#endif
}

}  // namespace fl
