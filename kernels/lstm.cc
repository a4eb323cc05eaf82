// lstm and lstmp: Fluid's dynamic LSTM over a LoD batch (lstm_op, lstmp_op), with their gradients. Input [T, 4D]
// holds the already-projected gate inputs x_t W_x of every step of every sequence; each row is laid out as
// Fluid's weights are: [candidate | input gate | forget gate | output gate], D each. Per step, with act_g the gate,
// act_c the candidate and act_h the cell activation and peepholes w_ic, w_fc, w_oc (Bias[4D:7D]):
//   i = act_g(x_i + r_{t-1} W_i + c_{t-1} w_ic + b_i),  f = act_g(x_f + r_{t-1} W_f + c_{t-1} w_fc + b_f)
//   g = act_c(x_c + r_{t-1} W_c + b_c),  c_t = f c_{t-1} + i g (lstmp: clipped to [-cell_clip, cell_clip])
//   o = act_g(x_o + r_{t-1} W_o + c_t w_oc + b_o),  h_t = o act_h(c_t)
// with r = h (lstm) or, in lstmp, the projection r_t = proj_act(h_t ProjWeight) (clipped to proj_clip).
//
// The batch is reordered by length (helpers/sequence_batch.h, Fluid's sequence2batch) so that each time step is
// one block of rows, one per sequence still alive: the recurrent product of a step is ONE GEMM over that block,
// followed by one fused pass of the cell per row. BatchGate (the activated gates), BatchCellPreAct (act_h(c)) and
// lstmp's BatchHidden stay in batch order for the gradient, which walks the steps backwards with one GEMM per step
// for the state gradient; the weight gradients are single GEMMs over all rows after the walk.
#include <algorithm>
#include <cstring>
#include <vector>

#include "helpers/activation.h"
#include "helpers/blas.h"
#include "helpers/lod.h"
#include "helpers/same_dims.h"
#include "helpers/sequence_batch.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// ------------------------------------------------------------------ shapes

bool Agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

// Weight's rows for lstm: the recurrent input is the hidden state itself.
constexpr int64_t kRowsAreHidden = -2;

// The checks both ops share; returns the hidden size D (-1 while unknown). `rec` is the width of the recurrent
// input, the rows of Weight: P for lstmp, kRowsAreHidden for lstm.
int64_t CheckGatesAndBias(InferShapeContext& ctx, int64_t rec) {
  const std::string& op = ctx.Type();
  EnforceRank(ctx, "Input", 2, -1, " ([T, 4 * D], a LoDTensor of projected gate inputs)");
  EnforceRank(ctx, "Weight", 2, -1, "");
  const DDim in = ctx.InputDim("Input"), w = ctx.InputDim("Weight");
  FL_ENFORCE(in[1] < 0 || in[1] % 4 == 0, op, ": ", ctx.Describe("Input"),
             " must be [T, 4 * D]: its width is not a multiple of 4");
  const int64_t d = in[1] >= 0 ? in[1] / 4 : (w[1] >= 0 && w[1] % 4 == 0 ? w[1] / 4 : -1);
  if (rec == kRowsAreHidden) rec = d;
  FL_ENFORCE(Agree(w[0], rec) && Agree(w[1], d < 0 ? -1 : 4 * d), op, ": ", ctx.Describe("Weight"), " must be [", rec,
             ", ", d < 0 ? -1 : 4 * d, "] for ", ctx.Describe("Input"));
  ctx.EnforceSameDType("Input", "Weight");
  EnforceRank(ctx, "Bias", 2, -1, "");
  const DDim b = ctx.InputDim("Bias");
  const bool peep = ctx.Attr<bool>("use_peepholes");
  const int64_t bw = d < 0 ? -1 : (peep ? 7 : 4) * d;
  FL_ENFORCE(Agree(b[0], 1) && Agree(b[1], bw), op, ": ", ctx.Describe("Bias"), " must be [1, ", bw, "] (",
             peep ? "use_peepholes: 4 * D gate biases then the 3 * D peephole weights w_ic, w_fc, w_oc"
                  : "4 * D gate biases; use_peepholes is off",
             ")");
  ctx.EnforceSameDType("Input", "Bias");
  return d;
}

