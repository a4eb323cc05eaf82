// lstm and lstmp (fluid.layers.dynamic_lstm / dynamic_lstmp) and their grads on the GPU, as the CPU kernel
// (kernels/lstm.cc): the batch is reordered by length on the host (helpers/sequence_batch.h; the LoD is host data)
// and the row maps go to the device once per call (one pinned, asynchronous copy). Per step: one GEMM of the alive
// rows' previous recurrent inputs with Weight, then one kernel for the cell of every (row, unit) that adds x + b,
// applies the activations, peepholes and cell_clip and writes the batch-ordered BatchGate / BatchCellPreAct and the
// input-ordered Hidden (lstmp: BatchHidden) / Cell; lstmp adds one GEMM into the projection and one kernel for its
// activation and clip. The gradient walks the steps backwards with one GEMM (dg W^T; lstmp: dr ProjWeight^T and
// dg W^T) and one cell kernel per step; Weight@GRAD and ProjWeight@GRAD are one GEMM each over all rows, and the
// bias / peephole gradients column sums over all rows afterwards (partial sums over row parts added in order). No
// host waits inside either walk.
#include <algorithm>
#include <vector>

#include "../helpers/activation.h"
#include "../helpers/lod.h"
#include "../helpers/sequence_batch.h"
#include "nn_common.cuh"

namespace fl {
namespace {

template <typename T>
__device__ inline T Act(int act, T x) {
  switch (act) {
    case int(Activation::kSigmoid): return T(1) / (T(1) + exp(-x));
    case int(Activation::kTanh): return tanh(x);
    case int(Activation::kRelu): return x > T(0) ? x : T(0);
    default: return x;
  }
}

// dy * act'(x), written with y = act(x) (activation.h's ActivationGrad).
template <typename T>
__device__ inline T ActGrad(int act, T y, T dy) {
  switch (act) {
    case int(Activation::kSigmoid): return dy * y * (T(1) - y);
    case int(Activation::kTanh): return dy * (T(1) - y * y);
    case int(Activation::kRelu): return y > T(0) ? dy : T(0);
    default: return dy;
  }
}

struct Acts {
  int gate, cell, cand;
};

Acts ActsOf(const ExecutionContext& ctx) {
  return {int(ActivationByName(ctx.Attr<std::string>("gate_activation"))),
          int(ActivationByName(ctx.Attr<std::string>("cell_activation"))),
          int(ActivationByName(ctx.Attr<std::string>("candidate_activation")))};
}

SequenceBatch BatchOf(const ExecutionContext& ctx, const char* slot) {
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, slot);
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.lod().size() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " has ",
             t.lod().size(), " LoD levels ", t.LoDString(), "; ", ctx.Type(),
             " runs over one level of sequences (as Fluid's sequence2batch): drop the outer levels with lod_reset");
  return MakeSequenceBatch(offsets, ctx.Attr<bool>("is_reverse"));
}

const Tensor* InitialState(const ExecutionContext& ctx, const char* slot, int64_t n, int64_t width) {
  const Tensor* s = ctx.InputOrNull(slot);
  if (!s) return nullptr;
  FL_ENFORCE(s->rank() == 2 && s->dims()[0] == n && s->dims()[1] == width, ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' ", s->dims(), " must be [", n, ", ", width, "]: one row per sequence of ",
             "Input's LoD (", n, " sequences)");
  return s;
}

// int64 host vectors on the device, in one scratch block.
struct DeviceInts {
  std::shared_ptr<Allocation> holder;
  std::vector<const int64_t*> parts;
};
DeviceInts ToDeviceInts(const ExecutionContext& ctx, const std::vector<const std::vector<int64_t>*>& vs) {
  std::vector<int64_t> all;
  std::vector<size_t> at;
  for (const auto* v : vs) at.push_back(all.size()), all.insert(all.end(), v->begin(), v->end());
  DeviceInts d;
  d.holder = cuda::nn::ToDevice(ctx, all.data(), all.size());
  for (size_t a : at) d.parts.push_back(static_cast<const int64_t*>(d.holder->ptr()) + a);
  return d;
}

