// linear_chain_crf: the negative log-likelihood of each sequence's tags under a linear-chain CRF (Fluid's
// linear_chain_crf_op), and its gradient for Emission and Transition.
//
// With x the emissions of one sequence [L, D], a / b the start / end weights and w[j][i] the weight of tag j -> tag i
// (Transition's rows 0, 1 and 2.., helpers/crf.h), a tag path s scores a[s_0] + b[s_L-1] + sum_k x[k][s_k] +
// sum_k w[s_k-1][s_k], and LogLikelihood = log Z - score(Label): the NEGATIVE log-likelihood, as in Fluid (users
// take its mean as the loss). Z sums exp(score) over all D^L paths by the forward algorithm in Fluid's scaled form:
// EmissionExps = exp(x - max of its row), TransitionExps = exp(Transition), and each row of Alpha (the forward
// vectors) normalised to sum 1, log Z collecting the row maxima and the normalisers. Nothing overflows for large
// emissions; the gradient's backward vectors are scaled the same way. The grad reads Alpha, EmissionExps and
// TransitionExps: Emission@GRAD = g * (marginals - one-hot(Label)), Transition@GRAD the same for the pairwise
// marginals (g = LogLikelihood@GRAD of the sequence). Parallel over sequences; each part adds its sequences'
// Transition@GRAD into its own buffer, summed in part order, so results do not depend on thread timing.
#include <cmath>
#include <vector>

#include "helpers/crf.h"
#include "helpers/scratch.h"
#include "helpers/vec_exp.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

void LinearChainCrfInferShape(InferShapeContext& ctx) {
  CheckCrfInputs(ctx);
  const DDim e = ctx.InputDim("Emission");
  const DType dt = ctx.InputDType("Emission");
  ctx.SetOutput("Alpha", e, dt);
  ctx.SetOutput("EmissionExps", e, dt);
  ctx.SetOutput("TransitionExps", ctx.InputDim("Transition"), dt);
  if (ctx.HasInput("Length")) ctx.SetOutput("LogLikelihood", DDim{e[0], 1}, dt);
  else if (!ctx.IsRuntime())  // one row per sequence: the kernel sizes it from the LoD
    ctx.SetOutput("LogLikelihood", DDim{-1, 1}, dt);
}

// The sequences of the op (either form), checked, and their labels checked against the tag count.
SequenceSpans CrfSpans(const ExecutionContext& ctx, int64_t tags) {
  SequenceSpans spans =
      ctx.HasInput("Length") ? PaddedSpans(ctx, "Emission", "Length") : LoDSpans(ctx, "Label", "Emission", false);
  CheckIdsInRange(ctx, "Label", spans, tags - 1,
                  Str("a tag of Emission '", ctx.InputName("Emission"), "' ", ctx.Input("Emission").dims()));
  return spans;
}

// Scales v[0, n) to sum 1 and returns the old sum, which must be positive and finite for the recursion to go on.
template <typename T>
T Normalize(T* v, int64_t n, const ExecutionContext& ctx, const char* what, int64_t seq, int64_t pos) {
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += v[i];
  FL_ENFORCE(sum > T(0) && std::isfinite(sum), ctx.Type(), ": the ", what, " of sequence ", seq, " at position ", pos,
             " sum to ", sum, ", not a positive finite number: Emission '", ctx.InputName("Emission"),
             "' or Transition '", ctx.InputName("Transition"),
             "' holds NaN or Inf, or transition weights so large or so negative that their exponentials overflow or "
             "vanish");
  const T inv = T(1) / sum;
  for (int64_t i = 0; i < n; ++i) v[i] *= inv;
  return sum;
}

