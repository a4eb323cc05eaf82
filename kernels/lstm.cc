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

// The cell on hidden units [a, a + len) of one row, forward and backward, for any activations: a step's units can
// go to different threads (each owns its units of every gate, so nothing is shared). A row's data (4D gates and a
// few D-wide vectors) stays in L1 across the short passes below; each pass is one vectorised loop (activation.h).
// Row pointers are the rows' starts; the gates of a row are [candidate | input | forget | output], D each.
template <typename T>
struct Cell {
  int64_t d = 0;
  Activation gate = Activation::kSigmoid, cell = Activation::kTanh, cand = Activation::kTanh;
  const T* peep = nullptr;  // [w_ic | w_fc | w_oc], 3D, or null without peepholes
  T clip = T(0);            // > 0: c is clipped to [-clip, clip]

  // g: the row's gate pre-activations, replaced by the activated gates; c_prev null: zeros.
  void Forward(T* g, const T* c_prev, T* c, T* s, T* h, int64_t a, int64_t len) const {
    ForwardUnits(g + a, g + d + a, g + 2 * d + a, g + 3 * d + a, c_prev ? c_prev + a : nullptr, c + a, s + a, h + a,
                 peep ? peep + a : nullptr, len);
  }

  // From the activated gates g, c_prev (null: zeros), c, s = act_h(c) and dh: the gate pre-activation gradients
  // dg. dc holds the gradient reaching c from later steps and Cell@GRAD on entry and the total gradient of the
  // pre-clip cell on return; dc_prev (null: not wanted) is set to the gradient reaching c_prev through this step;
  // the gate-bias gradients (db, 4D) and, with peepholes, the peephole gradients (db + 4D, 3D) are added to.
  // tmp: scratch of len.
  void Backward(const T* g, const T* c_prev, const T* c, const T* s, const T* dh, T* dc, T* dg, T* dc_prev, T* db,
                T* tmp, int64_t a, int64_t len) const {
    BackwardUnits(g + a, g + d + a, g + 2 * d + a, g + 3 * d + a, c_prev ? c_prev + a : nullptr, c + a, s + a, dh + a,
                  dc + a, dg + a, dg + d + a, dg + 2 * d + a, dg + 3 * d + a, dc_prev ? dc_prev + a : nullptr,
                  peep ? peep + a : nullptr, db + a, peep ? db + 4 * d + a : nullptr, tmp, len);
  }

 private:
  // peep: the unit's w_ic, with w_fc and w_oc d and 2d further.
  void ForwardUnits(T* __restrict gc, T* __restrict gi, T* __restrict gf, T* __restrict go, const T* __restrict cp,
                    T* __restrict c, T* __restrict s, T* __restrict h, const T* __restrict pw, int64_t n) const {
    if (pw && cp)
      for (int64_t j = 0; j < n; ++j) {
        gi[j] += cp[j] * pw[j];
        gf[j] += cp[j] * pw[d + j];
      }
    Activate(cand, gc, gc, n);
    Activate(gate, gi, gi, n);
    Activate(gate, gf, gf, n);
    if (cp)
      for (int64_t j = 0; j < n; ++j) c[j] = gc[j] * gi[j] + cp[j] * gf[j];
    else
      for (int64_t j = 0; j < n; ++j) c[j] = gc[j] * gi[j];
    if (clip > T(0))
      for (int64_t j = 0; j < n; ++j) c[j] = c[j] < -clip ? -clip : (c[j] > clip ? clip : c[j]);
    if (pw)
      for (int64_t j = 0; j < n; ++j) go[j] += c[j] * pw[2 * d + j];
    Activate(gate, go, go, n);
    Activate(cell, c, s, n);
    for (int64_t j = 0; j < n; ++j) h[j] = go[j] * s[j];
  }

