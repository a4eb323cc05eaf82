// lstm_unit: one LSTM cell step on precomputed gate inputs (Fluid's lstm_unit_op). X [N, 4D] holds the
// pre-activations in the order (i, f, o, g):
//   i = sigmoid(X_i), f = sigmoid(X_f + forget_bias), o = sigmoid(X_o), g = tanh(X_g)
//   C = f * C_prev + i * g,  H = o * tanh(C)
// Fusing the 4 activations and 5 elementwise ops into one pass over [N, D] is the point; the grad
// recomputes the gates from X and C_prev instead of keeping them alive.
#include <vector>

#include "helpers/lstm_unit_cell.h"
#include "op_context.h"

namespace fl {

namespace {

void LstmUnitInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const DDim c = ctx.InputDim("C_prev");
  FL_ENFORCE(x.size() == 2, "lstm_unit: ", ctx.Describe("X"), " must have rank 2 [N, 4 * D]");
  FL_ENFORCE(c.size() == 2, "lstm_unit: ", ctx.Describe("C_prev"), " must have rank 2 [N, D]");
  FL_ENFORCE(x[0] < 0 || c[0] < 0 || x[0] == c[0], "lstm_unit: ", ctx.Describe("X"), " and ", ctx.Describe("C_prev"),
             " must have the same batch size");
  FL_ENFORCE(x[1] < 0 || c[1] < 0 || x[1] == 4 * c[1], "lstm_unit: ", ctx.Describe("X"),
             " must have width 4 * D = ", 4 * c[1], " for ", ctx.Describe("C_prev"));
  FL_ENFORCE(x[1] < 0 || x[1] % 4 == 0, "lstm_unit: ", ctx.Describe("X"), " width must be a multiple of 4");
  const DDim out{x[0] >= 0 ? x[0] : c[0], c[1] >= 0 ? c[1] : (x[1] >= 0 ? x[1] / 4 : -1)};
  ctx.SetOutput("C", out, ctx.InputDType("X"));
  ctx.SetOutput("H", out, ctx.InputDType("X"));
}

// One row: x = [i | f | o | g] pre-activations (4 * d), c_prev (d) -> c, h (d). Plain pointer loops
// over contiguous rows so GCC vectorises them (VecSigmoid / VecTanh are branch-free arithmetic).
template <typename T>
void CellForward(const T* __restrict x, const T* __restrict cp, T fb, int64_t d, T* __restrict c, T* __restrict h) {
  const T* xi = x;
  const T* xf = x + d;
  const T* xo = x + 2 * d;
  const T* xg = x + 3 * d;
  for (int64_t j = 0; j < d; ++j) {
    const T cv = lstm_unit::CellC(xi[j], xf[j], xg[j], cp[j], fb);
    c[j] = cv;
    h[j] = lstm_unit::CellH(xo[j], cv);
  }
}

// One row of the grad: recomputes the gates, then dX (4 * d) and dC_prev (d) from dH and dC.
template <typename T>
void CellBackward(const T* __restrict x, const T* __restrict cp, const T* __restrict dh, const T* __restrict dc, T fb,
                  int64_t d, T* __restrict dx, T* __restrict dcp) {
  const T* xi = x;
  const T* xf = x + d;
  const T* xo = x + 2 * d;
  const T* xg = x + 3 * d;
  T* dxi = dx;
  T* dxf = dx + d;
  T* dxo = dx + 2 * d;
  T* dxg = dx + 3 * d;
  for (int64_t j = 0; j < d; ++j) {
    const lstm_unit::CellGrad<T> g = lstm_unit::CellBackward(xi[j], xf[j], xo[j], xg[j], cp[j], dh[j], dc[j], fb);
    dxi[j] = g.dxi;
    dxf[j] = g.dxf;
    dxo[j] = g.dxo;
    dxg[j] = g.dxg;
    dcp[j] = g.dcp;
  }
}

const auto kLstmUnit = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& xt = ctx.Input("X");
  const Tensor& cpt = ctx.Input("C_prev");
  const int64_t n = cpt.dims()[0], d = cpt.dims()[1];
  const T fb = static_cast<T>(ctx.Attr<float>("forget_bias"));
  const T* x = xt.data<T>();
  const T* cp = cpt.data<T>();
  T* c = ctx.Alloc<T>("C");
  T* h = ctx.Alloc<T>("H");
  for (int64_t r = 0; r < n; ++r) CellForward(x + r * 4 * d, cp + r * d, fb, d, c + r * d, h + r * d);
};

const auto kLstmUnitGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dxt = ctx.OutputOrNull("X@GRAD");
  Tensor* dcpt = ctx.OutputOrNull("C_prev@GRAD");
  if (!dxt && !dcpt) return;
  const lstm_unit::GradInputs in(ctx);
  const Tensor &xt = in.xt, &cpt = in.cpt;
  const int64_t n = in.n, d = in.d;
  const T fb = static_cast<T>(in.forget_bias);
  const Tensor *dht = in.dht, *dct = in.dct;  // a missing one reads as a row of zeros
  std::vector<T> zeros((dht && dct) ? 0 : d, T(0));
  const T* x = xt.data<T>();
  const T* cp = cpt.data<T>();
  const T* dh = dht ? dht->data<T>() : nullptr;
  const T* dc = dct ? dct->data<T>() : nullptr;
  std::vector<T> scratch;  // stands in for an output nobody needs
  T* dx = nullptr;
  T* dcp = nullptr;
  if (dxt) {
    dxt->Resize(xt.dims());
    dx = dxt->mutable_data<T>(ctx.place());
  } else {
    scratch.resize(4 * d);
  }
  if (dcpt) {
    dcpt->Resize(cpt.dims());
    dcp = dcpt->mutable_data<T>(ctx.place());
  } else {
    scratch.resize(scratch.size() + d);
  }
  for (int64_t r = 0; r < n; ++r) {
    T* dxr = dx ? dx + r * 4 * d : scratch.data();
    T* dcpr = dcp ? dcp + r * d : scratch.data() + (dx ? 0 : 4 * d);
    CellBackward(x + r * 4 * d, cp + r * d, dh ? dh + r * d : zeros.data(), dc ? dc + r * d : zeros.data(), fb, d, dxr,
                 dcpr);
  }
};

}  // namespace

FL_REGISTER_OP(lstm_unit, op) {
  op.Doc(
        "One LSTM step on gate pre-activations X = [i, f, o, g] (each [N, D]): C = sigmoid(f + forget_bias) * "
        "C_prev + sigmoid(i) * tanh(g), H = sigmoid(o) * tanh(C).")
      .Input("X", "gate pre-activations [N, 4 * D], order (i, f, o, g)")
      .Input("C_prev", "previous cell state [N, D]")
      .Output("C", "new cell state [N, D]")
      .Output("H", "new hidden state [N, D]")
      .Attr<float>("forget_bias", 0.0f, "added to the forget gate pre-activation")
      .SetInferShape(LstmUnitInferShape)
      .CPUKernel<float, double>(kLstmUnit);
  op.GradOp({"X", "C_prev", "C@GRAD", "H@GRAD"})
      .Doc(
          "Gradient of lstm_unit: X@GRAD and C_prev@GRAD from C@GRAD and H@GRAD (either may be missing: zeros); "
          "the gates are recomputed from X and C_prev.")
      .Optional({"C@GRAD", "H@GRAD"})
      .CPUKernel<float, double>(kLstmUnitGrad);
}

}  // namespace fl
