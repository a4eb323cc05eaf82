// The cell of Fluid's GRU, shared by gru (dynamic_gru: one step per batch of the sequences still alive,
// kernels/gru.cc) and gru_unit (one step, kernels/gru_unit.cc). For m rows at once:
//   [u | r] = act_gate(X_ur + h_prev @ W_ur)     W_ur: Weight's first 2 D^2 elements, a [D, 2D] matrix
//   reset_h = r * h_prev                          (Fluid's ResetHiddenPrev)
//   c       = act_node(X_c + reset_h @ W_c)       W_c: Weight's last D^2 elements, a [D, D] matrix
//   h       = (1 - u) * h_prev + u * c            origin_mode: u * h_prev + (1 - u) * c
// X is the gate input [m, 3D] (the projected input plus the bias); it is overwritten with the activated
// [u | r | c], Fluid's Gate / BatchGate, which is all the backward pass needs. A null h_prev stands for zeros
// (a sequence's first step without H0): its GEMMs are skipped, as in Fluid.
//
// Backward, from dh and the activated gates:
//   du = dh * (c - h_prev) * act_gate'(u)         origin_mode: dh * (h_prev - c)
//   dc = dh * u * act_node'(c)                    origin_mode: dh * (1 - u)
//   d_reset_h = dc @ W_c^T,  dr = d_reset_h * h_prev * act_gate'(r)
//   dh_prev += dh * (1 - u) + d_reset_h * r + [du | dr] @ W_ur^T      (origin_mode: dh * u)
// and the weight gradients dW_ur = h_prev^T [du | dr], dW_c = reset_h^T dc summed over all rows, which the
// callers take in one GEMM over every step's rows (GruWeightGrad) rather than one small-K GEMM per step.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "activation.h"
#include "blas.h"
#include "op_context.h"
#include "scratch.h"
#include "thread_pool.h"

namespace fl {

// The shape checks gru and gru_unit share (build time, with -1 for unknown dims, and run time): Weight is
// [D, 3D], the optional Bias [1, 3D] and the gate input `input` [rows, 3D], all of one dtype. Returns D (-1 when
// not known yet).
inline int64_t CheckGruShapes(InferShapeContext& ctx, const char* input) {
  const DDim w = ctx.InputDim("Weight");
  FL_ENFORCE(w.size() == 2 && (w[0] < 0 || w[1] < 0 || w[1] == 3 * w[0]) && (w[1] < 0 || w[1] % 3 == 0), ctx.Type(),
             ": ", ctx.Describe("Weight"), " must be [D, 3 * D] (update | reset gate, candidate)");
  const int64_t d = w[0] >= 0 ? w[0] : (w[1] >= 0 ? w[1] / 3 : -1);
  const DDim x = ctx.InputDim(input);
  FL_ENFORCE(x.size() == 2, ctx.Type(), ": ", ctx.Describe(input), " must have rank 2 [rows, 3 * D]");
  FL_ENFORCE(x[1] < 0 || d < 0 || x[1] == 3 * d, ctx.Type(), ": ", ctx.Describe(input),
             " must have width 3 * D = ", 3 * d, " for ", ctx.Describe("Weight"));
  ctx.EnforceSameDType(input, "Weight");
  if (ctx.HasInput("Bias")) {
    const DDim b = ctx.InputDim("Bias");
    FL_ENFORCE(b.size() == 2 && (b[0] < 0 || b[0] == 1) && (b[1] < 0 || d < 0 || b[1] == 3 * d), ctx.Type(), ": ",
               ctx.Describe("Bias"), " must be [1, 3 * D] = [1, ", 3 * d, "] for ", ctx.Describe("Weight"));
    ctx.EnforceSameDType(input, "Bias");
  }
  return d;
}

// The gate input of a GRU step: gate[i] = x[rows ? rows[i] : i] + bias (bias may be null), for m rows of 3D.
template <typename T>
void GruGateInput(const T* x, const int64_t* rows, const T* bias, int64_t m, int64_t d, T* gate) {
  const int64_t w = 3 * d;
  ParallelFor(m, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, w)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T* __restrict src = x + (rows ? rows[i] : i) * w;
      T* __restrict dst = gate + i * w;
      if (bias)
        for (int64_t j = 0; j < w; ++j) dst[j] = src[j] + bias[j];
      else std::copy(src, src + w, dst);
    }
  });
}

template <typename T>
struct GruCell {
  int64_t d;      // hidden width D
  const T* w_ur;  // [D, 2D], row stride 2D
  const T* w_c;   // [D, D], row stride D
  Activation gate_act, node_act;
  bool origin_mode;
  const T* w_ur_t = nullptr;  // W_ur^T [2D, D] and W_c^T [D, D], for the backward pass (TransposeGruWeights)
  const T* w_c_t = nullptr;
};