template <typename T>
T* ScratchOf(const ExecutionContext& ctx, int64_t n, std::vector<std::shared_ptr<Allocation>>* keep) {
  keep->push_back(cuda::Scratch(ctx.place(), size_t(std::max<int64_t>(1, n)) * sizeof(T)));
  return static_cast<T*>(keep->back()->ptr());
}

// out[k] = src[idx[k]] (gather) or out[idx[k]] = src[k] (scatter), rows of `width`.
template <typename T>
__global__ void GatherRows(int64_t total, const T* src, const int64_t* idx, int64_t width, bool scatter, T* out) {
  FL_CUDA_LOOP(i, total) {
    const int64_t k = i / width, j = i % width;
    if (scatter) out[idx[k] * width + j] = src[i];
    else out[i] = src[idx[k] * width + j];
  }
}

template <typename T>
__global__ void StepForward(int64_t total, const T* x, const T* bias, const int64_t* rows, T* g, bool has_rec,
                            const T* c_prev, const T* peep, Acts acts, T clip, int64_t d, T* c_cur, T* s_step, T* h_cur,
                            T* cell_out, T* hidden_out) {
  FL_CUDA_LOOP(i, total) {
    const int64_t k = i / d, j = i % d, row = rows[k];
    const T* xr = x + row * 4 * d;
    T* gr = g + k * 4 * d;
    T gc = xr[j] + bias[j], gi = xr[d + j] + bias[d + j], gf = xr[2 * d + j] + bias[2 * d + j],
      go = xr[3 * d + j] + bias[3 * d + j];
    if (has_rec) gc += gr[j], gi += gr[d + j], gf += gr[2 * d + j], go += gr[3 * d + j];
    const T cp = c_prev ? c_prev[i] : T(0);
    if (peep && c_prev) gi += cp * peep[j], gf += cp * peep[d + j];
    gc = Act(acts.cand, gc);
    gi = Act(acts.gate, gi);
    gf = Act(acts.gate, gf);
    T c = c_prev ? gc * gi + cp * gf : gc * gi;
    if (clip > T(0)) c = c < -clip ? -clip : (c > clip ? clip : c);
    if (peep) go += c * peep[2 * d + j];
    go = Act(acts.gate, go);
    const T s = Act(acts.cell, c), h = go * s;
    gr[j] = gc;
    gr[d + j] = gi;
    gr[2 * d + j] = gf;
    gr[3 * d + j] = go;
    c_cur[i] = c;
    s_step[i] = s;
    h_cur[i] = h;
    cell_out[row * d + j] = c;
    if (hidden_out) hidden_out[row * d + j] = h;
  }
}

// lstmp: the step's projections r = proj_act(h ProjWeight) (then proj_clip), in place, and into Projection's rows.
template <typename T>
__global__ void ProjectStep(int64_t total, const int64_t* rows, int act, T clip, int64_t p, T* r, T* out) {
  FL_CUDA_LOOP(i, total) {
    const int64_t k = i / p, j = i % p;
    T v = Act(act, r[i]);
    if (clip > T(0)) v = v < -clip ? -clip : (v > clip ? clip : v);
    r[i] = v;
    out[rows[k] * p + j] = v;
  }
}

// lstmp's projection activation: Fluid 1.8's kernels apply cell_activation whenever proj_activation is not identity
// (kernels/lstm.cc's ProjActivation).
int ProjAct(const ExecutionContext& ctx) {
  return ActivationByName(ctx.Attr<std::string>("proj_activation")) == Activation::kIdentity
             ? int(Activation::kIdentity)
             : int(ActivationByName(ctx.Attr<std::string>("cell_activation")));
}