// H0 [N, h_width] and C0 [N, D], both optional but H0 only with C0 (Fluid's rule).
void CheckInitialStates(InferShapeContext& ctx, int64_t h_width, int64_t d) {
  const std::string& op = ctx.Type();
  if (ctx.HasInput("H0"))
    FL_ENFORCE(ctx.HasInput("C0"), op, ": ", ctx.Describe("H0"),
               " is given without C0: give both initial states, "
               "or only C0, or neither");
  for (const char* slot : {"H0", "C0"}) {
    if (!ctx.HasInput(slot)) continue;
    const int64_t width = slot[0] == 'H' ? h_width : d;
    EnforceRank(ctx, slot, 2, width, Str(" ([N, ", width, "], one row per sequence)").c_str());
    ctx.EnforceSameDType("Input", slot);
  }
  if (ctx.HasInput("H0") && ctx.HasInput("C0"))
    FL_ENFORCE(Agree(ctx.InputDim("H0")[0], ctx.InputDim("C0")[0]), op, ": ", ctx.Describe("H0"), " and ",
               ctx.Describe("C0"), " must have one row per sequence each");
}

void LstmInferShape(InferShapeContext& ctx) {
  const int64_t d = CheckGatesAndBias(ctx, kRowsAreHidden);
  CheckInitialStates(ctx, d, d);
  const DType dt = ctx.InputDType("Input");
  const int64_t t = ctx.InputDim("Input")[0];
  ctx.SetOutput("Hidden", DDim{t, d}, dt);
  ctx.SetOutput("Cell", DDim{t, d}, dt);
  ctx.SetOutput("BatchGate", DDim{t, d < 0 ? -1 : 4 * d}, dt);
  ctx.SetOutput("BatchCellPreAct", DDim{t, d}, dt);
  ctx.ShareLoD("Input", "Hidden");
  ctx.ShareLoD("Input", "Cell");
}

void LstmpInferShape(InferShapeContext& ctx) {
  EnforceRank(ctx, "ProjWeight", 2, -1, " ([D, P])");
  const DDim pw = ctx.InputDim("ProjWeight");
  const int64_t p = pw[1];
  const int64_t d = CheckGatesAndBias(ctx, p);
  FL_ENFORCE(Agree(pw[0], d), "lstmp: ", ctx.Describe("ProjWeight"), " must be [D, P] with D = ", d,
             " the hidden "
             "size of ",
             ctx.Describe("Input"));
  ctx.EnforceSameDType("Input", "ProjWeight");
  CheckInitialStates(ctx, p, d);
  const DType dt = ctx.InputDType("Input");
  const int64_t t = ctx.InputDim("Input")[0];
  ctx.SetOutput("Projection", DDim{t, p}, dt);
  ctx.SetOutput("Cell", DDim{t, d}, dt);
  ctx.SetOutput("BatchGate", DDim{t, d < 0 ? -1 : 4 * d}, dt);
  ctx.SetOutput("BatchCellPreAct", DDim{t, d}, dt);
  ctx.SetOutput("BatchHidden", DDim{t, d}, dt);
  ctx.ShareLoD("Input", "Projection");
  ctx.ShareLoD("Input", "Cell");
}

// ------------------------------------------------------------------ the cell

// One row of the cell, forward and backward, for any activations. Each row's data (4D gates and a few D-wide
// vectors) stays in L1 across the short passes below; each pass is one vectorised loop (activation.h).
template <typename T>
struct Cell {
  int64_t d = 0;
  Activation gate = Activation::kSigmoid, cell = Activation::kTanh, cand = Activation::kTanh;
  const T* peep = nullptr;  // [w_ic | w_fc | w_oc], 3D, or null without peepholes
  T clip = T(0);            // > 0: c is clipped to [-clip, clip]

  // g: the row's 4D gate pre-activations, replaced by the activated gates; c_prev null: zeros.
  void Forward(T* __restrict g, const T* __restrict c_prev, T* __restrict c, T* __restrict s, T* __restrict h) const {
    T* gc = g;
    T* gi = g + d;
    T* gf = g + 2 * d;
    T* go = g + 3 * d;
    if (peep && c_prev)
      for (int64_t j = 0; j < d; ++j) {
        gi[j] += c_prev[j] * peep[j];
        gf[j] += c_prev[j] * peep[d + j];
      }
    Activate(cand, gc, gc, d);
    Activate(gate, gi, gi, 2 * d);  // the input and forget gates are adjacent
    if (c_prev)
      for (int64_t j = 0; j < d; ++j) c[j] = gc[j] * gi[j] + c_prev[j] * gf[j];
    else
      for (int64_t j = 0; j < d; ++j) c[j] = gc[j] * gi[j];
    if (clip > T(0))
      for (int64_t j = 0; j < d; ++j) c[j] = c[j] < -clip ? -clip : (c[j] > clip ? clip : c[j]);
    if (peep)
      for (int64_t j = 0; j < d; ++j) go[j] += c[j] * peep[2 * d + j];
    Activate(gate, go, go, d);
    Activate(cell, c, s, d);
    for (int64_t j = 0; j < d; ++j) h[j] = go[j] * s[j];
  }

