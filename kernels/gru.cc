// gru: a GRU layer over the sequences of a LoD batch (Fluid's gru_op, layers.dynamic_gru). Input [T, 3D] holds
// every sequence's projected update, reset and candidate inputs (the user's fc); the cell math is
// kernels/helpers/gru_cell.h, shared with gru_unit.
//
// The batch is reordered by length (Fluid's sequence2batch, kernels/helpers/sequence_batch.h): step t is one
// block of rows, one per sequence still alive, so each step is two GEMMs over those rows (gates, then the
// candidate with the reset hidden state) and the h_prev of step t's rows is the head of step t-1's block.
// BatchGate / BatchResetHiddenPrev / BatchHidden are in that batch order (their LoD: the step offsets), Hidden in
// the input's order with its LoD. H0 [N, D] is one row per sequence, in input order; without it a sequence starts from
// zeros.
//
// The gradient walks the steps backwards. The weight gradients are not accumulated step by step (a GEMM with
// K = the rows alive, as Fluid does) but taken once over all T rows after the walk; the bias gradient is the
// column sums of the gate gradient. The batch order is recomputed from Hidden's LoD (Fluid keeps it as
// BatchGate's 3-level LoD instead).
#include <vector>

#include "helpers/gru_cell.h"
#include "helpers/lod.h"
#include "helpers/sequence_batch.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

void GruInferShape(InferShapeContext& ctx) {
  const int64_t d = CheckGruShapes(ctx, "Input");
  if (ctx.HasInput("H0")) {
    const DDim h0 = ctx.InputDim("H0");
    FL_ENFORCE(h0.size() == 2 && (h0[1] < 0 || d < 0 || h0[1] == d), "gru: ", ctx.Describe("H0"),
               " must be [N, D] with D = ", d, " for ", ctx.Describe("Weight"), " (one row per sequence)");
    ctx.EnforceSameDType("Input", "H0");
  }
  const int64_t t = ctx.InputDim("Input")[0];
  const DType dt = ctx.InputDType("Input");
  ctx.SetOutput("BatchGate", {t, d >= 0 ? 3 * d : -1}, dt);
  ctx.SetOutput("BatchResetHiddenPrev", {t, d}, dt);
  ctx.SetOutput("BatchHidden", {t, d}, dt);
  ctx.SetOutput("Hidden", {t, d}, dt);
  ctx.ShareLoD("Input", "Hidden");
}

// Input@GRAD takes BatchGate's dims (DefaultGradInferShape, ShapeLike) and Hidden's LoD, which is Input's.
void GruGradInferShape(InferShapeContext& ctx) {
  DefaultGradInferShape(ctx);
  if (ctx.HasOutput("Input@GRAD")) ctx.ShareLoD("Hidden", "Input@GRAD");
}

template <typename T>
GruCell<T> LayerCell(const ExecutionContext& ctx) {
  const Tensor& w = ctx.Input("Weight");
  return MakeGruCell(w.data<T>(), w.dims()[0], ActivationByName(ctx.Attr<std::string>("gate_activation")),
                     ActivationByName(ctx.Attr<std::string>("activation")), ctx.Attr<bool>("origin_mode"));
}

// The sequences of `slot` (its last LoD level) in batch order; H0, if given, must hold one row per sequence.
SequenceBatch BatchOf(const ExecutionContext& ctx, const char* slot) {
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, slot);
  if (const Tensor* h0 = ctx.InputOrNull("H0"))
    FL_ENFORCE(h0->dims()[0] == SequenceCount(offsets), ctx.Type(), ": H0 '", ctx.InputName("H0"), "' ", h0->dims(),
               " must have one row per sequence of ", slot, " '", ctx.InputName(slot), "' ", ctx.Input(slot).dims(),
               " LoD ", ctx.Input(slot).LoDString(), ": ", SequenceCount(offsets), " sequences");
  return MakeSequenceBatch(offsets, ctx.Attr<bool>("is_reverse"));
}

// H0's rows in batch order (the first alive(0) sequences of b.order), or null without H0.
template <typename T>
const T* OrderedH0(const ExecutionContext& ctx, const SequenceBatch& b, int64_t d, Tensor& buf) {
  const Tensor* h0 = ctx.InputOrNull("H0");
  if (!h0) return nullptr;
  T* p = buf.mutable_data<T>(DDim{static_cast<int64_t>(b.order.size()), d}, ctx.place());
  GatherRows(h0->data<T>(), d, b.order, p);
  return p;
}

