// gru_unit: one GRU step on a batch (Fluid's gru_unit_op, the cell of layers.gru_unit). Input [N, 3D] holds the
// projected update, reset and candidate inputs; with HiddenPrev [N, D] and Weight [D, 3D] (the [D, 2D] update |
// reset weights, then the [D, D] candidate weights, as two blocks of memory) the cell math is
// kernels/helpers/gru_cell.h, shared with gru (dynamic_gru). Activations are Fluid's integer codes: identity 0,
// sigmoid 1, tanh 2, relu 3. Like Fluid's, the outputs carry no LoD (gru_unit's InferShape shares none).
#include "helpers/gru_cell.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

void GruUnitInferShape(InferShapeContext& ctx) {
  const int64_t d = CheckGruShapes(ctx, "Input");
  const DDim x = ctx.InputDim("Input");
  const DDim hp = ctx.InputDim("HiddenPrev");
  FL_ENFORCE(hp.size() == 2, "gru_unit: ", ctx.Describe("HiddenPrev"), " must have rank 2 [N, D]");
  FL_ENFORCE(hp[1] < 0 || d < 0 || hp[1] == d, "gru_unit: ", ctx.Describe("HiddenPrev"), " must have width D = ", d,
             " for ", ctx.Describe("Weight"));
  FL_ENFORCE(x[0] < 0 || hp[0] < 0 || x[0] == hp[0], "gru_unit: ", ctx.Describe("Input"), " and ",
             ctx.Describe("HiddenPrev"), " must have the same batch size");
  ctx.EnforceSameDType("Input", "HiddenPrev");
  const int64_t n = x[0] >= 0 ? x[0] : hp[0];
  const int64_t width = d >= 0 ? d : hp[1];
  const DType dt = ctx.InputDType("Input");
  ctx.SetOutput("Gate", {n, width >= 0 ? 3 * width : -1}, dt);
  ctx.SetOutput("ResetHiddenPrev", {n, width}, dt);
  ctx.SetOutput("Hidden", {n, width}, dt);
}

template <typename T>
GruCell<T> UnitCell(const ExecutionContext& ctx) {
  const Tensor& w = ctx.Input("Weight");
  return MakeGruCell(w.data<T>(), w.dims()[0], ActivationByCode(ctx.Attr<int32_t>("gate_activation")),
                     ActivationByCode(ctx.Attr<int32_t>("activation")), ctx.Attr<bool>("origin_mode"));
}

const auto kGruUnit = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const GruCell<T> cell = UnitCell<T>(ctx);
  const Tensor& x = ctx.Input("Input");
  const Tensor* bias = ctx.InputOrNull("Bias");
  const int64_t n = x.dims()[0];
  T* gate = ctx.Alloc<T>("Gate");
  GruGateInput(x.data<T>(), nullptr, bias ? bias->data<T>() : nullptr, n, cell.d, gate);
  GruForward(cell, n, ctx.Input("HiddenPrev").data<T>(), gate, ctx.Alloc<T>("ResetHiddenPrev"), ctx.Alloc<T>("Hidden"));
};

const auto kGruUnitGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  GruCell<T> cell = UnitCell<T>(ctx);
  const Tensor& gate = ctx.Input("Gate");
  const int64_t n = gate.dims()[0], d = cell.d;
  Tensor wt_buf;
  TransposeGruWeights(cell, wt_buf.mutable_data<T>(DDim{3 * d, d}, ctx.place()));
  const T* hp = ctx.Input("HiddenPrev").data<T>();
  // The gate gradient is Input@GRAD itself; when nobody needs that, a temporary.
  Tensor dgate_tmp;
  Tensor* dx = ctx.OutputOrNull("Input@GRAD");
  T* dgate = dx ? dx->mutable_data<T>(ctx.place()) : dgate_tmp.mutable_data<T>(DDim{n, 3 * d}, ctx.place());
  T* dhp = ZeroedOutputOrNull<T>(ctx, "HiddenPrev@GRAD");
  GruBackward(cell, n, hp, gate.data<T>(), ctx.Input("Hidden@GRAD").data<T>(), dgate, dhp);
  if (Tensor* dw = ctx.OutputOrNull("Weight@GRAD"))
    GruWeightGrad(d, n, hp, ctx.Input("ResetHiddenPrev").data<T>(), dgate, T(0), dw->mutable_data<T>(ctx.place()));
  if (Tensor* db = ctx.OutputOrNull("Bias@GRAD")) GruBiasGrad(d, n, dgate, db->mutable_data<T>(ctx.place()));
};

}  // namespace

FL_REGISTER_OP(gru_unit, op) {
  op.Doc(
        "One GRU step: [u, r] = gate_act(Input_ur + HiddenPrev @ W_ur + b_ur), ResetHiddenPrev = r * HiddenPrev, "
        "c = act(Input_c + ResetHiddenPrev @ W_c + b_c), Hidden = (1 - u) * HiddenPrev + u * c "
        "(origin_mode: u * HiddenPrev + (1 - u) * c). Gate holds the activated [u, r, c].")
      .Input("Input", "the projected gate inputs [N, 3 * D]: update, reset, candidate")
      .Input("HiddenPrev", "the previous hidden state [N, D]")
      .Input("Weight",
             "[D, 3 * D]: its first D * 2D elements are the [D, 2D] update | reset weights, the last D * D the "
             "[D, D] candidate weights")
      .DispensableInput("Bias", "[1, 3 * D]: update, reset and candidate biases")
      .Output("Gate", "the activated update gate, reset gate and candidate [N, 3 * D]")
      .Output("ResetHiddenPrev", "r * HiddenPrev [N, D]")
      .Output("Hidden", "the new hidden state [N, D]")
      .Attr<int32_t>("activation", 2, "candidate activation: 0 identity, 1 sigmoid, 2 tanh, 3 relu")
      .Range(0, 3)
      .Attr<int32_t>("gate_activation", 1, "update and reset gate activation: 0 identity, 1 sigmoid, 2 tanh, 3 relu")
      .Range(0, 3)
      .Attr<bool>("origin_mode", false,
                  "Hidden = u * HiddenPrev + (1 - u) * c (Cho et al. 2014) instead of (1 - u) * HiddenPrev + u * c")
      .KernelDTypeFrom("Input")
      .SetInferShape(GruUnitInferShape)
      .CPUKernel<float, double>(kGruUnit);
  op.GradOp({"Input", "HiddenPrev", "Weight", "Bias", "Gate", "ResetHiddenPrev", "Hidden", "Hidden@GRAD"})
      .Optional({"Bias"})
      // Fluid 1.8's gru_unit_grad lists Input (and earlier releases Hidden): accepted, not needed by the kernel.
      .AcceptsUnread({"Input", "Hidden"})
      .ShapeLike("Input", "Gate")
      .Doc(
          "Gradient of gru_unit from the saved activated gates: Input@GRAD (the gate gradient), HiddenPrev@GRAD, "
          "Weight@GRAD and Bias@GRAD (column sums of the gate gradient).")
      .CPUKernel<float, double>(kGruUnitGrad);
}

}  // namespace fl