// The cell of a [D, 3D] Weight laid out as Fluid's gru and gru_unit read it.
template <typename T>
GruCell<T> MakeGruCell(const T* weight, int64_t d, Activation gate_act, Activation node_act, bool origin_mode) {
  return GruCell<T>{d, weight, weight + 2 * d * d, gate_act, node_act, origin_mode};
}

// Gives `cell` the transposed weights its backward pass multiplies by, written to buf (3 D^2 elements): the
// per-step GEMMs then run untransposed, which OpenBLAS serves with its small-matrix kernels for few rows (the
// transposed form measured 10-20% slower for 16-64 rows of D = 128 here).
template <typename T>
void TransposeGruWeights(GruCell<T>& cell, T* buf) {
  const int64_t d = cell.d;
  T* ur_t = buf;
  T* c_t = buf + 2 * d * d;
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < 2 * d; ++j) ur_t[j * d + i] = cell.w_ur[i * 2 * d + j];
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) c_t[j * d + i] = cell.w_c[i * d + j];
  cell.w_ur_t = ur_t;
  cell.w_c_t = c_t;
}

namespace gru_detail {

constexpr int kScratchResetGrad = 0;  // d_reset_h of the rows a thread works on
constexpr int kScratchZeros = 1;      // a zero h_prev row

template <typename T>
const T* ZeroRow(int64_t d) {
  T* z = Scratch<T>(kScratchZeros, static_cast<size_t>(d));
  std::fill(z, z + d, T(0));
  return z;
}

// Rows per thread: a part is worth a thread from about blas::kMinFlopsPerPart of GEMM work (6 D^2 per row).
inline int64_t RowGrain(int64_t d) {
  const double per_row = 6.0 * static_cast<double>(d) * static_cast<double>(d);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(blas::kMinFlopsPerPart / std::max(per_row, 1.0))));
}

// One step over rows [0, m) on the calling thread (see the top of the file).
template <typename T>
void ForwardRows(const GruCell<T>& cell, int64_t m, const T* hp, T* gate, T* reset_h, T* h) {
  const int64_t d = cell.d, w = 3 * d;
  if (m == 0) return;
  if (hp) blas::Gemm<T>(false, false, m, 2 * d, d, T(1), hp, d, cell.w_ur, 2 * d, T(1), gate, w);
  const T* zeros = hp ? nullptr : ZeroRow<T>(d);
  for (int64_t i = 0; i < m; ++i) {
    T* g = gate + i * w;
    Activate(cell.gate_act, g, g, 2 * d);
    const T* __restrict r = g + d;
    const T* __restrict p = hp ? hp + i * d : zeros;
    T* __restrict rh = reset_h + i * d;
    for (int64_t j = 0; j < d; ++j) rh[j] = r[j] * p[j];
  }
  if (hp) blas::Gemm<T>(false, false, m, d, d, T(1), reset_h, d, cell.w_c, d, T(1), gate + 2 * d, w);
  for (int64_t i = 0; i < m; ++i) {
    T* g = gate + i * w;
    T* c = g + 2 * d;
    Activate(cell.node_act, c, c, d);
    const T* __restrict u = g;
    const T* __restrict p = hp ? hp + i * d : zeros;
    T* __restrict hr = h + i * d;
    if (cell.origin_mode)
      for (int64_t j = 0; j < d; ++j) hr[j] = c[j] + u[j] * (p[j] - c[j]);
    else
      for (int64_t j = 0; j < d; ++j) hr[j] = p[j] + u[j] * (c[j] - p[j]);
  }
}

// The backward step over rows [0, m): dgate [m, 3D] is written, dhp (if not null) accumulated.
template <typename T>
void BackwardRows(const GruCell<T>& cell, int64_t m, const T* hp, const T* gate, const T* dh, T* dgate, T* dhp) {
  const int64_t d = cell.d, w = 3 * d;
  if (m == 0) return;
  const T* zeros = hp ? nullptr : ZeroRow<T>(d);
  for (int64_t i = 0; i < m; ++i) {
    const T* __restrict u = gate + i * w;
    const T* __restrict c = u + 2 * d;
    const T* __restrict p = hp ? hp + i * d : zeros;
    const T* __restrict g = dh + i * d;
    T* __restrict du = dgate + i * w;
    T* __restrict dc = du + 2 * d;
    T* __restrict dp = dhp ? dhp + i * d : nullptr;
    if (cell.origin_mode) {
      for (int64_t j = 0; j < d; ++j) {
        du[j] = g[j] * (p[j] - c[j]);
        dc[j] = g[j] * (T(1) - u[j]);
      }
      if (dp)
        for (int64_t j = 0; j < d; ++j) dp[j] += g[j] * u[j];
    } else {
      for (int64_t j = 0; j < d; ++j) {
        du[j] = g[j] * (c[j] - p[j]);
        dc[j] = g[j] * u[j];
      }
      if (dp)
        for (int64_t j = 0; j < d; ++j) dp[j] += g[j] * (T(1) - u[j]);
    }
    ActivationGrad(cell.gate_act, u, du, du, d);
    ActivationGrad(cell.node_act, c, dc, dc, d);
  }
  if (!hp) {  // reset_h = r * 0: the reset gate has no gradient
    for (int64_t i = 0; i < m; ++i) std::fill(dgate + i * w + d, dgate + i * w + 2 * d, T(0));
    return;
  }
  T* drh = Scratch<T>(kScratchResetGrad, static_cast<size_t>(m * d));
  blas::Gemm<T>(false, false, m, d, d, T(1), dgate + 2 * d, w, cell.w_c_t, d, T(0), drh, d);
  for (int64_t i = 0; i < m; ++i) {
    const T* __restrict r = gate + i * w + d;
    const T* __restrict p = hp + i * d;
    const T* __restrict g = drh + i * d;
    T* __restrict dr = dgate + i * w + d;
    T* __restrict dp = dhp ? dhp + i * d : nullptr;
    for (int64_t j = 0; j < d; ++j) dr[j] = g[j] * p[j];
    if (dp)
      for (int64_t j = 0; j < d; ++j) dp[j] += g[j] * r[j];
    ActivationGrad(cell.gate_act, r, dr, dr, d);
  }
  if (dhp) blas::Gemm<T>(false, false, m, d, 2 * d, T(1), dgate, w, cell.w_ur_t, d, T(1), dhp, d);
}

}  // namespace gru_detail

