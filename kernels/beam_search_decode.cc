// beam_search_decode: the full hypotheses of a LoD beam search (Fluid's beam_search_decode_op), traced back through
// the arrays Ids and Scores, entry t holding step t's selected_ids and selected_scores (beam_search's outputs, with
// the 2-level LoD {prefixes of each source, candidates of each prefix}; entry 0 the start tokens).
//
// Per source, walking the steps from the last back to the first, as Fluid's BeamSearchDecoder::Backtrace does:
//   - while the source has no hypotheses yet (the last step, or the steps after it was pruned, where it has no
//     candidates), each of its candidates at this step starts one, at most beam_size of them;
//   - otherwise each hypothesis takes the id and score of its current candidate, except an end_id when it already has
//     a token (the end_id an ended prefix re-offered at every later step is written once), then moves to the prefix
//     that candidate extends: the candidate of the step before.
// Each source then has beam_size hypotheses (empty ones when fewer were started), sorted by their last score, best
// first, and written out in step order: SentenceIds / SentenceScores [total tokens] with the LoD {beam_size
// hypotheses per source, tokens per hypothesis}. No gradient.
#include <algorithm>
#include <vector>

#include "helpers/tensor_array.h"

namespace fl {

namespace {

template <typename T>
struct Hypothesis {
  std::vector<int64_t> ids;  // last step first
  std::vector<T> scores;
};

// The LoD of step t's Ids, checked: two valid levels over its rows, the source count of step 0, and Scores[t] with
// as many values.
const LoD& StepLoD(const ExecutionContext& ctx, const TensorList& ids, const TensorList& scores, size_t t,
                   size_t sources) {
  const Tensor& id = ids[t];
  const Tensor& score = scores[t];
  const LoD& lod = id.lod();
  FL_ENFORCE(id.IsInitialized() && lod.size() == 2, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t,
             " ", id.dims(), " must have a 2-level LoD (beam_search's selected_ids), got ", id.LoDString());
  const std::string problem = LoDProblem(lod, id.rank() ? id.dims()[0] : 0);
  FL_ENFORCE(problem.empty(), "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t, " ", id.dims(),
             " has an invalid LoD ", id.LoDString(), ": ", problem);
  FL_ENFORCE(id.dtype() == DType::INT64, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t,
             " must be int64, got ", DTypeName(id.dtype()));
  FL_ENFORCE(id.numel() == static_cast<int64_t>(lod[1].back()), "beam_search_decode: Ids '", ctx.InputName("Ids"),
             "' entry ", t, " ", id.dims(), " must hold one id per row of its LoD ", id.LoDString());
  FL_ENFORCE(score.IsInitialized() && score.numel() == id.numel(), "beam_search_decode: Scores '",
             ctx.InputName("Scores"), "' entry ", t, " ", score.dims(), " must hold one score per id of Ids '",
             ctx.InputName("Ids"), "' entry ", t, " ", id.dims());
  FL_ENFORCE(lod[0].size() - 1 == sources, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t, " LoD ",
             id.LoDString(), " has ", lod[0].size() - 1, " sources, entry 0 has ", sources);
  return lod;
}

DType DecodeKernelDType(const ExecutionContext& ctx) {
  const TensorList& scores = InputArray(ctx, "Scores");
  return scores.empty() || !scores[0].IsInitialized() ? DType::FP32 : scores[0].dtype();
}

const auto kBeamSearchDecode = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const size_t beam_size = static_cast<size_t>(ctx.Attr<int32_t>("beam_size"));
  const int64_t end_id = ctx.Attr<int32_t>("end_id");
  const TensorList& ids = InputArray(ctx, "Ids");
  const TensorList& scores = InputArray(ctx, "Scores");
  FL_ENFORCE(!ids.empty(), "beam_search_decode: Ids '", ctx.InputName("Ids"),
             "' is an empty array: write the start ids and each step's selected_ids into it (layers.array_write)");
  FL_ENFORCE(ids.size() == scores.size(), "beam_search_decode: Ids '", ctx.InputName("Ids"), "' has ", ids.size(),
             " entries but Scores '", ctx.InputName("Scores"), "' has ", scores.size());
  const size_t sources = ids[0].lod().empty() ? 0 : ids[0].lod()[0].size() - 1;
  FL_ENFORCE(sources > 0, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry 0 ", ids[0].dims(), " LoD ",
             ids[0].LoDString(), " must describe at least one source");

