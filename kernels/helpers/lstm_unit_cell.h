// lstm_unit's per-element cell math, shared by the CPU kernel (kernels/lstm_unit.cc) and the CUDA kernel
// (kernels/cuda/lstm_unit.cu), so the CPU tests exercise the formulas the GPU runs. Gates (i, f, o, g):
//   i = sigmoid(x_i), f = sigmoid(x_f + forget_bias), o = sigmoid(x_o), g = tanh(x_g)
//   c = f * c_prev + i * g,  h = o * tanh(c)
// On the CPU sigmoid and tanh are the vectorisable VecSigmoid / VecTanh; on the device CUDA's exp / tanh.
#pragma once
#include "host_device.h"
#include "op_context.h"
#include "vec_act.h"

namespace fl {
namespace lstm_unit {

template <typename T>
FL_HD inline T Sigmoid(T x) {
#ifdef __CUDA_ARCH__
  return T(1) / (T(1) + exp(-x));
#else
  return VecSigmoid(x);
#endif
}

template <typename T>
FL_HD inline T Tanh(T x) {
#ifdef __CUDA_ARCH__
  return tanh(x);
#else
  return VecTanh(x);
#endif
}

// The new cell state, and the hidden state from it. Values, not out-parameters: GCC vectorises the CPU loops over
// them (it does not through references into the output rows).
template <typename T>
FL_HD inline T CellC(T xi, T xf, T xg, T cp, T fb) {
  return Sigmoid(xf + fb) * cp + Sigmoid(xi) * Tanh(xg);
}
template <typename T>
FL_HD inline T CellH(T xo, T c) {
  return Sigmoid(xo) * Tanh(c);
}

template <typename T>
struct CellGrad {
  T dxi, dxf, dxo, dxg, dcp;
};

// The gradient of one element: recomputes the gates, then dx (i, f, o, g) and dc_prev from dh and dc.
template <typename T>
FL_HD inline CellGrad<T> CellBackward(T xi, T xf, T xo, T xg, T cp, T dh, T dc, T fb) {
  const T i = Sigmoid(xi), f = Sigmoid(xf + fb), o = Sigmoid(xo), g = Tanh(xg);
  const T tc = Tanh(f * cp + i * g);
  const T dcs = dc + dh * o * (T(1) - tc * tc);  // total gradient reaching C
  return {dcs * g * i * (T(1) - i), dcs * cp * f * (T(1) - f), dh * tc * o * (T(1) - o), dcs * i * (T(1) - g * g),
          dcs * f};
}

// lstm_unit_grad's inputs as its CPU and CUDA kernels read them: H@GRAD and C@GRAD may be missing (that output feeds
// nothing); given ones must have C_prev's element count.
struct GradInputs {
  explicit GradInputs(const ExecutionContext& ctx)
      : xt(ctx.Input("X")),
        cpt(ctx.Input("C_prev")),
        n(cpt.dims()[0]),
        d(cpt.dims()[1]),
        forget_bias(ctx.Attr<float>("forget_bias")),
        dht(ctx.InputOrNull("H@GRAD")),
        dct(ctx.InputOrNull("C@GRAD")) {
    for (const Tensor* g : {dht, dct})
      FL_ENFORCE(!g || g->numel() == n * d, "lstm_unit_grad: ", g == dht ? "H@GRAD" : "C@GRAD", " ", g->dims(),
                 " does not match C_prev '", ctx.InputName("C_prev"), "' ", cpt.dims());
  }
  const Tensor& xt;
  const Tensor& cpt;
  const int64_t n, d;
  const float forget_bias;
  const Tensor* dht;
  const Tensor* dct;
};

}  // namespace lstm_unit
}  // namespace fl