// projected: lstmp (ProjWeight, Projection, BatchHidden, cell_clip / proj_clip); else lstm (Hidden).
template <typename T>
void Forward(const ExecutionContext& ctx, bool projected) {
  const Tensor& input = ctx.Input("Input");
  const int64_t d = input.dims()[1] / 4;
  const int64_t rw = projected ? ctx.Input("ProjWeight").dims()[1] : d;  // the recurrent input's width
  const SequenceBatch batch = BatchOf(ctx, "Input");
  const int64_t n_seq = static_cast<int64_t>(batch.order.size());
  const T* x = input.data<T>();
  const T* bias = ctx.Input("Bias").data<T>();
  const T* w = ctx.Input("Weight").data<T>();
  const T* peep = ctx.Attr<bool>("use_peepholes") ? bias + 4 * d : nullptr;
  const Acts acts = ActsOf(ctx);
  const T clip = projected ? static_cast<T>(ctx.Attr<float>("cell_clip")) : T(0);
  const Tensor* h0_in = InitialState(ctx, "H0", n_seq, rw);
  const Tensor* c0_in = InitialState(ctx, "C0", n_seq, d);
  T* gates = ctx.Alloc<T>("BatchGate");
  T* s = ctx.Alloc<T>("BatchCellPreAct");
  T* cell_out = ctx.Alloc<T>("Cell");
  T* out = ctx.Alloc<T>(projected ? "Projection" : "Hidden");
  T* batch_hidden = projected ? ctx.Alloc<T>("BatchHidden") : nullptr;
  const T* proj_w = projected ? ctx.Input("ProjWeight").data<T>() : nullptr;
  const int proj_act = projected ? ProjAct(ctx) : 0;
  const T proj_clip = projected ? static_cast<T>(ctx.Attr<float>("proj_clip")) : T(0);
  const LoD steps = batch.StepLoD();
  for (const char* slot : {"BatchGate", "BatchCellPreAct", projected ? "BatchHidden" : nullptr})
    if (slot) ctx.Output(slot)->set_lod(steps);
  if (batch.steps() == 0 || d == 0) return;
  const DeviceInts idx = ToDeviceInts(ctx, {&batch.rows, &batch.order});
  const int64_t* rows = idx.parts[0];
  const int64_t* order = idx.parts[1];
  std::vector<std::shared_ptr<Allocation>> keep;
  const T* h0 = nullptr;
  const T* c0 = nullptr;
  if (h0_in) {
    T* p = ScratchOf<T>(ctx, n_seq * rw, &keep);
    cuda::Launch(ctx, n_seq * rw, GatherRows<T>, h0_in->data<T>(), order, rw, false, p);
    h0 = p;
  }
  if (c0_in) {
    T* p = ScratchOf<T>(ctx, n_seq * d, &keep);
    cuda::Launch(ctx, n_seq * d, GatherRows<T>, c0_in->data<T>(), order, d, false, p);
    c0 = p;
  }
  T* rec = ScratchOf<T>(ctx, 2 * n_seq * rw, &keep);   // rolling recurrent inputs (lstm: h, lstmp: r)
  T* cells = ScratchOf<T>(ctx, 2 * n_seq * d, &keep);  // rolling cells
  for (int64_t t = 0; t < batch.steps(); ++t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const T* r_prev = t > 0 ? rec + ((t - 1) & 1) * n_seq * rw : h0;
    const T* c_prev = t > 0 ? cells + ((t - 1) & 1) * n_seq * d : c0;
    T* r_cur = rec + (t & 1) * n_seq * rw;
    T* g = gates + b0 * 4 * d;
    if (r_prev) cuda::nn::Gemm<T>(ctx, false, false, n, 4 * d, rw, T(1), r_prev, w, T(0), g);
    T* h = projected ? batch_hidden + b0 * d : r_cur;
    cuda::Launch(ctx, n * d, StepForward<T>, x, bias, rows + b0, g, r_prev != nullptr, c_prev, peep, acts, clip, d,
                 cells + (t & 1) * n_seq * d, s + b0 * d, h, cell_out, projected ? nullptr : out);
    if (projected) {
      cuda::nn::Gemm<T>(ctx, false, false, n, rw, d, T(1), h, proj_w, T(0), r_cur);
      cuda::Launch(ctx, n * rw, ProjectStep<T>, rows + b0, proj_act, proj_clip, rw, r_cur, out);
    }
  }
}

