// crf_decoding: the most likely tag path of each sequence under the CRF that linear_chain_crf trains (Fluid's
// crf_decoding_op), by the Viterbi algorithm over the same Transition layout (helpers/crf.h): a path s scores
// start[s_0] + end[s_L-1] + sum_k Emission[k][s_k] + sum_k w[s_k-1][s_k]. ViterbiPath holds the tag ids, int64, one
// per row; given Label, 1 where the decoded tag equals the label and 0 elsewhere (Fluid's input to chunk_eval in
// training). Ties go to the smaller tag id, as in Fluid. Padding rows (the Length form) are 0. Parallel over
// sequences.
#include <limits>
#include <utility>

#include "helpers/crf.h"
#include "helpers/scratch.h"
#include "op_context.h"

namespace fl {

namespace {

void CrfDecodingInferShape(InferShapeContext& ctx) {
  CheckCrfInputs(ctx);
  const DDim e = ctx.InputDim("Emission");
  ctx.SetOutput("ViterbiPath", ctx.HasInput("Length") ? DDim{e[0], e[1]} : DDim{e[0], 1}, DType::INT64);
  ctx.ShareLoD("Emission", "ViterbiPath");
}

// The best path of one sequence x [len, d] into path[0, len). score [2 * d] and track [len * d] are scratch:
// score holds the best score of a path ending in each tag at the current position, track[k][i] the tag at k - 1 of
// the best path ending in tag i at k. wm is w's D x D transitions (TileMatrix).
template <typename T>
void ViterbiSequence(const T* x, int64_t len, int64_t d, Transitions<T> w, const TileMatrix<T>& wm, int64_t* path,
                     T* score, int32_t* track) {
  T* cur = score;
  T* next = score + d;
  for (int64_t i = 0; i < d; ++i) cur[i] = w.start()[i] + x[i];
  for (int64_t k = 1; k < len; ++k) {
    VectorMaxPlusMatrix(cur, wm, next, track + k * d);
    const T* xk = x + k * d;
    for (int64_t i = 0; i < d; ++i) next[i] += xk[i];
    std::swap(cur, next);
  }
  T best = std::numeric_limits<T>::lowest();
  int64_t tag = 0;
  for (int64_t i = 0; i < d; ++i) {
    const T s = cur[i] + w.end()[i];
    if (s > best) {
      best = s;
      tag = i;
    }
  }
  path[len - 1] = tag;
  for (int64_t k = len - 1; k > 0; --k) path[k - 1] = tag = track[k * d + tag];
}

const auto kCrfDecoding = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const bool has_label = ctx.HasInput("Label");
  const SequenceSpans spans = ctx.HasInput("Length") ? PaddedSpans(ctx, "Emission", "Length")
                                                     : LoDSpans(ctx, "Emission", has_label ? "Label" : nullptr, false);
  const Tensor& wt = ctx.Input("Transition");
  const int64_t d = wt.dims()[1];
  Tensor* out = ctx.Output("ViterbiPath");
  int64_t* path = out->mutable_data<int64_t>(ctx.place());
  std::fill(path, path + out->numel(), int64_t(0));
  const T* x = ctx.Input("Emission").data<T>();
  const Transitions<T> w{wt.data<T>(), d};
  const TileMatrix<T> wm(w.matrix(), d, d, 1, std::numeric_limits<T>::lowest());
  ForEachSpanInParts(spans, SpanParts(spans, d * d), [&](int, int64_t s) {
    const int64_t b = spans.begin[s], len = spans.length[s];
    if (len == 0) return;
    ViterbiSequence(x + b * d, len, d, w, wm, path + b, Scratch<T>(0, 2 * d), Scratch<int32_t>(1, len * d));
  });
  if (!has_label) return;
  const int64_t* label = ctx.Input("Label").data<int64_t>();
  for (int64_t s = 0; s < spans.size(); ++s)
    for (int64_t r = spans.begin[s]; r < spans.begin[s] + spans.length[s]; ++r) path[r] = label[r] == path[r];
};

}  // namespace

FL_REGISTER_OP(crf_decoding, op) {
  op.Doc(
        "The Viterbi path of each sequence under the linear-chain CRF of Transition [D + 2, D] (linear_chain_crf's "
        "layout): ViterbiPath = the best tag ids, int64, one per row of Emission; with Label, 1 where the best tag "
        "equals Label and 0 elsewhere. Emission is a LoDTensor [T, D] or, with Length, padded [N, L, D].")
      .Input("Emission",
             "emission scores, float32 / float64 [T, D] (LoD: its last level marks the sequences) or "
             "[N, L, D] (with Length)")
      .Input("Transition", "the transition weights [D + 2, D] that linear_chain_crf learned, Emission's dtype")
      .DispensableInput("Label",
                        "int64 [T, 1] or [T] (or [N, L] / [N, L, 1]): given, ViterbiPath is 1 / 0 per "
                        "position for a match / mismatch")
      .DispensableInput("Length", "int64 [N] or [N, 1]: the true length of each padded row (the padded form)")
      .Output("ViterbiPath", "int64 [T, 1] with Emission's LoD, or [N, L] (padding positions 0)")
      .KernelDTypeFrom("Emission")
      .SetInferShape(CrfDecodingInferShape)
      .CPUKernel<float, double>(kCrfDecoding);
}

}  // namespace fl