  // From the activated gates g, c_prev (null: zeros), c, s = act_h(c) and dh: the gate pre-activation gradients
  // dg (4D). dc holds the gradient reaching c from later steps and Cell@GRAD on entry and the total gradient of
  // the pre-clip cell on return; dc_prev (null: not wanted) and the peephole gradients dpeep (3D, null: not
  // wanted) are added to. tmp: D scratch.
  void Backward(const T* __restrict g, const T* __restrict c_prev, const T* __restrict c, const T* __restrict s,
                const T* __restrict dh, T* __restrict dc, T* __restrict dg, T* __restrict dc_prev, T* __restrict dpeep,
                T* __restrict tmp) const {
    const T* gc = g;
    const T* gi = g + d;
    const T* gf = g + 2 * d;
    const T* go = g + 3 * d;
    T* dgc = dg;
    T* dgi = dg + d;
    T* dgf = dg + 2 * d;
    T* dgo = dg + 3 * d;
    for (int64_t j = 0; j < d; ++j) {
      dgo[j] = dh[j] * s[j];
      tmp[j] = dh[j] * go[j];
    }
    ActivationGrad(gate, go, dgo, dgo, d);
    ActivationGrad(cell, s, tmp, tmp, d);
    const T* wo = peep ? peep + 2 * d : nullptr;
    for (int64_t j = 0; j < d; ++j) {
      T total = dc[j] + tmp[j] + (wo ? dgo[j] * wo[j] : T(0));
      if (clip > T(0) && (c[j] >= clip || c[j] <= -clip)) total = T(0);  // clipped: c does not move
      dc[j] = total;
      dgc[j] = total * gi[j];
      dgi[j] = total * gc[j];
      dgf[j] = c_prev ? total * c_prev[j] : T(0);
    }
    ActivationGrad(cand, gc, dgc, dgc, d);
    ActivationGrad(gate, gi, dgi, dgi, 2 * d);
    if (dc_prev) {
      if (peep)
        for (int64_t j = 0; j < d; ++j) dc_prev[j] += dc[j] * gf[j] + dgi[j] * peep[j] + dgf[j] * peep[d + j];
      else
        for (int64_t j = 0; j < d; ++j) dc_prev[j] += dc[j] * gf[j];
    }
    if (dpeep) {
      if (c_prev)
        for (int64_t j = 0; j < d; ++j) {
          dpeep[j] += dgi[j] * c_prev[j];
          dpeep[d + j] += dgf[j] * c_prev[j];
        }
      for (int64_t j = 0; j < d; ++j) dpeep[2 * d + j] += dgo[j] * c[j];
    }
  }
};

// lstmp's projection activation. Fluid 1.8's lstmp kernels apply cell_activation whenever proj_activation is not
// "identity" (forward and gradient alike), so a program trained by Fluid computes exactly this.
Activation ProjActivation(const ExecutionContext& ctx) {
  return ActivationByName(ctx.Attr<std::string>("proj_activation")) == Activation::kIdentity
             ? Activation::kIdentity
             : ActivationByName(ctx.Attr<std::string>("cell_activation"));
}

template <typename T>
Cell<T> MakeCell(const ExecutionContext& ctx, bool projected, int64_t d, const T* bias) {
  Cell<T> cell;
  cell.d = d;
  cell.gate = ActivationByName(ctx.Attr<std::string>("gate_activation"));
  cell.cell = ActivationByName(ctx.Attr<std::string>("cell_activation"));
  cell.cand = ActivationByName(ctx.Attr<std::string>("candidate_activation"));
  cell.peep = ctx.Attr<bool>("use_peepholes") ? bias + 4 * d : nullptr;
  if (projected) cell.clip = static_cast<T>(ctx.Attr<float>("cell_clip"));
  return cell;
}

// ------------------------------------------------------------------ batch order

// The one-level LoD of `slot` (the sequences the recurrence runs over) and the batch order it gives.
SequenceBatch BatchOf(const ExecutionContext& ctx, const char* slot) {
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, slot);
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.lod().size() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " has ",
             t.lod().size(), " LoD levels ", t.LoDString(), "; ", ctx.Type(),
             " runs over one level of sequences (as Fluid's sequence2batch): drop the outer levels with lod_reset");
  return MakeSequenceBatch(offsets, ctx.Attr<bool>("is_reverse"));
}

// Rows are copied in parallel once a copy is large enough to pay for a second thread.
int64_t RowGrain(int64_t width) { return std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, width)); }

