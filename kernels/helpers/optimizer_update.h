// What the optimizer update ops share (kernels/optimizer_ops.cc, kernels/adaptive_optimizers.cc): their
// build/run-time shape and dtype check, the read of a one-element float input (LearningRate, Beta1Pow) and
// the in-place output buffer.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "host_device.h"
#include "op_context.h"

namespace fl {

// Every listed input slot has Param's dims and dtype; a one-element LearningRate when `lr` (adadelta has none);
// each (output, input) pair's output takes the input's dims and dtype. `i`: which argument of each slot (the
// multi-tensor updates check each parameter's).
inline void InferUpdateShapes(InferShapeContext& ctx, std::initializer_list<const char*> same_as_param,
                              std::initializer_list<std::pair<const char*, const char*>> out_from_in, bool lr = true,
                              int i = 0) {
  const DDim p = ctx.InputDim("Param", i);
  const DType pt = ctx.InputDType("Param", i);
  for (const char* slot : same_as_param) {
    const DDim d = ctx.InputDim(slot, i);
    bool ok = d.size() == p.size();
    for (int k = 0; ok && k < d.size(); ++k) ok = d[k] < 0 || p[k] < 0 || d[k] == p[k];
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe(slot, i), " must have the shape of ", ctx.Describe("Param", i));
    const DType t = ctx.InputDType(slot, i);
    FL_ENFORCE(t == pt || t == DType::UNDEFINED || pt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot, i),
               " must have Param's dtype ", DTypeName(pt), ", got ", DTypeName(t));
  }
  if (lr) {
    const DDim d = ctx.InputDim("LearningRate");
    FL_ENFORCE(d.numel() == 1 || d.numel() < 0, ctx.Type(), ": ", ctx.Describe("LearningRate"),
               " must hold exactly one element");
  }
  for (auto& io : out_from_in) {
    if (ctx.HasOutput(io.first)) ctx.SetOutput(io.first, ctx.InputDim(io.second, i), ctx.InputDType(io.second, i), i);
  }
}

// The one value of a one-element float32/float64 input (argument i of the slot), as T.
template <typename T>
T ReadFloatScalarInput(const ExecutionContext& ctx, const char* slot, int i = 0) {
  const Tensor& t = ctx.Input(slot, i);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot, i), "' must hold one element, has dims ",
             t.dims());
  FL_ENFORCE(t.dtype() == DType::FP32 || t.dtype() == DType::FP64, ctx.Type(), ": ", slot, " '", ctx.InputName(slot, i),
             "' must be float32/float64, got ", DTypeName(t.dtype()));
  return t.dtype() == DType::FP64 ? static_cast<T>(*t.data<double>()) : static_cast<T>(*t.data<float>());
}

// Output `out`, sized like input `in`: the input's own buffer when the op updates in place (ParamOut = Param).
template <typename T>
T* UpdateOutput(const ExecutionContext& ctx, const char* out, const char* in, int i = 0) {
  Tensor* o = ctx.Output(out, i);
  o->Resize(ctx.Input(in, i).dims());
  return o->mutable_data<T>(ctx.place());
}

// Output `out` holding input `in`'s values, to be updated in place: the input's own buffer when the op updates in
// place (ParamOut = Param, the usual case), else a copy of it. A sparse update then writes only the rows it
// touches; a dense one reads and writes through one pointer, which the compiler vectorises without a run-time
// overlap check (separate input and output pointers fail that check when they are the same buffer).
template <typename T>
T* InPlaceOutput(const ExecutionContext& ctx, const char* out, const char* in, int i = 0) {
  const Tensor& src = ctx.Input(in, i);
  T* o = UpdateOutput<T>(ctx, out, in, i);
  if (o != src.data<T>()) std::memcpy(o, src.data<T>(), src.numel() * sizeof(T));
  return o;
}

// The per-element update formulas, shared by the CPU loops below and the CUDA kernels (kernels/cuda/optimizers.cu).
template <typename T>
FL_HD inline T SgdElement(T p, T g, T lr) {
  return p - lr * g;
}
template <typename T>
FL_HD inline T MomentumVelocity(T v, T g, T mu) {
  return mu * v + g;
}
// The parameter after a momentum step with the new velocity vn.
template <typename T>
FL_HD inline T MomentumParam(T p, T g, T vn, T mu, T lr, bool nesterov) {
  return nesterov ? p - (g + mu * vn) * lr : p - lr * vn;
}

// Adam's learning rate with the bias correction folded in: lr sqrt(1 - beta2^t) / (1 - beta1^t).
template <typename T>
FL_HD inline T AdamStepSize(T lr, T b1p, T b2p) {
  return lr * std::sqrt(T(1) - b2p) / (T(1) - b1p);
}
// One element of Adam, in place.
template <typename T>
FL_HD inline void AdamElement(T g, T b1, T b2, T eps, T lr_t, T& p, T& m1, T& m2) {
  const T a = b1 * m1 + (T(1) - b1) * g;
  const T b = b2 * m2 + (T(1) - b2) * g * g;
  m1 = a;
  m2 = b;
  p -= lr_t * a / (std::sqrt(b) + eps);
}
// Adagrad: the new moment mn = m + g^2, and the parameter.
template <typename T>
FL_HD inline T AdagradMoment(T m, T g) {
  return m + g * g;
}
template <typename T>
FL_HD inline T AdagradParam(T p, T g, T mn, T lr, T eps) {
  return p - lr * g / (std::sqrt(mn) + eps);
}

// The dense updates over elements [begin, end): sgd, momentum and adam run these, and so do their multi-tensor
// forms (fused_sgd, fused_momentum, fused_adam: kernels/passes/fuse_optimizer_ops.cc), so that a fused update is
// bit for bit the unfused one. `pout` may be `p` (and `vout` `v`): each element is read before it is written.
template <typename T>
inline void SgdRange(const T* p, const T* g, T lr, T* pout, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) pout[i] = SgdElement(p[i], g[i], lr);
}

template <typename T>
inline void MomentumRange(const T* p, const T* g, const T* v, T mu, T lr, bool nesterov, T* pout, T* vout,
                          int64_t begin, int64_t end) {
  if (nesterov) {
    for (int64_t i = begin; i < end; ++i) {
      T vn = MomentumVelocity(v[i], g[i], mu);
      vout[i] = vn;
      pout[i] = MomentumParam(p[i], g[i], vn, mu, lr, true);
    }
  } else {
    for (int64_t i = begin; i < end; ++i) {
      T vn = MomentumVelocity(v[i], g[i], mu);
      vout[i] = vn;
      pout[i] = MomentumParam(p[i], g[i], vn, mu, lr, false);
    }
  }
}

// Adam in place over p, m1, m2 (seven streams per element and little arithmetic).
template <typename T>
inline void AdamRange(const T* g, T b1, T b2, T eps, T lr_t, T* p, T* m1, T* m2, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) AdamElement(g[i], b1, b2, eps, lr_t, p[i], m1[i], m2[i]);
}

// sqrt(sum x^2), accumulated in double.
template <typename T>
double L2Norm(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return std::sqrt(s);
}

}  // namespace fl