// One sequence, rows [0, len) of x / xe / alpha: fills EmissionExps and Alpha, returns log Z - score(label).
// wm is exp(w)'s D x D transitions (TileMatrix).
template <typename T>
T ForwardSequence(const T* x, const int64_t* label, int64_t len, int64_t d, Transitions<T> w, Transitions<T> we,
                  const TileMatrix<T>& wm, T* __restrict xe, T* __restrict alpha, const ExecutionContext& ctx,
                  int64_t seq) {
  T log_z = 0;
  for (int64_t k = 0; k < len; ++k) {
    const T* xk = x + k * d;
    T* xek = xe + k * d;
    T* ak = alpha + k * d;
    T m = xk[0];
    for (int64_t i = 1; i < d; ++i) m = xk[i] > m ? xk[i] : m;
    for (int64_t i = 0; i < d; ++i) xek[i] = VecExp(xk[i] - m);
    if (k == 0) {
      for (int64_t i = 0; i < d; ++i) ak[i] = we.start()[i] * xek[i];
    } else {  // ak = (alpha[k-1] @ exp(w)) * xe[k]
      VectorTimesMatrix(ak - d, wm, ak);
      for (int64_t i = 0; i < d; ++i) ak[i] *= xek[i];
    }
    log_z += m + std::log(Normalize(ak, d, ctx, "forward probabilities", seq, k));
  }
  T last = 0;
  const T* al = alpha + (len - 1) * d;
  for (int64_t i = 0; i < d; ++i) last += al[i] * we.end()[i];
  FL_ENFORCE(last > T(0) && std::isfinite(last), ctx.Type(), ": the end probabilities of sequence ", seq, " sum to ",
             last, ", not a positive finite number: Transition '", ctx.InputName("Transition"),
             "' holds NaN, Inf or end weights whose exponentials vanish");
  log_z += std::log(last);
  T score = w.start()[label[0]] + w.end()[label[len - 1]] + x[label[0]];
  for (int64_t k = 1; k < len; ++k) score += x[k * d + label[k]] + w.from(label[k - 1])[label[k]];
  return log_z - score;
}

// One sequence of the gradient: dx [len, d] = g * (marginals - one-hot(label)); when dw is given, adds the start,
// end and pairwise terms into it. wt is exp(w) transposed, so that exp(w) @ t is t @ wt (VectorTimesMatrix); beta
// [len, d], norms [2 * len] and t [d] are scratch.
template <typename T>
void BackwardSequence(const T* xe, const T* alpha, const int64_t* label, int64_t len, int64_t d, Transitions<T> we,
                      const TileMatrix<T>& wt, T g, T* __restrict dx, T* __restrict dw, T* __restrict beta,
                      T* __restrict norms, T* __restrict t, const ExecutionContext& ctx, int64_t seq) {
  // The backward vectors, scaled to sum 1 per row: beta[k][i] ~ sum over the paths from tag i at k to the end.
  // beta_norm[k] is the scale row k was divided by.
  T* beta_norm = norms;
  T* bl = beta + (len - 1) * d;
  for (int64_t i = 0; i < d; ++i) bl[i] = we.end()[i];
  beta_norm[len - 1] = Normalize(bl, d, ctx, "backward probabilities", seq, len - 1);
  for (int64_t k = len - 2; k >= 0; --k) {
    const T* next = beta + (k + 1) * d;
    const T* xn = xe + (k + 1) * d;
    for (int64_t j = 0; j < d; ++j) t[j] = xn[j] * next[j];
    T* bk = beta + k * d;
    VectorTimesMatrix(t, wt, bk);
    beta_norm[k] = Normalize(bk, d, ctx, "backward probabilities", seq, k);
  }
  // P(tag i at k) = alpha[k][i] * beta[k][i] / mass[k].
  T* mass = norms + len;
  for (int64_t k = 0; k < len; ++k) {
    const T* ak = alpha + k * d;
    const T* bk = beta + k * d;
    T* dk = dx + k * d;
    T s = 0;
    for (int64_t i = 0; i < d; ++i) s += ak[i] * bk[i];
    FL_ENFORCE(s > T(0) && std::isfinite(s), ctx.Type(), ": the tag probabilities of sequence ", seq, " at position ",
               k, " sum to ", s, ": the forward and backward vectors underflowed, or Alpha '", ctx.InputName("Alpha"),
               "' and EmissionExps '", ctx.InputName("EmissionExps"),
               "' are not linear_chain_crf's outputs for these inputs");
    mass[k] = s;
    const T scale = g / s;
    for (int64_t i = 0; i < d; ++i) dk[i] = ak[i] * bk[i] * scale;
    dk[label[k]] -= g;
  }
  if (!dw) return;
  T* dstart = dw;
  T* dend = dw + d;
  for (int64_t i = 0; i < d; ++i) {
    dstart[i] += dx[i];
    dend[i] += dx[(len - 1) * d + i];
  }
  // P(tag i at k-1, tag j at k) = alpha[k-1][i] * exp(w[i][j]) * t[j] / z with t = xe[k] * beta[k]. Summed over i
  // and j that is alpha[k-1] . (exp(w) @ t), and exp(w) @ t is the unscaled beta[k-1]: z = mass[k-1] *
  // beta_norm[k-1], no second pass over the transitions.
  for (int64_t k = 1; k < len; ++k) {
    const T* ap = alpha + (k - 1) * d;
    const T* bk = beta + k * d;
    const T* xk = xe + k * d;
    for (int64_t j = 0; j < d; ++j) t[j] = xk[j] * bk[j];
    const T scale = g / (mass[k - 1] * beta_norm[k - 1]);
    for (int64_t i = 0; i < d; ++i) {
      const T* row = we.from(i);
      T* drow = dw + (i + 2) * d;
      const T ai = ap[i] * scale;
      for (int64_t j = 0; j < d; ++j) drow[j] += ai * row[j] * t[j];
    }
    dw[(label[k - 1] + 2) * d + label[k]] -= g;
  }
}