// dst[k] = src[rows[k]] (+ bias, when given): input order -> batch order.
template <typename T>
void Gather(const T* src, int64_t width, const std::vector<int64_t>& rows, const T* bias, T* dst) {
  ParallelFor(static_cast<int64_t>(rows.size()), RowGrain(width), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const T* s = src + rows[k] * width;
      T* o = dst + k * width;
      if (bias)
        for (int64_t j = 0; j < width; ++j) o[j] = s[j] + bias[j];
      else std::memcpy(o, s, sizeof(T) * width);
    }
  });
}

// dst[rows[k]] = src[k]: batch order -> input order.
template <typename T>
void Scatter(const T* src, int64_t width, const std::vector<int64_t>& rows, T* dst) {
  ParallelFor(static_cast<int64_t>(rows.size()), RowGrain(width), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) std::memcpy(dst + rows[k] * width, src + k * width, sizeof(T) * width);
  });
}

// An initial state [N, width] checked against the batch and reordered to the batch's sequence order (null when
// the slot is absent).
template <typename T>
const T* OrderedState(const ExecutionContext& ctx, const char* slot, const SequenceBatch& batch, int64_t width,
                      Tensor* buf) {
  const Tensor* s = ctx.InputOrNull(slot);
  if (!s) return nullptr;
  const int64_t n = static_cast<int64_t>(batch.order.size());
  FL_ENFORCE(s->rank() == 2 && s->dims()[0] == n && s->dims()[1] == width, ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' ", s->dims(), " must be [", n, ", ", width,
             "]: one row per sequence of Input's "
             "LoD (",
             n, " sequences)");
  T* o = buf->mutable_data<T>(DDim{n, width}, ctx.place());
  GatherRows(s->data<T>(), width, batch.order, o);
  return o;
}

// A temporary [rows, width] that the allocator counts (its bytes show in the peak like the outputs').
template <typename T>
T* Temp(Tensor* t, int64_t rows, int64_t width, const Place& place) {
  return t->mutable_data<T>(DDim{rows, width}, place);
}

template <typename T>
T* Zeroed(Tensor* t, int64_t rows, int64_t width, const Place& place) {
  T* p = Temp<T>(t, rows, width, place);
  std::fill(p, p + rows * width, T(0));
  return p;
}

// proj_clip then the projection activation, in place over n * p values (lstmp forward).
template <typename T>
void ProjectionActivate(Activation act, T clip, T* r, int64_t n) {
  Activate(act, r, r, n);
  if (clip > T(0))
    for (int64_t i = 0; i < n; ++i) r[i] = r[i] < -clip ? -clip : (r[i] > clip ? clip : r[i]);
}

// ------------------------------------------------------------------ forward

// Both ops. projected: lstmp (ProjWeight, Projection, BatchHidden); else lstm (Hidden).
template <typename T>
void LstmForward(const ExecutionContext& ctx, bool projected) {
  const Tensor& input = ctx.Input("Input");
  const Tensor& weight = ctx.Input("Weight");
  const int64_t d = input.dims()[1] / 4, t_rows = input.dims()[0];
  const int64_t r_width = projected ? ctx.Input("ProjWeight").dims()[1] : d;  // the recurrent input's width
  const SequenceBatch batch = BatchOf(ctx, "Input");
  const Place& place = ctx.place();
  const T* bias = ctx.Input("Bias").data<T>();
  const T* w = weight.data<T>();
  const Cell<T> cell = MakeCell<T>(ctx, projected, d, bias);

  Tensor h0_buf, c0_buf, hb_buf, cb_buf, rb_buf;
  const T* h0 = OrderedState<T>(ctx, "H0", batch, r_width, &h0_buf);
  const T* c0 = OrderedState<T>(ctx, "C0", batch, d, &c0_buf);
  T* gates = ctx.Alloc<T>("BatchGate");
  T* s = ctx.Alloc<T>("BatchCellPreAct");
  T* cb = Temp<T>(&cb_buf, t_rows, d, place);
  T* hb = projected ? ctx.Alloc<T>("BatchHidden") : Temp<T>(&hb_buf, t_rows, d, place);
  T* rb = projected ? Temp<T>(&rb_buf, t_rows, r_width, place) : hb;  // what the next step multiplies by Weight
  const T* proj_w = projected ? ctx.Input("ProjWeight").data<T>() : nullptr;
  const Activation proj_act = projected ? ProjActivation(ctx) : Activation::kIdentity;
  const T proj_clip = projected ? static_cast<T>(ctx.Attr<float>("proj_clip")) : T(0);

  Gather(input.data<T>(), 4 * d, batch.rows, bias, gates);  // x + b, in batch order
  for (int64_t t = 0; t < batch.steps(); ++t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const int64_t pb0 = t > 0 ? batch.step_begin[t - 1] : 0;
    T* g = gates + b0 * 4 * d;
    if (t > 0)  // the sequences alive now are the first n of the previous step
      blas::Gemm<T>(false, false, n, 4 * d, r_width, T(1), rb + pb0 * r_width, w, T(1), g);
    else if (h0) blas::Gemm<T>(false, false, n, 4 * d, r_width, T(1), h0, w, T(1), g);
    for (int64_t k = 0; k < n; ++k) {
      const T* c_prev = t > 0 ? cb + (pb0 + k) * d : (c0 ? c0 + k * d : nullptr);
      const int64_t r = b0 + k;
      cell.Forward(g + k * 4 * d, c_prev, cb + r * d, s + r * d, hb + r * d);
    }
    if (projected) {
      T* rt = rb + b0 * r_width;
      blas::Gemm<T>(false, false, n, r_width, d, T(1), hb + b0 * d, proj_w, T(0), rt);
      ProjectionActivate(proj_act, proj_clip, rt, n * r_width);
    }
  }
  Scatter(cb, d, batch.rows, ctx.Alloc<T>("Cell"));
  if (projected) Scatter(rb, r_width, batch.rows, ctx.Alloc<T>("Projection"));
  else Scatter(hb, d, batch.rows, ctx.Alloc<T>("Hidden"));
  // The batch-ordered outputs carry the step offsets: sequence k of their LoD is time step k.
  const LoD steps{std::vector<size_t>(batch.step_begin.begin(), batch.step_begin.end())};
  for (const char* slot : {"BatchGate", "BatchCellPreAct", projected ? "BatchHidden" : nullptr})
    if (slot) ctx.Output(slot)->set_lod(steps);
}