// The h_prev rows of step t: the head of step t-1's block, or the ordered H0 (null: zeros) at step 0.
template <typename T>
const T* PrevRows(const SequenceBatch& b, int64_t t, const T* batch_hidden, const T* h0, int64_t d) {
  return t == 0 ? h0 : batch_hidden + b.step_begin[t - 1] * d;
}

const auto kGru = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const GruCell<T> cell = LayerCell<T>(ctx);
  const int64_t d = cell.d;
  const SequenceBatch b = BatchOf(ctx, "Input");
  const Tensor* bias = ctx.InputOrNull("Bias");
  const int64_t rows = static_cast<int64_t>(b.rows.size());
  T* gate = ctx.Alloc<T>("BatchGate");
  T* reset_h = ctx.Alloc<T>("BatchResetHiddenPrev");
  T* batch_h = ctx.Alloc<T>("BatchHidden");
  GruGateInput(ctx.Input("Input").data<T>(), b.rows.data(), bias ? bias->data<T>() : nullptr, rows, d, gate);
  Tensor h0_buf;
  const T* h0 = OrderedH0<T>(ctx, b, d, h0_buf);
  for (int64_t t = 0; t < b.steps(); ++t) {
    const int64_t s = b.step_begin[t];
    GruForward(cell, b.alive(t), PrevRows(b, t, batch_h, h0, d), gate + s * 3 * d, reset_h + s * d, batch_h + s * d);
  }
  ScatterRows(batch_h, d, b.rows, ctx.Alloc<T>("Hidden"));
  // The batch outputs' LoD: the step offsets (level 0 of Fluid's batch LoD; its other two levels, the input rows
  // and the sequence order, are not a LoD of these rows).
  const LoD steps = b.StepLoD();
  for (const char* slot : {"BatchGate", "BatchResetHiddenPrev", "BatchHidden"}) ctx.Output(slot)->set_lod(steps);
};

const auto kGruGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  GruCell<T> cell = LayerCell<T>(ctx);
  const int64_t d = cell.d;
  Tensor wt_buf;
  TransposeGruWeights(cell, wt_buf.mutable_data<T>(DDim{3 * d, d}, ctx.place()));
  const SequenceBatch b = BatchOf(ctx, "Hidden");
  const int64_t rows = static_cast<int64_t>(b.rows.size());
  const T* gate = ctx.Input("BatchGate").data<T>();
  const T* reset_h = ctx.Input("BatchResetHiddenPrev").data<T>();
  const T* batch_h = ctx.Input("BatchHidden").data<T>();
  Tensor h0_buf, dh0_buf, dh_buf, dgate_buf;
  const T* h0 = OrderedH0<T>(ctx, b, d, h0_buf);
  Tensor* dh0_out = h0 ? ctx.OutputOrNull("H0@GRAD") : nullptr;
  T* dh0 = dh0_out ? ZeroedOutput<T>(&dh0_buf, DDim{static_cast<int64_t>(b.order.size()), d}, ctx.place()) : nullptr;
  // Hidden@GRAD in batch order; each step adds its h_prev gradient into the previous step's rows.
  T* dh = dh_buf.mutable_data<T>(DDim{rows, d}, ctx.place());
  GatherRows(ctx.Input("Hidden@GRAD").data<T>(), d, b.rows, dh);
  T* dgate = dgate_buf.mutable_data<T>(DDim{rows, 3 * d}, ctx.place());
  for (int64_t t = b.steps() - 1; t >= 0; --t) {
    const int64_t s = b.step_begin[t];
    T* dhp = t == 0 ? dh0 : dh + b.step_begin[t - 1] * d;
    GruBackward(cell, b.alive(t), PrevRows(b, t, batch_h, h0, d), gate + s * 3 * d, dh + s * d, dgate + s * 3 * d, dhp);
  }
  if (Tensor* dx = ctx.OutputOrNull("Input@GRAD")) ScatterRows(dgate, 3 * d, b.rows, dx->mutable_data<T>(ctx.place()));
  if (Tensor* db = ctx.OutputOrNull("Bias@GRAD")) GruBiasGrad(d, rows, dgate, db->mutable_data<T>(ctx.place()));
  if (Tensor* dw = ctx.OutputOrNull("Weight@GRAD")) {
    // Every row's h_prev stacked in batch order (dh is free again): one GEMM per weight block over all T rows.
    // Without H0 the first step's rows have h_prev = 0 and reset_h = 0, so they are left out.
    T* hp = dh;
    const int64_t rows_per_step = std::max<int64_t>(1, rows / std::max<int64_t>(1, b.steps()));
    ParallelFor(b.steps() - 1, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, rows_per_step * d)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t t = lo + 1; t <= hi; ++t)
                    std::copy(batch_h + b.step_begin[t - 1] * d, batch_h + (b.step_begin[t - 1] + b.alive(t)) * d,
                              hp + b.step_begin[t] * d);
                });
    if (h0 && b.steps() > 0) std::copy(h0, h0 + b.alive(0) * d, hp);
    const int64_t first = h0 || b.steps() == 0 ? 0 : b.step_begin[1];
    GruWeightGrad(d, rows - first, hp + first * d, reset_h + first * d, dgate + first * 3 * d, T(0),
                  dw->mutable_data<T>(ctx.place()));
  }
  if (dh0_out) ScatterRows(dh0, d, b.order, dh0_out->mutable_data<T>(ctx.place()));
};

}  // namespace