  void BackwardUnits(const T* __restrict gc, const T* __restrict gi, const T* __restrict gf, const T* __restrict go,
                     const T* __restrict cp, const T* __restrict c, const T* __restrict s, const T* __restrict dh,
                     T* __restrict dc, T* __restrict dgc, T* __restrict dgi, T* __restrict dgf, T* __restrict dgo,
                     T* __restrict dcp, const T* __restrict pw, T* __restrict db, T* __restrict dpw, T* __restrict tmp,
                     int64_t n) const {
    for (int64_t j = 0; j < n; ++j) {
      dgo[j] = dh[j] * s[j];
      tmp[j] = dh[j] * go[j];
    }
    ActivationGrad(gate, go, dgo, dgo, n);
    ActivationGrad(cell, s, tmp, tmp, n);
    for (int64_t j = 0; j < n; ++j) {
      T total = dc[j] + tmp[j] + (pw ? dgo[j] * pw[2 * d + j] : T(0));
      if (clip > T(0) && (c[j] >= clip || c[j] <= -clip)) total = T(0);  // clipped: c does not move
      dc[j] = total;
      dgc[j] = total * gi[j];
      dgi[j] = total * gc[j];
      dgf[j] = cp ? total * cp[j] : T(0);
    }
    ActivationGrad(cand, gc, dgc, dgc, n);
    ActivationGrad(gate, gi, dgi, dgi, n);
    ActivationGrad(gate, gf, dgf, dgf, n);
    if (dcp) {
      if (pw)
        for (int64_t j = 0; j < n; ++j) dcp[j] = dc[j] * gf[j] + dgi[j] * pw[j] + dgf[j] * pw[d + j];
      else
        for (int64_t j = 0; j < n; ++j) dcp[j] = dc[j] * gf[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      db[j] += dgc[j];
      db[d + j] += dgi[j];
      db[2 * d + j] += dgf[j];
      db[3 * d + j] += dgo[j];
    }
    if (dpw) {
      if (cp)
        for (int64_t j = 0; j < n; ++j) {
          dpw[j] += dgi[j] * cp[j];
          dpw[d + j] += dgf[j] * cp[j];
        }
      for (int64_t j = 0; j < n; ++j) dpw[2 * d + j] += dgo[j] * c[j];
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

// A step goes to the thread pool split by hidden units when its recurrent GEMM is large enough to be split
// anyway (blas.h's threshold), or, without one, when its cell has this many units (a few activations each).
constexpr int64_t kCellGrain = 2048;

// Parts of a step: 1, or one per thread, each owning a block of units (multiples of 16 where D allows).
int StepParts(int threads, int64_t gemm_flops, int64_t cell_units, int64_t d) {
  if (threads < 2 || d < 32) return 1;
  const bool big = gemm_flops > 0 ? gemm_flops >= 2 * blas::kMinFlopsPerPart : cell_units >= 2 * kCellGrain;
  return big ? static_cast<int>(std::min<int64_t>(threads, d / 16)) : 1;
}

// fn(p, a, len) for each part p of a step: units [a, a + len), in parallel when there are several parts.
template <typename F>
void ForUnits(int parts, int64_t d, F fn) {
  auto unit = [&](int64_t p) { return p == parts ? d : (d * p / parts + 8) / 16 * 16; };
  if (parts == 1) {
    fn(0, int64_t{0}, d);
    return;
  }
  ParallelFor(parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) fn(static_cast<int>(p), unit(p), unit(p + 1) - unit(p));
  });
}

// A row of `width` copied.
template <typename T>
void CopyRow(const T* src, int64_t width, T* dst) {
  std::memcpy(dst, src, sizeof(T) * width);
}

// An initial state [N, width] checked against the batch; null when the slot is absent.
const Tensor* InitialState(const ExecutionContext& ctx, const char* slot, const SequenceBatch& batch, int64_t width) {
  const Tensor* s = ctx.InputOrNull(slot);
  if (!s) return nullptr;
  const int64_t n = static_cast<int64_t>(batch.order.size());
  FL_ENFORCE(s->rank() == 2 && s->dims()[0] == n && s->dims()[1] == width, ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' ", s->dims(), " must be [", n, ", ", width, "]: one row per sequence of ",
             "Input's LoD (", n, " sequences)");
  return s;
}

// An initial state reordered to the batch's sequence order (null when the slot is absent).
template <typename T>
const T* OrderedState(const ExecutionContext& ctx, const char* slot, const SequenceBatch& batch, int64_t width,
                      Tensor* buf) {
  const Tensor* s = InitialState(ctx, slot, batch, width);
  if (!s) return nullptr;
  T* o = buf->mutable_data<T>(DDim{static_cast<int64_t>(batch.order.size()), width}, ctx.place());
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

// The projection activation then proj_clip, in place over n values (lstmp forward).
template <typename T>
void ProjectionActivate(Activation act, T clip, T* r, int64_t n) {
  Activate(act, r, r, n);
  if (clip > T(0))
    for (int64_t i = 0; i < n; ++i) r[i] = r[i] < -clip ? -clip : (r[i] > clip ? clip : r[i]);
}

// ------------------------------------------------------------------ forward

// Both ops. projected: lstmp (ProjWeight, Projection, BatchHidden); else lstm (Hidden). The previous step's
// recurrent input and cell live in two rolling [N, width] buffers (a step reads one and writes the other); each
// row's results go straight to its place in the input-ordered outputs.
template <typename T>
void LstmForward(const ExecutionContext& ctx, bool projected) {
  const Tensor& input = ctx.Input("Input");
  const int64_t d = input.dims()[1] / 4;
  const int64_t r_width = projected ? ctx.Input("ProjWeight").dims()[1] : d;  // the recurrent input's width
  const SequenceBatch batch = BatchOf(ctx, "Input");
  const int64_t n_seq = static_cast<int64_t>(batch.order.size());
  const Place& place = ctx.place();
  const T* x = input.data<T>();
  const T* bias = ctx.Input("Bias").data<T>();
  const T* w = ctx.Input("Weight").data<T>();
  const Cell<T> cell = MakeCell<T>(ctx, projected, d, bias);
  const int threads = ThreadPool::Instance().Size();

  Tensor h0_buf, c0_buf, rec_buf, cell_buf;
  const T* h0 = OrderedState<T>(ctx, "H0", batch, r_width, &h0_buf);
  const T* c0 = OrderedState<T>(ctx, "C0", batch, d, &c0_buf);
  T* gates = ctx.Alloc<T>("BatchGate");
  T* s = ctx.Alloc<T>("BatchCellPreAct");
  T* cell_out = ctx.Alloc<T>("Cell");
  T* out = ctx.Alloc<T>(projected ? "Projection" : "Hidden");
  T* batch_hidden = projected ? ctx.Alloc<T>("BatchHidden") : nullptr;
  T* rec = Temp<T>(&rec_buf, 2 * n_seq, r_width, place);  // rolling recurrent inputs (lstm: h, lstmp: r)
  T* cells = Temp<T>(&cell_buf, 2 * n_seq, d, place);     // rolling cells
  const T* proj_w = projected ? ctx.Input("ProjWeight").data<T>() : nullptr;
  const Activation proj_act = projected ? ProjActivation(ctx) : Activation::kIdentity;
  const T proj_clip = projected ? static_cast<T>(ctx.Attr<float>("proj_clip")) : T(0);

  for (int64_t t = 0; t < batch.steps(); ++t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const int64_t* rows = batch.rows.data() + b0;
    // The sequences alive now are the first n of the previous step, at the same positions.
    const T* rec_prev = t > 0 ? rec + ((t - 1) & 1) * n_seq * r_width : h0;
    const T* c_prev = t > 0 ? cells + ((t - 1) & 1) * n_seq * d : c0;
    T* rec_cur = rec + (t & 1) * n_seq * r_width;
    T* c_cur = cells + (t & 1) * n_seq * d;
    T* g = gates + b0 * 4 * d;
    // One parallel region per step: each part owns a block of hidden units and computes, for every row, those
    // units' x + b, their gate columns of the recurrent GEMM and their cell; the step ends when all parts have.
    const int parts = StepParts(threads, rec_prev ? 2 * n * 4 * d * r_width : 0, n * d, d);
    ForUnits(parts, d, [&](int, int64_t a, int64_t len) {
      for (int64_t k = 0; k < n; ++k) {  // x + b
        const T* xr = x + rows[k] * 4 * d;
        T* gr = g + k * 4 * d;
        for (int64_t q = 0; q < 4; ++q)
          for (int64_t j = q * d + a; j < q * d + a + len; ++j) gr[j] = xr[j] + bias[j];
      }
      if (rec_prev) {
        if (parts == 1) blas::Gemm<T>(false, false, n, 4 * d, r_width, T(1), rec_prev, w, T(1), g);
        else
          for (int64_t q = 0; q < 4; ++q)  // this part's columns of each gate
            blas::SerialGemm<T>(false, false, n, len, r_width, T(1), rec_prev, r_width, w + q * d + a, 4 * d, T(1),
                                g + q * d + a, 4 * d);
      }
      for (int64_t k = 0; k < n; ++k) {
        const int64_t r = b0 + k;
        T* h = projected ? batch_hidden + r * d : rec_cur + k * d;
        cell.Forward(g + k * 4 * d, c_prev ? c_prev + k * d : nullptr, c_cur + k * d, s + r * d, h, a, len);
        CopyRow(c_cur + k * d + a, len, cell_out + rows[k] * d + a);
        if (!projected) CopyRow(h + a, len, out + rows[k] * d + a);
      }
    });
    if (projected) {
      blas::Gemm<T>(false, false, n, r_width, d, T(1), batch_hidden + b0 * d, proj_w, T(0), rec_cur);
      ProjectionActivate(proj_act, proj_clip, rec_cur, n * r_width);
      for (int64_t k = 0; k < n; ++k) CopyRow(rec_cur + k * r_width, r_width, out + rows[k] * r_width);
    }
  }
  const LoD steps = batch.StepLoD();
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

// An input-ordered [rows, width] input (a forward output or an output gradient), null when absent and allowed to be.
template <typename T>
const T* RowsOf(const ExecutionContext& ctx, const char* slot, int64_t rows, int64_t width, bool optional) {
  const Tensor* v = optional ? ctx.InputOrNull(slot) : &ctx.Input(slot);
  if (!v) return nullptr;
  FL_ENFORCE(v->numel() == rows * width, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' ", v->dims(),
             " must be [", rows, ", ", width, "]");
  return v->data<T>();
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

// prev[i] = the recurrent input that row i's step multiplied by Weight: the previous row of its sequence in the
// walking order (src: Hidden or Projection), or H0's row for the sequence's first step (zeros without H0).
template <typename T>
void PreviousRows(const std::vector<size_t>& offsets, bool reverse, const T* src, const T* h0, int64_t width, T* prev) {
  ForEachSequence(offsets, [&](int64_t s, int64_t begin, int64_t end) {
    if (begin == end) return;
    const int64_t first = reverse ? end - 1 : begin;  // the row of the sequence's first step
    if (h0) CopyRow(h0 + s * width, width, prev + first * width);
    else std::fill(prev + first * width, prev + (first + 1) * width, T(0));
    const int64_t later = end - begin - 1;  // rows with a previous step, contiguous
    if (later > 0)
      std::memcpy(prev + (reverse ? begin : begin + 1) * width, src + (reverse ? begin + 1 : begin) * width,
                  sizeof(T) * later * width);
  });
}

// The walk runs the steps backwards. Per step: the gradient reaching each row's h (lstm: Hidden@GRAD plus what
// the next step sends back through Weight; lstmp: from dr through ProjWeight) and c (Cell@GRAD plus the next
// step's), the cell backwards into a rolling block of gate gradients, one GEMM sending dg W^T to the previous
// step, and each row's dg copied to its input-ordered place (Input@GRAD's buffer). Bias and peephole gradients
// add up per thread part; Weight@GRAD and ProjWeight@GRAD are one GEMM each after the walk.
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
  const int64_t n_seq = static_cast<int64_t>(batch.order.size());
  const int64_t r_width = weight.dims()[0];  // D (lstm) or P (lstmp)
  const T* w = weight.data<T>();
  const Tensor& bias_t = ctx.Input("Bias");
  const Cell<T> cell = MakeCell<T>(ctx, projected, d, bias_t.data<T>());
  const int threads = ThreadPool::Instance().Size();
  CheckBatchInput(ctx, "BatchGate", t_rows, 4 * d);
  CheckBatchInput(ctx, "BatchCellPreAct", t_rows, d);
  if (projected) CheckBatchInput(ctx, "BatchHidden", t_rows, d);
  const T* gates = ctx.Input("BatchGate").data<T>();
  const T* s = ctx.Input("BatchCellPreAct").data<T>();
  const T* cells = cell_out.data<T>();
  const T* d_cell_in = RowsOf<T>(ctx, "Cell@GRAD", t_rows, d, true);
  const T* rec_out = RowsOf<T>(ctx, projected ? "Projection" : "Hidden", t_rows, r_width, false);
  const T* d_out = RowsOf<T>(ctx, projected ? "Projection@GRAD" : "Hidden@GRAD", t_rows, r_width, true);

  Tensor h0_buf, c0_buf, dh0_buf, dc0_buf, dg_full_buf, dg_buf, dh_buf, dc_buf, dr_buf, acc_buf, tmp_buf, prev_buf;
  const T* h0 = OrderedState<T>(ctx, "H0", batch, r_width, &h0_buf);
  const T* c0 = OrderedState<T>(ctx, "C0", batch, d, &c0_buf);
  T* dh0 = h0 && d_h0 ? Zeroed<T>(&dh0_buf, n_seq, r_width, place) : nullptr;
  T* dc0 = c0 && d_c0 ? Zeroed<T>(&dc0_buf, n_seq, d, place) : nullptr;
  // Every row's gate gradient in input order: Input@GRAD itself when it is wanted.
  T* dg_all =
      d_input ? d_input->mutable_data<T>(DDim{t_rows, 4 * d}, place) : Temp<T>(&dg_full_buf, t_rows, 4 * d, place);
  T* dgs = Temp<T>(&dg_buf, 2 * n_seq, 4 * d, place);  // rolling dg, batch order (the GEMMs' operand)
  T* dh = Temp<T>(&dh_buf, n_seq, d, place);           // this step's dh: the next step's part, then Out@GRAD's
  T* dcs = Temp<T>(&dc_buf, 2 * n_seq, d, place);      // rolling dc: this step's, and the previous step's
  T* tmp = Temp<T>(&tmp_buf, threads, d, place);       // the cell's scratch, one row per part
  T* acc = Zeroed<T>(&acc_buf, 1, 7 * d, place);       // gate-bias gradients, then the peepholes'
  // lstmp: dr of every row in batch order (ProjWeight@GRAD pairs it with BatchHidden), Projection@GRAD to begin.
  T* dr = nullptr;
  const T* proj_w = nullptr;
  const T* hb = nullptr;
  Activation proj_act = Activation::kIdentity;
  T proj_clip = T(0);
  if (projected) {
    dr = Temp<T>(&dr_buf, t_rows, r_width, place);
    for (int64_t r = 0; r < t_rows; ++r) {
      T* o = dr + r * r_width;
      if (d_out) CopyRow(d_out + batch.rows[r] * r_width, r_width, o);
      else std::fill(o, o + r_width, T(0));
    }
    proj_w = ctx.Input("ProjWeight").data<T>();
    hb = ctx.Input("BatchHidden").data<T>();
    proj_act = ProjActivation(ctx);
    proj_clip = static_cast<T>(ctx.Attr<float>("proj_clip"));
  }

  int64_t n_next = 0;  // rows of the step after this one: the first n_next rows hear from it
  for (int64_t t = batch.steps() - 1; t >= 0; --t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const int64_t* rows = batch.rows.data() + b0;
    const int64_t* prev_rows = t > 0 ? batch.rows.data() + batch.step_begin[t - 1] : nullptr;
    T* dc = dcs + (t & 1) * n_seq * d;
    T* dc_prev = t > 0 ? dcs + ((t - 1) & 1) * n_seq * d : dc0;
    T* dg = dgs + (t & 1) * n_seq * 4 * d;
    const T* dg_next = dgs + ((t + 1) & 1) * n_seq * 4 * d;  // the next step's, read while this one is written
    if (projected) {  // dr of this step is complete: through proj_clip and the activation, then to h
      T* drt = dr + b0 * r_width;
      for (int64_t k = 0; k < n; ++k) {
        T* row = drt + k * r_width;
        const T* rt = rec_out + rows[k] * r_width;
        if (proj_clip > T(0))
          for (int64_t j = 0; j < r_width; ++j) row[j] = rt[j] > -proj_clip && rt[j] < proj_clip ? row[j] : T(0);
        ActivationGrad(proj_act, rt, row, row, r_width);
      }
      blas::Gemm<T>(false, true, n, d, r_width, T(1), drt, proj_w, T(0), dh);
    }
    // One parallel region per step, split by hidden units: lstm's part of dh from the next step (its units'
    // columns of dg_next W^T), then the cell backwards over every row for those units.
    const bool rec_gemm = !projected && n_next > 0;
    const int parts = StepParts(threads, rec_gemm ? 2 * n_next * 4 * d * d : 0, n * d, d);
    ForUnits(parts, d, [&](int part, int64_t a, int64_t len) {
      if (rec_gemm) {
        if (parts == 1) blas::Gemm<T>(false, true, n_next, d, 4 * d, T(1), dg_next, w, T(0), dh);
        else
          blas::SerialGemm<T>(false, true, n_next, len, 4 * d, T(1), dg_next, 4 * d, w + a * 4 * d, 4 * d, T(0), dh + a,
                              d);
      }
      for (int64_t k = 0; k < n; ++k) {
        const int64_t r = b0 + k, row = rows[k];
        T* dhk = dh + k * d + a;
        T* dck = dc + k * d + a;
        if (!projected) {  // dh = (the next step's part) + Hidden@GRAD
          if (k >= n_next) std::fill(dhk, dhk + len, T(0));
          if (d_out)
            for (int64_t j = 0; j < len; ++j) dhk[j] += d_out[row * d + a + j];
        }
        if (k >= n_next) std::fill(dck, dck + len, T(0));  // dc = (the next step's part) + Cell@GRAD
        if (d_cell_in)
          for (int64_t j = 0; j < len; ++j) dck[j] += d_cell_in[row * d + a + j];
        const T* cp = t > 0 ? cells + prev_rows[k] * d : (c0 ? c0 + k * d : nullptr);
        T* dgk = dg + k * 4 * d;
        cell.Backward(gates + r * 4 * d, cp, cells + row * d, s + r * d, dh + k * d, dc + k * d, dgk,
                      dc_prev ? dc_prev + k * d : nullptr, acc, tmp + part * d, a, len);
        for (int64_t q = 0; q < 4; ++q) CopyRow(dgk + q * d + a, len, dg_all + row * 4 * d + q * d + a);
      }
    });
    if (projected && t > 0)  // the previous step's dr += dg W^T
      blas::Gemm<T>(false, true, n, r_width, 4 * d, T(1), dg, w, T(1), dr + batch.step_begin[t - 1] * r_width);
    n_next = n;
  }
  if (dh0 && batch.steps() > 0)  // step 0's dg through Weight: the gradient of the initial recurrent input
    blas::Gemm<T>(false, true, batch.alive(0), r_width, 4 * d, T(1), dgs, w, T(0), dh0);

  if (d_weight) {  // Weight@GRAD = prev^T dg over every row: one GEMM
    const Tensor* h0_in = InitialState(ctx, "H0", batch, r_width);
    T* prev = Temp<T>(&prev_buf, t_rows, r_width, place);
    PreviousRows(SequenceOffsets(ctx, "Cell"), ctx.Attr<bool>("is_reverse"), rec_out,
                 h0_in ? h0_in->data<T>() : nullptr, r_width, prev);
    blas::Gemm<T>(true, false, r_width, 4 * d, t_rows, T(1), prev, dg_all, T(0),
                  d_weight->mutable_data<T>(weight.dims(), place));
  }
  if (d_proj_w)  // ProjWeight@GRAD = BatchHidden^T dr
    blas::Gemm<T>(true, false, d, r_width, t_rows, T(1), hb, dr, T(0),
                  d_proj_w->mutable_data<T>(ctx.Input("ProjWeight").dims(), place));
  if (d_bias) {
    T* db = d_bias->mutable_data<T>(bias_t.dims(), place);
    const int64_t width = cell.peep ? 7 * d : 4 * d;
    std::copy(acc, acc + width, db);
  }
  if (d_input) d_input->set_lod(cell_out.lod());
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
      // Fluid's lstm_grad lists Input; the kernel needs only its LoD and shape, which Cell and BatchGate carry, so
      // programs built here do not keep the [T, 4 * D] input alive until the gradient runs.
      .AcceptsUnread({"Input"})
      .ShapeLike("Input", "BatchGate")
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