const auto kLstm = [](const ExecutionContext& ctx, auto tag) { LstmForward<typename decltype(tag)::type>(ctx, false); };
const auto kLstmp = [](const ExecutionContext& ctx, auto tag) { LstmForward<typename decltype(tag)::type>(ctx, true); };

// ------------------------------------------------------------------ gradient

// A batch-ordered intermediate the gradient reads must be the forward op's for this batch.
void CheckBatchInput(const ExecutionContext& ctx, const char* slot, int64_t rows, int64_t width) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.rank() == 2 && t.dims()[0] == rows && t.dims()[1] == width, ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' ", t.dims(), " must be [", rows, ", ", width, "] as the forward op wrote it");
}

// Out@GRAD in batch order, or zeros when that output feeds nothing.
template <typename T>
T* BatchGrad(const ExecutionContext& ctx, const char* slot, const SequenceBatch& batch, int64_t width, Tensor* buf) {
  const int64_t rows = static_cast<int64_t>(batch.rows.size());
  const Tensor* g = ctx.InputOrNull(slot);
  if (!g) return Zeroed<T>(buf, rows, width, ctx.place());
  FL_ENFORCE(g->numel() == rows * width, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' ", g->dims(),
             " must be [", rows, ", ", width, "]");
  T* p = Temp<T>(buf, rows, width, ctx.place());
  Gather<T>(g->data<T>(), width, batch.rows, nullptr, p);
  return p;
}

// An output gradient of an initial state: the batch-ordered rows put back in the sequences' order.
template <typename T>
void UnorderState(const ExecutionContext& ctx, const char* slot, const SequenceBatch& batch, const T* ordered,
                  int64_t width) {
  Tensor* out = ctx.OutputOrNull(slot);
  if (!out || !ordered) return;
  const int64_t n = static_cast<int64_t>(batch.order.size());
  T* o = out->mutable_data<T>(DDim{n, width}, ctx.place());
  ScatterRows(ordered, width, batch.order, o);
}