// One step of the gradient for its n alive rows: rows k < n_dh have dh (lstm: from the next step; lstmp: all, from
// the projection), rows k < n_next hear from the next step through dc.
template <typename T>
__global__ void StepBackward(int64_t total, const int64_t* rows, const int64_t* prev_rows, int64_t b0, int64_t n_dh,
                             int64_t n_next, const T* gates, const T* s, const T* cells, const T* c0, const T* dh,
                             const T* d_out, const T* dc, const T* d_cell, const T* peep, Acts acts, T clip, int64_t d,
                             T* dc_prev, T* dg, T* dg_all) {
  FL_CUDA_LOOP(i, total) {
    const int64_t k = i / d, j = i % d, row = rows[k], r = b0 + k;
    const T dhv = (k < n_dh ? dh[i] : T(0)) + (d_out ? d_out[row * d + j] : T(0));
    const T dcv = (k < n_next ? dc[i] : T(0)) + (d_cell ? d_cell[row * d + j] : T(0));
    const T* gr = gates + r * 4 * d;
    const T gc = gr[j], gi = gr[d + j], gf = gr[2 * d + j], go = gr[3 * d + j];
    const bool has_cp = prev_rows || c0;
    const T cp = prev_rows ? cells[prev_rows[k] * d + j] : (c0 ? c0[i] : T(0));
    const T sv = s[r * d + j];
    const T dgo = ActGrad(acts.gate, go, dhv * sv);
    const T tmp = ActGrad(acts.cell, sv, dhv * go);
    T total_c = dcv + tmp + (peep ? dgo * peep[2 * d + j] : T(0));
    const T c = cells[row * d + j];
    if (clip > T(0) && (c >= clip || c <= -clip)) total_c = T(0);  // clipped: c does not move
    const T dgc = ActGrad(acts.cand, gc, total_c * gi);
    const T dgi = ActGrad(acts.gate, gi, total_c * gc);
    const T dgf = ActGrad(acts.gate, gf, has_cp ? total_c * cp : T(0));
    if (dc_prev) dc_prev[i] = peep ? total_c * gf + dgi * peep[j] + dgf * peep[d + j] : total_c * gf;
    T* dgk = dg + k * 4 * d;
    T* dga = dg_all + row * 4 * d;
    dgk[j] = dga[j] = dgc;
    dgk[d + j] = dga[d + j] = dgi;
    dgk[2 * d + j] = dga[2 * d + j] = dgf;
    dgk[3 * d + j] = dga[3 * d + j] = dgo;
  }
}

// prev[row] = the hidden state row `row`'s step multiplied by Weight: Hidden[p] for p = prev_index[row] >= 0, else
// H0's row -1 - p (zeros without H0).
template <typename T>
__global__ void PreviousHidden(int64_t total, const int64_t* prev_index, const T* hidden, const T* h0, int64_t d,
                               T* prev) {
  FL_CUDA_LOOP(i, total) {
    const int64_t row = i / d, j = i % d, p = prev_index[row];
    prev[i] = p >= 0 ? hidden[p * d + j] : (h0 ? h0[(-1 - p) * d + j] : T(0));
  }
}

// lstmp: dr of a step through proj_clip and the projection activation (r: Projection's rows), in place.
template <typename T>
__global__ void ProjectGradStep(int64_t total, const int64_t* rows, const T* r, int act, T clip, int64_t p, T* dr) {
  FL_CUDA_LOOP(i, total) {
    const int64_t k = i / p, j = i % p;
    const T rt = r[rows[k] * p + j];
    T v = dr[i];
    if (clip > T(0)) v = rt > -clip && rt < clip ? v : T(0);
    dr[i] = ActGrad(act, rt, v);
  }
}

// Partial column sums of the bias gradient (4D: dg) and the peephole gradients (3D: dg_i * c_prev, dg_f * c_prev,
// dg_o * c) over the rows of each part.
template <typename T>
__global__ void BiasGradParts(int64_t total, const T* dg_all, const T* cells, const T* c0, const int64_t* prev_index,
                              int64_t rows, int64_t d, int64_t width, int64_t parts, double* out) {
  FL_CUDA_LOOP(i, total) {  // i over parts * width
    const int64_t col = i % width, p = i / width;
    double sum = 0;
    for (int64_t r = rows * p / parts; r < rows * (p + 1) / parts; ++r) {
      if (col < 4 * d) {
        sum += double(dg_all[r * 4 * d + col]);
        continue;
      }
      const int64_t q = (col - 4 * d) / d, j = col % d;  // 0: w_ic, 1: w_fc, 2: w_oc
      if (q == 2) {
        sum += double(dg_all[r * 4 * d + 3 * d + j] * cells[r * d + j]);
        continue;
      }
      const int64_t pi = prev_index[r];
      if (pi < 0 && !c0) continue;
      const T cp = pi >= 0 ? cells[pi * d + j] : c0[(-1 - pi) * d + j];
      sum += double(dg_all[r * 4 * d + (q + 1) * d + j] * cp);
    }
    out[i] = sum;
  }
}