  std::vector<std::vector<Hypothesis<T>>> hyps(sources, std::vector<Hypothesis<T>>(beam_size));
  std::vector<std::vector<size_t>> at(sources);  // each hypothesis' candidate at the current step
  for (size_t t = ids.size(); t-- > 0;) {
    const LoD& lod = StepLoD(ctx, ids, scores, t, sources);
    const std::vector<size_t>& prefixes = lod[0];
    const std::vector<size_t>& candidates = lod[1];
    const int64_t* id = ids[t].data<int64_t>();
    const T* score = scores[t].template data<T>();
    for (size_t s = 0; s < sources; ++s) {
      std::vector<Hypothesis<T>>& hyp = hyps[s];
      std::vector<size_t>& cur = at[s];
      const size_t first = candidates[prefixes[s]], last = candidates[prefixes[s + 1]];
      if (cur.empty()) {  // start a hypothesis at each candidate
        FL_ENFORCE(last - first <= beam_size, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t, " has ",
                   last - first, " candidates for source ", s, ", more than beam_size=", beam_size);
        for (size_t p = prefixes[s]; p < prefixes[s + 1]; ++p) {
          for (size_t c = candidates[p]; c < candidates[p + 1]; ++c) {
            hyp[cur.size()].ids.push_back(id[c]);
            hyp[cur.size()].scores.push_back(score[c]);
            cur.push_back(p);
          }
        }
        continue;
      }
      for (size_t h = 0; h < cur.size(); ++h) {
        const size_t c = cur[h];
        FL_ENFORCE(c >= first && c < last, "beam_search_decode: Ids '", ctx.InputName("Ids"), "' entry ", t + 1,
                   " has a prefix ", c, " of source ", s, " that is not among entry ", t, "'s candidates [", first,
                   ", ", last, ") of that source (LoD ", ids[t].LoDString(), ")");
        if (id[c] != end_id || hyp[h].ids.empty()) {
          hyp[h].ids.push_back(id[c]);
          hyp[h].scores.push_back(score[c]);
        }
        // The prefix holding candidate c: the last one of the source starting at or before it.
        cur[h] = std::upper_bound(candidates.begin() + prefixes[s], candidates.begin() + prefixes[s + 1] + 1, c) -
                 candidates.begin() - 1;
      }
    }
  }

  std::vector<size_t> source_level{0}, sentence_level{0};
  size_t tokens = 0;
  for (auto& hyp : hyps) {
    // Best last score first; Fluid's sort is not stable and reads an empty hypothesis' score: here ties keep their
    // order and empty hypotheses go last.
    std::stable_sort(hyp.begin(), hyp.end(), [](const Hypothesis<T>& a, const Hypothesis<T>& b) {
      return !a.scores.empty() && (b.scores.empty() || a.scores.front() > b.scores.front());
    });
    for (const Hypothesis<T>& h : hyp) sentence_level.push_back(tokens += h.ids.size());
    source_level.push_back(source_level.back() + hyp.size());
  }
  Tensor* ids_out = ctx.Output("SentenceIds");
  Tensor* scores_out = ctx.Output("SentenceScores");
  int64_t* out_id = ids_out->mutable_data<int64_t>(DDim{static_cast<int64_t>(tokens)}, ctx.place());
  T* out_score = scores_out->mutable_data<T>(DDim{static_cast<int64_t>(tokens)}, ctx.place());
  for (const auto& hyp : hyps) {
    for (const Hypothesis<T>& h : hyp) {
      out_id = std::reverse_copy(h.ids.begin(), h.ids.end(), out_id);
      out_score = std::reverse_copy(h.scores.begin(), h.scores.end(), out_score);
    }
  }
  const LoD out_lod{std::move(source_level), std::move(sentence_level)};
  ids_out->set_lod(out_lod);
  scores_out->set_lod(out_lod);
};

}  // namespace

FL_REGISTER_OP(beam_search_decode, op) {
  op.Doc(
        "The full hypotheses of a beam search: traced back through the arrays of every step's selected ids and "
        "scores, beam_size per source, best first, with the 2-level LoD {hypotheses of each source, tokens of each "
        "hypothesis}.")
      .Input("Ids",
             "LoDTensorArray of int64: entry t holds step t's selected_ids (entry 0 the start ids), each "
             "with beam_search's 2-level LoD")
      .Input("Scores", "LoDTensorArray (float32 or float64): the scores of those ids, entry by entry")
      .Output("SentenceIds", "int64 [tokens]: every hypothesis' ids in step order")
      .Output("SentenceScores", "[tokens]: the accumulated score at each of those ids")
      .RequiredAttr<int32_t>("beam_size", 1, "the beam width of the search: hypotheses per source")
      .Min(1)
      .RequiredAttr<int32_t>("end_id", 0, "the id that ends a sequence")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.IsRuntime()) return;  // the kernel sizes the outputs and sets their LoD
        CheckArrayInput(ctx, "Ids");
        CheckArrayInput(ctx, "Scores");
        const DType ids = ctx.InputDType("Ids"), scores = ctx.InputDType("Scores");
        FL_ENFORCE(ids == DType::INT64 || ids == DType::UNDEFINED, "beam_search_decode: Ids '", ctx.InputName("Ids"),
                   "' must be an array of int64, got ", DTypeName(ids));
        FL_ENFORCE(scores == DType::FP32 || scores == DType::FP64 || scores == DType::UNDEFINED,
                   "beam_search_decode: Scores '", ctx.InputName("Scores"),
                   "' must be an array of float32 or float64, got ", DTypeName(scores));
        ctx.SetOutput("SentenceIds", DDim{-1}, DType::INT64);
        ctx.SetOutput("SentenceScores", DDim{-1}, scores == DType::UNDEFINED ? DType::FP32 : scores);
        ctx.SetOutputLoDLevel("SentenceIds", 2);
        ctx.SetOutputLoDLevel("SentenceScores", 2);
      })
      .SetKernelDType(DecodeKernelDType)
      .CPUKernel<float, double>(kBeamSearchDecode)
      .NoGradient();
}

}  // namespace fl