template <typename T>
void LstmBackward(const ExecutionContext& ctx, bool projected) {
  Tensor* d_input = ctx.OutputOrNull("Input@GRAD");
  Tensor* d_weight = ctx.OutputOrNull("Weight@GRAD");
  Tensor* d_bias = ctx.OutputOrNull("Bias@GRAD");
  Tensor* d_proj_w = projected ? ctx.OutputOrNull("ProjWeight@GRAD") : nullptr;
  Tensor* d_h0 = ctx.OutputOrNull("H0@GRAD");
  Tensor* d_c0 = ctx.OutputOrNull("C0@GRAD");
  if (!d_input && !d_weight && !d_bias && !d_proj_w && !d_h0 && !d_c0) return;

  const Place& place = ctx.place();
  const Tensor& cell_out = ctx.Input("Cell");
  const SequenceBatch batch = BatchOf(ctx, "Cell");  // Cell carries Input's LoD
  const Tensor& weight = ctx.Input("Weight");
  const int64_t d = cell_out.dims()[1], t_rows = cell_out.dims()[0];
  const int64_t r_width = weight.dims()[0];  // D (lstm) or P (lstmp)
  const T* w = weight.data<T>();
  const T* bias = ctx.Input("Bias").data<T>();
  const Cell<T> cell = MakeCell<T>(ctx, projected, d, bias);
  CheckBatchInput(ctx, "BatchGate", t_rows, 4 * d);
  CheckBatchInput(ctx, "BatchCellPreAct", t_rows, d);
  if (projected) CheckBatchInput(ctx, "BatchHidden", t_rows, d);
  const T* gates = ctx.Input("BatchGate").data<T>();
  const T* s = ctx.Input("BatchCellPreAct").data<T>();

  Tensor cb_buf, dc_buf, dh_buf, dg_buf, pb_buf, dp_buf, h0_buf, c0_buf, dh0_buf, dc0_buf, prev_buf, tmp_buf;
  const T* h0 = OrderedState<T>(ctx, "H0", batch, r_width, &h0_buf);
  const T* c0 = OrderedState<T>(ctx, "C0", batch, d, &c0_buf);
  const int64_t n_seq = static_cast<int64_t>(batch.order.size());
  T* dh0 = h0 && d_h0 ? Zeroed<T>(&dh0_buf, n_seq, r_width, place) : nullptr;
  T* dc0 = c0 && d_c0 ? Zeroed<T>(&dc0_buf, n_seq, d, place) : nullptr;
  T* cb = Temp<T>(&cb_buf, t_rows, d, place);
  Gather<T>(cell_out.data<T>(), d, batch.rows, nullptr, cb);
  T* dc = BatchGrad<T>(ctx, "Cell@GRAD", batch, d, &dc_buf);
  T* dg = Temp<T>(&dg_buf, t_rows, 4 * d, place);
  T* tmp = Temp<T>(&tmp_buf, 1, d, place);
  T* db = nullptr;  // Bias@GRAD: the gate biases' after the walk, the peepholes' during it
  if (d_bias) {
    db = d_bias->mutable_data<T>(ctx.Input("Bias").dims(), place);
    std::fill(db, db + d_bias->numel(), T(0));
  }
  T* dpeep = db && cell.peep ? db + 4 * d : nullptr;

  // lstm: dh is Hidden@GRAD plus what later steps send back; lstmp: dr is Projection@GRAD plus that, and dh comes
  // from dr through the projection, step by step.
  T* dh = nullptr;
  T* pb = nullptr;
  T* dr = nullptr;
  const T* proj_w = nullptr;
  Activation proj_act = Activation::kIdentity;
  T proj_clip = T(0);
  if (projected) {
    const Tensor& proj = ctx.Input("Projection");
    FL_ENFORCE(proj.numel() == t_rows * r_width, "lstmp_grad: Projection '", ctx.InputName("Projection"), "' ",
               proj.dims(), " must be [", t_rows, ", ", r_width, "]");
    pb = Temp<T>(&pb_buf, t_rows, r_width, place);
    Gather<T>(proj.data<T>(), r_width, batch.rows, nullptr, pb);
    dr = BatchGrad<T>(ctx, "Projection@GRAD", batch, r_width, &dp_buf);
    dh = Temp<T>(&dh_buf, t_rows, d, place);
    proj_w = ctx.Input("ProjWeight").data<T>();
    proj_act = ProjActivation(ctx);
    proj_clip = static_cast<T>(ctx.Attr<float>("proj_clip"));
  } else {
    dh = BatchGrad<T>(ctx, "Hidden@GRAD", batch, d, &dh_buf);
    dr = dh;
  }
  const T* hb = projected ? ctx.Input("BatchHidden").data<T>() : nullptr;

  for (int64_t t = batch.steps() - 1; t >= 0; --t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const int64_t pb0 = t > 0 ? batch.step_begin[t - 1] : 0;
    if (projected) {  // dr of this step is complete: through proj_clip and the activation, then to h
      T* drt = dr + b0 * r_width;
      const T* rt = pb + b0 * r_width;
      const int64_t m = n * r_width;
      if (proj_clip > T(0))
        for (int64_t i = 0; i < m; ++i) drt[i] = rt[i] > -proj_clip && rt[i] < proj_clip ? drt[i] : T(0);
      ActivationGrad(proj_act, rt, drt, drt, m);
      blas::Gemm<T>(false, true, n, d, r_width, T(1), drt, proj_w, T(0), dh + b0 * d);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t r = b0 + k;
      const T* c_prev = t > 0 ? cb + (pb0 + k) * d : (c0 ? c0 + k * d : nullptr);
      T* dc_prev = t > 0 ? dc + (pb0 + k) * d : (dc0 ? dc0 + k * d : nullptr);
      cell.Backward(gates + r * 4 * d, c_prev, cb + r * d, s + r * d, dh + r * d, dc + r * d, dg + r * 4 * d, dc_prev,
                    dpeep, tmp);
    }
    const T* dgt = dg + b0 * 4 * d;
    if (t > 0)  // the previous step's recurrent input: dr_prev += dg W^T
      blas::Gemm<T>(false, true, n, r_width, 4 * d, T(1), dgt, w, T(1), dr + pb0 * r_width);
    else if (dh0) blas::Gemm<T>(false, true, n, r_width, 4 * d, T(1), dgt, w, T(0), dh0);
  }

  if (d_weight) {  // Weight@GRAD = sum over steps of r_prev^T dg: one GEMM over the rows with a previous input
    T* dw = d_weight->mutable_data<T>(weight.dims(), place);
    const int64_t first = h0 || batch.steps() == 0 ? 0 : batch.step_begin[1];  // without H0, step 0 adds nothing
    T* prev = Temp<T>(&prev_buf, std::max<int64_t>(t_rows - first, 1), r_width, place);
    if (first == 0 && h0) std::memcpy(prev, h0, sizeof(T) * batch.alive(0) * r_width);
    const Tensor& src = projected ? ctx.Input("Projection") : ctx.Input("Hidden");
    const T* srcp = src.data<T>();
    FL_ENFORCE(src.numel() == t_rows * r_width, ctx.Type(), ": ", projected ? "Projection" : "Hidden", " ", src.dims(),
               " must be [", t_rows, ", ", r_width, "]");
    for (int64_t t = 1; t < batch.steps(); ++t) {
      const int64_t b0 = batch.step_begin[t], pb0 = batch.step_begin[t - 1];
      for (int64_t k = 0; k < batch.alive(t); ++k)
        std::memcpy(prev + (b0 + k - first) * r_width, srcp + batch.rows[pb0 + k] * r_width, sizeof(T) * r_width);
    }
    blas::Gemm<T>(true, false, r_width, 4 * d, t_rows - first, T(1), prev, dg + first * 4 * d, T(0), dw);
  }
  if (d_proj_w) {  // ProjWeight@GRAD = BatchHidden^T dr
    T* dpw = d_proj_w->mutable_data<T>(ctx.Input("ProjWeight").dims(), place);
    blas::Gemm<T>(true, false, d, r_width, t_rows, T(1), hb, dr, T(0), dpw);
  }
  if (db) {  // the gate biases: column sums of dg
    for (int64_t r = 0; r < t_rows; ++r) {
      const T* row = dg + r * 4 * d;
      for (int64_t j = 0; j < 4 * d; ++j) db[j] += row[j];
    }
  }
  if (d_input) {
    Scatter(dg, 4 * d, batch.rows, d_input->mutable_data<T>(DDim{t_rows, 4 * d}, place));
    d_input->set_lod(cell_out.lod());
  }
  UnorderState(ctx, "H0@GRAD", batch, dh0, r_width);
  UnorderState(ctx, "C0@GRAD", batch, dc0, d);
}