template <typename T>
__global__ void SumColumnParts(int64_t width, const double* parts_sums, int64_t parts, T* out) {
  FL_CUDA_LOOP(c, width) {
    double s = 0;
    for (int64_t p = 0; p < parts; ++p) s += parts_sums[p * width + c];
    out[c] = static_cast<T>(s);
  }
}

template <typename T>
void Backward(const ExecutionContext& ctx, bool projected) {
  Tensor* d_input = ctx.OutputOrNull("Input@GRAD");
  Tensor* d_weight = ctx.OutputOrNull("Weight@GRAD");
  Tensor* d_bias = ctx.OutputOrNull("Bias@GRAD");
  Tensor* d_proj_w = projected ? ctx.OutputOrNull("ProjWeight@GRAD") : nullptr;
  Tensor* d_h0 = ctx.OutputOrNull("H0@GRAD");
  Tensor* d_c0 = ctx.OutputOrNull("C0@GRAD");
  if (!d_input && !d_weight && !d_bias && !d_proj_w && !d_h0 && !d_c0) return;
  const Place& place = ctx.place();
  const Tensor& cell_out = ctx.Input("Cell");
  const SequenceBatch batch = BatchOf(ctx, "Cell");
  const Tensor& weight = ctx.Input("Weight");
  const int64_t d = cell_out.dims()[1], t_rows = cell_out.dims()[0];
  const int64_t n_seq = static_cast<int64_t>(batch.order.size());
  const int64_t rw = weight.dims()[0];  // D (lstm) or P (lstmp)
  const T* w = weight.data<T>();
  const Tensor& bias_t = ctx.Input("Bias");
  const T* peep = ctx.Attr<bool>("use_peepholes") ? bias_t.data<T>() + 4 * d : nullptr;
  const Acts acts = ActsOf(ctx);
  const T clip = projected ? static_cast<T>(ctx.Attr<float>("cell_clip")) : T(0);
  std::vector<std::pair<const char*, int64_t>> batch_inputs{{"BatchGate", 4 * d}, {"BatchCellPreAct", d}};
  if (projected) batch_inputs.push_back({"BatchHidden", d});
  for (auto [slot, width] : batch_inputs) {
    const Tensor& t = ctx.Input(slot);
    FL_ENFORCE(t.rank() == 2 && t.dims()[0] == t_rows && t.dims()[1] == width, ctx.Type(), ": ", slot, " '",
               ctx.InputName(slot), "' ", t.dims(), " must be [", t_rows, ", ", width, "] as the forward op wrote it");
  }
  auto rows_of = [&](const char* slot, int64_t width, bool optional) -> const T* {
    const Tensor* v = optional ? ctx.InputOrNull(slot) : &ctx.Input(slot);
    if (!v) return nullptr;
    FL_ENFORCE(v->numel() == t_rows * width, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' ", v->dims(),
               " must be [", t_rows, ", ", width, "]");
    return v->data<T>();
  };
  const T* gates = ctx.Input("BatchGate").data<T>();
  const T* s = ctx.Input("BatchCellPreAct").data<T>();
  const T* cells = cell_out.data<T>();
  const T* d_cell = rows_of("Cell@GRAD", d, true);
  const T* rec_out = rows_of(projected ? "Projection" : "Hidden", rw, false);
  const T* d_out = rows_of(projected ? "Projection@GRAD" : "Hidden@GRAD", rw, true);
  const Tensor* h0_in = InitialState(ctx, "H0", n_seq, rw);
  const Tensor* c0_in = InitialState(ctx, "C0", n_seq, d);

  // prev_index[row]: the input row of the previous step of row's sequence, or -1 - s for its first step.
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, "Cell");
  const bool reverse = ctx.Attr<bool>("is_reverse");
  std::vector<int64_t> prev_index(t_rows);
  ForEachSequence(offsets, [&](int64_t sq, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      prev_index[r] = reverse ? (r + 1 < end ? r + 1 : -1 - sq) : (r > begin ? r - 1 : -1 - sq);
  });
  const DeviceInts idx = ToDeviceInts(ctx, {&batch.rows, &batch.order, &prev_index});
  const int64_t* rows = idx.parts[0];
  const int64_t* order = idx.parts[1];
  const int64_t* prev_dev = idx.parts[2];
  std::vector<std::shared_ptr<Allocation>> keep;
  const T* c0 = nullptr;
  if (c0_in) {
    T* p = ScratchOf<T>(ctx, n_seq * d, &keep);
    cuda::Launch(ctx, n_seq * d, GatherRows<T>, c0_in->data<T>(), order, d, false, p);
    c0 = p;
  }
  T* dh0 = nullptr;
  T* dc0 = nullptr;
  if (h0_in && d_h0) {
    dh0 = ScratchOf<T>(ctx, n_seq * rw, &keep);
    cuda::nn::Zero(ctx, dh0, n_seq * rw);
  }
  if (c0 && d_c0) {
    dc0 = ScratchOf<T>(ctx, n_seq * d, &keep);
    cuda::nn::Zero(ctx, dc0, n_seq * d);
  }
  T* dg_all = d_input ? d_input->mutable_data<T>(DDim{t_rows, 4 * d}, place) : ScratchOf<T>(ctx, t_rows * 4 * d, &keep);
  T* dgs = ScratchOf<T>(ctx, 2 * n_seq * 4 * d, &keep);
  T* dh = ScratchOf<T>(ctx, n_seq * d, &keep);
  T* dcs = ScratchOf<T>(ctx, 2 * n_seq * d, &keep);
  // lstmp: dr of every row in batch order (ProjWeight@GRAD pairs it with BatchHidden), Projection@GRAD to begin.
  T* dr = nullptr;
  const T* proj_w = projected ? ctx.Input("ProjWeight").data<T>() : nullptr;
  const int proj_act = projected ? ProjAct(ctx) : 0;
  const T proj_clip = projected ? static_cast<T>(ctx.Attr<float>("proj_clip")) : T(0);
  if (projected) {
    dr = ScratchOf<T>(ctx, t_rows * rw, &keep);
    if (d_out) cuda::Launch(ctx, t_rows * rw, GatherRows<T>, d_out, rows, rw, false, dr);
    else cuda::nn::Zero(ctx, dr, t_rows * rw);
  }
  int64_t n_next = 0;
  for (int64_t t = batch.steps() - 1; t >= 0; --t) {
    const int64_t b0 = batch.step_begin[t], n = batch.alive(t);
    const int64_t* prev_rows = t > 0 ? rows + batch.step_begin[t - 1] : nullptr;
    T* dc = dcs + (t & 1) * n_seq * d;
    T* dc_prev = t > 0 ? dcs + ((t - 1) & 1) * n_seq * d : dc0;
    T* dg = dgs + (t & 1) * n_seq * 4 * d;
    const T* dg_next = dgs + ((t + 1) & 1) * n_seq * 4 * d;
    int64_t n_dh = 0;
    if (projected) {  // this step's dr is complete: through proj_clip and the activation, then to h
      T* drt = dr + b0 * rw;
      cuda::Launch(ctx, n * rw, ProjectGradStep<T>, rows + b0, rec_out, proj_act, proj_clip, rw, drt);
      cuda::nn::Gemm<T>(ctx, false, true, n, d, rw, T(1), drt, proj_w, T(0), dh);
      n_dh = n;
    } else if (n_next > 0) {
      cuda::nn::Gemm<T>(ctx, false, true, n_next, d, 4 * d, T(1), dg_next, w, T(0), dh);
      n_dh = n_next;
    }
    cuda::Launch(ctx, n * d, StepBackward<T>, rows + b0, prev_rows, b0, n_dh, n_next, gates, s, cells,
                 t > 0 ? static_cast<const T*>(nullptr) : c0, static_cast<const T*>(dh),
                 projected ? static_cast<const T*>(nullptr) : d_out, static_cast<const T*>(dc), d_cell, peep, acts,
                 clip, d, dc_prev, dg, dg_all);
    if (projected && t > 0)  // the previous step's dr += dg W^T
      cuda::nn::Gemm<T>(ctx, false, true, n, rw, 4 * d, T(1), dg, w, T(1), dr + batch.step_begin[t - 1] * rw);
    n_next = n;
  }
  if (dh0 && batch.steps() > 0) cuda::nn::Gemm<T>(ctx, false, true, batch.alive(0), rw, 4 * d, T(1), dgs, w, T(0), dh0);
  if (d_weight) {  // Weight@GRAD = prev^T dg over every row
    T* prev = ScratchOf<T>(ctx, t_rows * rw, &keep);
    cuda::Launch(ctx, t_rows * rw, PreviousHidden<T>, prev_dev, rec_out, h0_in ? h0_in->data<T>() : nullptr, rw, prev);
    cuda::nn::Gemm<T>(ctx, true, false, rw, 4 * d, t_rows, T(1), prev, dg_all, T(0),
                      d_weight->mutable_data<T>(weight.dims(), place));
  }
  if (d_proj_w)  // ProjWeight@GRAD = BatchHidden^T dr
    cuda::nn::Gemm<T>(ctx, true, false, d, rw, t_rows, T(1), ctx.Input("BatchHidden").data<T>(),
                      static_cast<const T*>(dr), T(0),
                      d_proj_w->mutable_data<T>(ctx.Input("ProjWeight").dims(), place));
  if (d_bias) {
    T* db = d_bias->mutable_data<T>(bias_t.dims(), place);
    const int64_t width = peep ? 7 * d : 4 * d;
    const int64_t parts =
        std::max<int64_t>(1, std::min<int64_t>((65536 + width - 1) / std::max<int64_t>(1, width), (t_rows + 15) / 16));
    double* sums = ScratchOf<double>(ctx, parts * width, &keep);
    cuda::Launch(ctx, parts * width, BiasGradParts<T>, static_cast<const T*>(dg_all), cells,
                 c0_in ? c0_in->data<T>() : nullptr, prev_dev, t_rows, d, width, parts, sums);
    cuda::Launch(ctx, width, SumColumnParts<T>, static_cast<const double*>(sums), parts, db);
  }
  if (d_input) d_input->set_lod(cell_out.lod());
  if (d_h0 && dh0)
    cuda::Launch(ctx, n_seq * rw, GatherRows<T>, static_cast<const T*>(dh0), order, rw, true,
                 d_h0->mutable_data<T>(DDim{n_seq, rw}, place));
  if (d_c0 && dc0)
    cuda::Launch(ctx, n_seq * d, GatherRows<T>, static_cast<const T*>(dc0), order, d, true,
                 d_c0->mutable_data<T>(DDim{n_seq, d}, place));
}

const auto kLstm = [](const ExecutionContext& ctx, auto tag) { Forward<typename decltype(tag)::type>(ctx, false); };
const auto kLstmp = [](const ExecutionContext& ctx, auto tag) { Forward<typename decltype(tag)::type>(ctx, true); };
const auto kLstmGrad = [](const ExecutionContext& ctx, auto tag) {
  Backward<typename decltype(tag)::type>(ctx, false);
};
const auto kLstmpGrad = [](const ExecutionContext& ctx, auto tag) {
  Backward<typename decltype(tag)::type>(ctx, true);
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(lstm) { ops.Kernel<float, double>(kLstm); }
FL_REGISTER_CUDA_KERNELS(lstm_grad) { ops.Kernel<float, double>(kLstmGrad); }
FL_REGISTER_CUDA_KERNELS(lstmp) { ops.Kernel<float, double>(kLstmp); }
FL_REGISTER_CUDA_KERNELS(lstmp_grad) { ops.Kernel<float, double>(kLstmpGrad); }

}  // namespace fl