FL_REGISTER_OP(gru, op) {
  op.Doc(
        "A GRU layer over the sequences of Input's LoD: for each step, [u, r] = gate_activation(x_ur + h_prev @ "
        "W_ur + b_ur), c = activation(x_c + (r * h_prev) @ W_c + b_c), h = (1 - u) * h_prev + u * c (origin_mode: "
        "u * h_prev + (1 - u) * c); h_prev starts at H0 or zeros; is_reverse walks each sequence from its end.")
      .Input("Input", "the projected gate inputs [T, 3 * D] of every sequence (LoDTensor): update, reset, candidate")
      .DispensableInput("H0", "the initial hidden state [N, D], one row per sequence (absent: zeros)")
      .Input("Weight",
             "[D, 3 * D]: its first D * 2D elements are the [D, 2D] update | reset weights, the last D * D the "
             "[D, D] candidate weights")
      .DispensableInput("Bias", "[1, 3 * D]: update, reset and candidate biases")
      .Output("BatchGate",
              "the activated gates [T, 3 * D] in batch order (step by step, each step's sequences longest first; "
              "LoD: the step offsets)")
      .Output("BatchResetHiddenPrev", "r * h_prev [T, D] in batch order (LoD: the step offsets)")
      .Output("BatchHidden", "the hidden states [T, D] in batch order (LoD: the step offsets)")
      .Output("Hidden", "the hidden states [T, D] in Input's order, with Input's LoD")
      .Attr<std::string>("activation", "tanh", "candidate activation: sigmoid, tanh, relu or identity")
      .OneOf(ActivationNames())
      .Attr<std::string>("gate_activation", "sigmoid", "update and reset gate activation")
      .OneOf(ActivationNames())
      .Attr<bool>("is_reverse", false, "run each sequence from its last step to its first")
      .Attr<bool>("origin_mode", false,
                  "h = u * h_prev + (1 - u) * c (Cho et al. 2014) instead of (1 - u) * h_prev + u * c")
      .KernelDTypeFrom("Input")
      .SetInferShape(GruInferShape)
      .CPUKernel<float, double>(kGru);
  op.GradOp(
        {"Input", "H0", "Weight", "Bias", "BatchGate", "BatchResetHiddenPrev", "BatchHidden", "Hidden", "Hidden@GRAD"})
      .Optional({"H0", "Bias"})
      // Fluid's gru_grad lists Input; the kernel needs only its shape and LoD (BatchGate's rows, Hidden's LoD), so
      // programs built here free the [T, 3 * D] input after the forward op, and Fluid's programs still bind.
      .AcceptsUnread({"Input"})
      .ShapeLike("Input", "BatchGate")
      .SetInferShape(GruGradInferShape)
      .Doc(
          "Gradient of gru, walking the steps backwards in batch order: Input@GRAD (with Input's LoD), H0@GRAD, "
          "Weight@GRAD (one GEMM per weight block over all rows) and Bias@GRAD.")
      .CPUKernel<float, double>(kGruGrad);
}

}  // namespace fl