const auto kLstmGrad = [](const ExecutionContext& ctx, auto tag) {
  LstmBackward<typename decltype(tag)::type>(ctx, false);
};
const auto kLstmpGrad = [](const ExecutionContext& ctx, auto tag) {
  LstmBackward<typename decltype(tag)::type>(ctx, true);
};

// ------------------------------------------------------------------ registration

void AddActivationAttrs(OpBuilder& op, bool projected) {
  op.Attr("gate_activation", "sigmoid", "activation of the input, forget and output gates")
      .OneOf(ActivationNames())
      .Attr("cell_activation", "tanh", "activation of the cell state on its way to the hidden state (act_h)")
      .OneOf(ActivationNames())
      .Attr("candidate_activation", "tanh", "activation of the candidate cell input (act_c)")
      .OneOf(ActivationNames());
  if (projected)
    op.Attr("proj_activation", "tanh",
            "activation of the projection; as in Fluid 1.8's kernels, any value but identity applies "
            "cell_activation")
        .OneOf(ActivationNames());
}

const char* kInputDoc =
    "LoDTensor [T, 4 * D] (one LoD level) of projected gate inputs, each row [candidate | input "
    "gate | forget gate | output gate]";
const char* kBiasDoc =
    "[1, 4 * D] gate biases (candidate, input, forget, output), or with use_peepholes [1, 7 * D]: "
    "then the peephole weights w_ic, w_fc, w_oc";

}  // namespace