const auto kLinearChainCrf = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& et = ctx.Input("Emission");
  const Tensor& wt = ctx.Input("Transition");
  const int64_t d = wt.dims()[1];
  const SequenceSpans spans = CrfSpans(ctx, d);
  const T* w = wt.data<T>();
  T* we = ctx.Alloc<T>("TransitionExps");
  for (int64_t i = 0; i < wt.numel(); ++i) we[i] = VecExp(w[i]);
  T* xe = ctx.Alloc<T>("EmissionExps");
  T* alpha = ctx.Alloc<T>("Alpha");
  if (spans.padded) {  // the padding rows stay zero, as in Fluid
    std::fill(xe, xe + et.numel(), T(0));
    std::fill(alpha, alpha + et.numel(), T(0));
  }
  Tensor* llt = ctx.Output("LogLikelihood");
  llt->Resize(DDim{spans.size(), 1});
  llt->set_lod(spans.upper);
  T* ll = llt->mutable_data<T>(ctx.place());
  const T* x = et.data<T>();
  const int64_t* label = ctx.Input("Label").data<int64_t>();
  const Transitions<T> tw{w, d}, twe{we, d};
  const TileMatrix<T> wm(twe.matrix(), d, d, 1, T(0));
  ForEachSpanInParts(spans, SpanParts(spans, d * d), [&](int, int64_t s) {
    const int64_t b = spans.begin[s], len = spans.length[s];
    // An empty sequence has no path: its cost is 0, as in Fluid.
    ll[s] =
        len == 0 ? T(0) : ForwardSequence(x + b * d, label + b, len, d, tw, twe, wm, xe + b * d, alpha + b * d, ctx, s);
  });
};