// One step over m rows (gate [m, 3D] holds X on entry, the activated gates on exit; reset_h and h [m, D] are
// written), the rows split across the thread pool when there are enough of them.
template <typename T>
void GruForward(const GruCell<T>& cell, int64_t m, const T* hp, T* gate, T* reset_h, T* h) {
  const int64_t d = cell.d;
  ParallelFor(m, gru_detail::RowGrain(d), [&](int64_t lo, int64_t hi) {
    gru_detail::ForwardRows(cell, hi - lo, hp ? hp + lo * d : nullptr, gate + lo * 3 * d, reset_h + lo * d, h + lo * d);
  });
}

// The backward step over m rows: dgate [m, 3D] is written (the gradient of X), dhp [m, D] accumulated when not
// null. The cell needs its transposed weights (TransposeGruWeights). The weight and bias gradients are left to
// GruWeightGrad and GruBiasGrad.
template <typename T>
void GruBackward(const GruCell<T>& cell, int64_t m, const T* hp, const T* gate, const T* dh, T* dgate, T* dhp) {
  const int64_t d = cell.d;
  FL_ENFORCE(cell.w_ur_t && cell.w_c_t, "GruBackward: the cell's transposed weights are not set");
  ParallelFor(m, gru_detail::RowGrain(d), [&](int64_t lo, int64_t hi) {
    gru_detail::BackwardRows(cell, hi - lo, hp ? hp + lo * d : nullptr, gate + lo * 3 * d, dh + lo * d,
                             dgate + lo * 3 * d, dhp ? dhp + lo * d : nullptr);
  });
}

// dW (beta = 0: set, 1: accumulate) from k rows of h_prev, reset_h [k, D] and dgate [k, 3D], every step's rows
// stacked: dW_ur = h_prev^T dgate[:, :2D], dW_c = reset_h^T dgate[:, 2D:]. A null hp (no row had one) leaves
// dW_ur at beta * dW_ur.
template <typename T>
void GruWeightGrad(int64_t d, int64_t k, const T* hp, const T* reset_h, const T* dgate, T beta, T* dw) {
  T* dw_ur = dw;
  T* dw_c = dw + 2 * d * d;
  auto scale = [&](T* p, int64_t n) {
    if (beta == T(0)) std::fill(p, p + n, T(0));
  };
  if (k == 0 || !hp) scale(dw_ur, 2 * d * d);
  else blas::Gemm<T>(true, false, d, 2 * d, k, T(1), hp, d, dgate, 3 * d, beta, dw_ur, 2 * d);
  if (k == 0) scale(dw_c, d * d);
  else blas::Gemm<T>(true, false, d, d, k, T(1), reset_h, d, dgate + 2 * d, 3 * d, beta, dw_c, d);
}

// db [3D] = the column sums of dgate [k, 3D], the columns split across the pool (each part streams its share of
// every row).
template <typename T>
void GruBiasGrad(int64_t d, int64_t k, const T* dgate, T* db) {
  const int64_t w = 3 * d;
  ParallelFor(w, std::max<int64_t>(8, kMinParallelElements / std::max<int64_t>(1, k)), [&](int64_t lo, int64_t hi) {
    T* __restrict out = db + lo;
    std::fill(out, out + (hi - lo), T(0));
    for (int64_t i = 0; i < k; ++i) {
      const T* __restrict row = dgate + i * w + lo;
      for (int64_t j = 0; j < hi - lo; ++j) out[j] += row[j];
    }
  });
}

}  // namespace fl