FL_REGISTER_OP(lstm, op) {
  op.Doc(
        "LSTM over the sequences of a LoD batch (fluid.layers.dynamic_lstm): Hidden and Cell [T, D] with Input's "
        "LoD. The batch is reordered by length so each step is one GEMM over the sequences still alive.")
      .Input("Input", kInputDoc)
      .DispensableInput("H0", "initial hidden state [N, D], one row per sequence (needs C0)")
      .DispensableInput("C0", "initial cell state [N, D], one row per sequence")
      .Input("Weight", "recurrent weights [D, 4 * D]: W_c, W_i, W_f, W_o")
      .Input("Bias", kBiasDoc)
      .Output("Hidden", "hidden states [T, D], Input's LoD")
      .Output("Cell", "cell states [T, D], Input's LoD")
      .Output("BatchGate", "the activated gates [T, 4 * D] in batch order (LoD: the step offsets), for the gradient")
      .Output("BatchCellPreAct",
              "cell_activation(Cell) [T, D] in batch order (LoD: the step offsets), for the "
              "gradient")
      .Attr<bool>("use_peepholes", true, "peephole connections: Bias holds w_ic, w_fc, w_oc after the gate biases")
      .Attr<bool>("is_reverse", false, "walk each sequence from its last row to its first")
      .KernelDTypeFrom("Input")
      .SetInferShape(LstmInferShape)
      .CPUKernel<float, double>(kLstm);
  AddActivationAttrs(op, false);
  op.GradOp({"Input", "H0", "C0", "Weight", "Bias", "Hidden", "Cell", "BatchGate", "BatchCellPreAct", "Hidden@GRAD",
             "Cell@GRAD"})
      .Doc(
          "Gradient of lstm: the steps walked backwards in batch order, one GEMM per step for the hidden-state "
          "gradient, one GEMM over all rows for Weight@GRAD. Hidden@GRAD or Cell@GRAD may be missing (zeros).")
      .Optional({"Hidden@GRAD", "Cell@GRAD"})
      .CPUKernel<float, double>(kLstmGrad);
}

FL_REGISTER_OP(lstmp, op) {
  op.Doc(
        "LSTM with a recurrent projection over the sequences of a LoD batch (fluid.layers.dynamic_lstmp): the "
        "recurrence feeds r_t = proj_activation(h_t ProjWeight) back; Projection [T, P] and Cell [T, D] with "
        "Input's LoD.")
      .Input("Input", kInputDoc)
      .DispensableInput("H0", "initial projection r_0 [N, P], one row per sequence (needs C0)")
      .DispensableInput("C0", "initial cell state [N, D], one row per sequence")
      .Input("Weight", "recurrent weights [P, 4 * D]: W_c, W_i, W_f, W_o applied to r_{t-1}")
      .Input("ProjWeight", "projection weights [D, P]")
      .Input("Bias", kBiasDoc)
      .Output("Projection", "projections r [T, P], Input's LoD")
      .Output("Cell", "cell states [T, D], Input's LoD")
      .Output("BatchGate", "the activated gates [T, 4 * D] in batch order (LoD: the step offsets), for the gradient")
      .Output("BatchCellPreAct",
              "cell_activation(Cell) [T, D] in batch order (LoD: the step offsets), for the "
              "gradient")
      .Output("BatchHidden", "hidden states h [T, D] in batch order (LoD: the step offsets), for the gradient")
      .Attr<bool>("use_peepholes", true, "peephole connections: Bias holds w_ic, w_fc, w_oc after the gate biases")
      .Attr<bool>("is_reverse", false, "walk each sequence from its last row to its first")
      .Attr<float>("cell_clip", 0.0f, "> 0: the cell state is clipped to [-cell_clip, cell_clip]")
      .Attr<float>("proj_clip", 0.0f, "> 0: the projection is clipped to [-proj_clip, proj_clip]")
      .KernelDTypeFrom("Input")
      .SetInferShape(LstmpInferShape)
      .CPUKernel<float, double>(kLstmp);
  AddActivationAttrs(op, true);
  op.GradOp({"Weight", "ProjWeight", "Bias", "Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden", "H0",
             "C0", "Projection@GRAD", "Cell@GRAD"})
      .Doc(
          "Gradient of lstmp: the steps walked backwards in batch order; Weight@GRAD and ProjWeight@GRAD are one "
          "GEMM each over all rows. Projection@GRAD or Cell@GRAD may be missing (zeros).")
      .Optional({"Projection@GRAD", "Cell@GRAD"})
      .ShapeLike("Input", "BatchGate")
      .CPUKernel<float, double>(kLstmpGrad);
}

}  // namespace fl