const auto kLinearChainCrfGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  T* dx = ZeroedOutputOrNull<T>(ctx, "Emission@GRAD");
  T* dw = ZeroedOutputOrNull<T>(ctx, "Transition@GRAD");
  if (!dx && !dw) return;
  const Tensor& wet = ctx.Input("TransitionExps");
  const int64_t d = wet.dims()[1];
  const SequenceSpans spans = CrfSpans(ctx, d);
  const Tensor& gt = ctx.Input("LogLikelihood@GRAD");
  FL_ENFORCE(gt.numel() == spans.size(), ctx.Type(), ": LogLikelihood@GRAD '", ctx.InputName("LogLikelihood@GRAD"),
             "' ", gt.dims(), " must hold one value per sequence (", spans.size(), ")");
  const T* g = gt.data<T>();
  const T* xe = ctx.Input("EmissionExps").data<T>();
  const T* alpha = ctx.Input("Alpha").data<T>();
  const int64_t* label = ctx.Input("Label").data<int64_t>();
  const Transitions<T> we{wet.data<T>(), d};
  const TileMatrix<T> wt(we.matrix(), d, 1, d, T(0));  // exp(w) transposed
  const int parts = SpanParts(spans, d * d);
  const int64_t wsize = wet.numel();
  // Part 0 adds into Transition@GRAD itself, each other part into its own zeroed buffer.
  std::vector<T> partial(dw ? (parts - 1) * wsize : 0, T(0));
  ForEachSpanInParts(spans, parts, [&](int part, int64_t s) {
    const int64_t b = spans.begin[s], len = spans.length[s];
    if (len == 0) return;
    T* beta = Scratch<T>(0, len * d);
    T* t = Scratch<T>(1, d);
    T* norms = Scratch<T>(3, 2 * len);
    T* dxs = dx ? dx + b * d : Scratch<T>(2, len * d);  // the emission rows are needed for the start / end terms
    T* dws = !dw ? nullptr : part == 0 ? dw : partial.data() + (part - 1) * wsize;
    BackwardSequence(xe + b * d, alpha + b * d, label + b, len, d, we, wt, g[s], dxs, dws, beta, norms, t, ctx, s);
  });
  for (int p = 1; dw && p < parts; ++p)
    for (int64_t i = 0; i < wsize; ++i) dw[i] += partial[(p - 1) * wsize + i];
};

}  // namespace

FL_REGISTER_OP(linear_chain_crf, op) {
  op.Doc(
        "Negative log-likelihood of each sequence's Label under a linear-chain CRF with emissions Emission and the "
        "transition matrix Transition [D + 2, D] (row 0 start weights, row 1 end weights, row 2 + j the weights of "
        "tag j -> each tag): LogLikelihood = log Z - score(Label), one row per sequence (0 for an empty one). "
        "Emission is a LoDTensor [T, D] (Label's LoD marks the sequences) or, with Length, padded [N, L, D].")
      .Input("Emission", "unscaled emission scores, float32 / float64 [T, D] (LoD) or [N, L, D] (with Length)")
      .Input("Transition", "the learnable transition weights [D + 2, D], Emission's dtype")
      .Input("Label", "the true tags, int64 [T, 1] (LoD: its last level marks the sequences) or [N, L] / [N, L, 1]")
      .DispensableInput("Length", "int64 [N] or [N, 1]: the true length of each padded row (the padded form)")
      .Output("Alpha", "the forward vectors, each row scaled to sum 1, Emission's shape (padding rows 0)")
      .Output("EmissionExps", "exp(Emission - the maximum of its row), Emission's shape (padding rows 0)")
      .Output("TransitionExps", "exp(Transition) [D + 2, D]")
      .Output("LogLikelihood",
              "log Z - score(Label) per sequence [S, 1] (the negative log-likelihood; the LoD levels above the "
              "sequences, if any)")
      .NonDifferentiable({"Label", "Length"})
      .KernelDTypeFrom("Emission")
      .SetInferShape(LinearChainCrfInferShape)
      .CPUKernel<float, double>(kLinearChainCrf);
  op.GradOp(
        {"Emission", "Transition", "Label", "Length", "Alpha", "EmissionExps", "TransitionExps", "LogLikelihood@GRAD"})
      .Doc(
          "Gradient of linear_chain_crf: Emission@GRAD = g * (P(tag at each position) - one-hot(Label)) and "
          "Transition@GRAD the start, end and pairwise marginals minus Label's counts, times g = LogLikelihood@GRAD "
          "of each sequence; from the forward op's Alpha, EmissionExps and TransitionExps.")
      .CPUKernel<float, double>(kLinearChainCrfGrad);
}

}  // namespace fl
