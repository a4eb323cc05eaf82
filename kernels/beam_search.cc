// beam_search: one step of Fluid's LoD beam search (operators/beam_search_op, math/beam_search). Each row of scores
// (and ids) holds the candidates of one live prefix; level `level` of scores' LoD groups the prefixes (rows) by
// source. For each source the beam_size best candidates over all of its prefixes are kept:
//   - a prefix that already ended (pre_id == end_id) offers only itself, (end_id, pre_score);
//   - any other row r offers each d of its W candidates: id ids[r][d] (d itself when ids is absent), score
//     scores[r][d] (pre_score + log(scores[r][d]) when is_accumulated is false);
//   - order: the higher score first, on equal scores the later row first; a candidate equal to the last one kept
//     (same score, same row) replaces it. This is Fluid's insertion into a sorted beam, kept bit for bit, so ties
//     select what Fluid selects.
// A source whose kept candidates all continue ended prefixes (end_id after end_id) is pruned: it keeps nothing, its
// search is over. Output rows: prefix by prefix in row order, each prefix's kept candidates in beam order (best
// first); LoD {level `level` of the input in rows (the prefixes of each source), the candidates of each prefix};
// parent_idx: the input row (prefix) of each output row, for gathering the decoder's states. No gradient.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "helpers/lod.h"
#include "logging.h"

namespace fl {

namespace {

template <typename T>
struct Candidate {
  int64_t row;  // the prefix it extends
  int64_t id;
  T score;
  // Fluid's Item order: by score, then by row.
  bool operator<(const Candidate& o) const { return score < o.score || (score == o.score && row < o.row); }
};

// Inserts c into `beam` (sorted best first, at most beam_size long) as Fluid's BeamSearchFunctor::Insert does: a
// full beam drops its last entry for any candidate not below it, and c goes after the entries not below it.
template <typename T>
void Insert(std::vector<Candidate<T>>& beam, const Candidate<T>& c, size_t beam_size) {
  if (beam.size() < beam_size) {
    beam.push_back(c);
  } else if (c < beam.back()) {
    return;
  }
  size_t k = beam.size() - 1;
  for (; k > 0 && beam[k - 1] < c; --k) beam[k] = beam[k - 1];
  beam[k] = c;
}

// The first d in [d, n) for which keep(x[d]) holds (the candidates before it cannot enter the beam), tested in
// blocks of 16 without an early exit so the test vectorises.
template <typename T, typename Keep>
int64_t NextCandidate(const T* x, int64_t d, int64_t n, Keep keep) {
  constexpr int64_t kBlock = 16;
  for (; d + kBlock <= n; d += kBlock) {
    bool any = false;
    for (int64_t j = 0; j < kBlock; ++j) any |= keep(x[d + j]);
    if (any) break;
  }
  while (d < n && !keep(x[d])) ++d;
  return d;
}

// For probabilities (is_accumulated false): a bound below which a probability p >= 0 cannot enter a full beam whose
// last score is `last`, i.e. pre_score + log(p) < last as computed in T. From log(p) < last - pre - m, with the margin
// m (in log space) covering std::log's error (< 1 ulp of log(p), |log(p)| <= 104 for float, 745 for double) and the
// rounding of the sum, eight times over. Rounded down to a T.
template <typename T>
T ProbabilityBound(T last, T pre) {
  const double eps = sizeof(T) == 4 ? 0x1p-20 : 0x1p-49, range = sizeof(T) == 4 ? 110 : 750;
  const double x =
      static_cast<double>(last) - pre - eps * (std::fabs(static_cast<double>(last)) + std::fabs(pre) + range);
  const double bound = std::exp(x);
  T b = static_cast<T>(bound);
  if (static_cast<double>(b) > bound) b = std::nextafter(b, T(0));
  return b;
}

// The op's buffers, kept across runs (a decoder runs the op once per step): each source's beam, and the next output
// row of each prefix.
struct BeamSearchState {
  std::vector<std::vector<Candidate<float>>> beams_f;
  std::vector<std::vector<Candidate<double>>> beams_d;
  std::vector<size_t> next_row;
  template <typename T>
  std::vector<std::vector<Candidate<T>>>& Beams() {
    if constexpr (std::is_same_v<T, float>) return beams_f;
    else return beams_d;
  }
};

void EnforceDType(const InferShapeContext& ctx, const char* slot, std::initializer_list<DType> allowed,
                  const char* what) {
  const DType dt = ctx.InputDType(slot);
  if (dt == DType::UNDEFINED) return;
  FL_ENFORCE(std::find(allowed.begin(), allowed.end(), dt) != allowed.end(), ctx.Type(), ": ", ctx.Describe(slot),
             " must be ", what, ", got ", DTypeName(dt));
}

void BeamSearchInferShape(InferShapeContext& ctx) {
  const DDim scores = ctx.InputDim("scores");
  FL_ENFORCE(scores.size() >= 1, "beam_search: ", ctx.Describe("scores"),
             " must have at least one dim (one row of candidates per prefix)");
  EnforceDType(ctx, "pre_ids", {DType::INT64}, "int64");
  EnforceDType(ctx, "scores", {DType::FP32, DType::FP64}, "float32 or float64");
  ctx.EnforceSameDType("pre_scores", "scores");
  if (ctx.HasInput("ids")) {
    EnforceDType(ctx, "ids", {DType::INT64}, "int64");
    const DDim ids = ctx.InputDim("ids");
    bool same = ids.size() == scores.size();
    for (int i = 0; same && i < ids.size(); ++i) same = ids[i] < 0 || scores[i] < 0 || ids[i] == scores[i];
    FL_ENFORCE(same, "beam_search: ", ctx.Describe("ids"), " and ", ctx.Describe("scores"),
               " must have the same shape (one id per score)");
  }
  if (ctx.IsRuntime()) return;  // the kernel sizes the outputs and sets their LoD
  ctx.SetOutput("selected_ids", DDim{-1, 1}, DType::INT64);
  ctx.SetOutput("selected_scores", DDim{-1, 1}, ctx.InputDType("scores"));
  ctx.SetOutputLoDLevel("selected_ids", 2);
  ctx.SetOutputLoDLevel("selected_scores", 2);
  if (ctx.HasOutput("parent_idx")) ctx.SetOutput("parent_idx", DDim{-1}, DType::INT32);
}

const auto kBeamSearch = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const size_t level = static_cast<size_t>(ctx.Attr<int32_t>("level"));
  const size_t beam_size = static_cast<size_t>(ctx.Attr<int32_t>("beam_size"));
  const int64_t end_id = ctx.Attr<int32_t>("end_id");
  const bool is_accumulated = ctx.Attr<bool>("is_accumulated");

  const Tensor& scores_t = ctx.Input("scores");
  const LoD& lod = CheckedLoD(ctx, "scores", 0, level + 1);
  const int64_t rows = scores_t.dims()[0];
  // Every source's prefixes in rows; the output's first LoD level.
  const std::vector<size_t> sources = AbsoluteOffsets(lod, level);
  FL_ENFORCE(rows > 0, "beam_search: scores '", ctx.InputName("scores"), "' ", scores_t.dims(), " LoD ",
             scores_t.LoDString(),
             " has no prefixes left (every source ended at an earlier step): stop the decoding loop once "
             "selected_ids is empty (layers.is_empty)");
  const int64_t width = scores_t.numel() / rows;
  const Tensor& pre_ids_t = ctx.Input("pre_ids");
  const Tensor& pre_scores_t = ctx.Input("pre_scores");
  for (const Tensor* t : {&pre_ids_t, &pre_scores_t}) {
    const char* slot = t == &pre_ids_t ? "pre_ids" : "pre_scores";
    FL_ENFORCE(t->numel() == rows, "beam_search: ", slot, " '", ctx.InputName(slot), "' ", t->dims(),
               " must hold one value per prefix, the ", rows, " rows of scores '", ctx.InputName("scores"), "' ",
               scores_t.dims());
  }
  const Tensor* ids_t = ctx.InputOrNull("ids");
  FL_ENFORCE(!ids_t || ids_t->dims() == scores_t.dims(), "beam_search: ids '", ctx.InputName("ids"), "' ",
             ids_t ? ids_t->dims() : DDim{}, " and scores '", ctx.InputName("scores"), "' ", scores_t.dims(),
             " must have the same shape (one id per score)");
  const int64_t* pre_ids = pre_ids_t.data<int64_t>();
  const T* pre_scores = pre_scores_t.data<T>();
  const int64_t* ids = ids_t ? ids_t->data<int64_t>() : nullptr;
  const T* scores = scores_t.data<T>();

  // The kept candidates of each source, best first. Sources are independent: split over the pool when the
  // candidates are many (a large vocabulary without a top_k before this op).
  const int64_t num_sources = SequenceCount(sources);
  BeamSearchState& state = ctx.State<BeamSearchState>();
  std::vector<std::vector<Candidate<T>>>& beams = state.Beams<T>();
  if (static_cast<int64_t>(beams.size()) < num_sources) beams.resize(num_sources);
  const int64_t grain = std::max<int64_t>(1, num_sources * kMinParallelElements / std::max<int64_t>(1, rows * width));
  ParallelFor(num_sources, grain, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      std::vector<Candidate<T>>& beam = beams[s];
      beam.clear();
      beam.reserve(beam_size);
      for (int64_t r = sources[s]; r < static_cast<int64_t>(sources[s + 1]); ++r) {
        const T pre_score = pre_scores[r];
        if (pre_ids[r] == end_id) {  // an ended prefix: all its mass on end_id
          Insert(beam, Candidate<T>{r, end_id, pre_score}, beam_size);
          continue;
        }
        const T* row = scores + r * width;
        const int64_t* row_ids = ids ? ids + r * width : nullptr;
        for (int64_t d = 0; d < width; ++d) {
          if (beam.size() == beam_size) {
            // Rows come in order, so a candidate not below the last kept one is exactly one whose score is not
            // below its score: skip ahead over the others without computing their scores.
            const T last = beam.back().score;
            if (is_accumulated) {
              d = NextCandidate(row, d, width, [last](T x) { return !(x < last); });
            } else {
              const T bound = ProbabilityBound(last, pre_score);
              d = NextCandidate(row, d, width, [bound](T p) { return !(p >= T(0) && p < bound); });
            }
            if (d == width) break;
          }
          const T score = is_accumulated ? row[d] : pre_score + std::log(row[d]);
          Insert(beam, Candidate<T>{r, row_ids ? row_ids[d] : d, score}, beam_size);
        }
      }
      // Prune a finished source: every kept candidate continues an ended prefix with end_id. (Pruning waits one
      // step after the last end_id is chosen, so that step still writes it out.)
      const bool finished = std::all_of(
          beam.begin(), beam.end(), [&](const Candidate<T>& c) { return c.id == end_id && pre_ids[c.row] == end_id; });
      if (finished) beam.clear();
    }
  });

  // Lay the kept candidates out prefix by prefix: a stable counting sort by row within each source.
  std::vector<size_t> prefix_offsets(rows + 1, 0);
  for (int64_t s = 0; s < num_sources; ++s)
    for (const Candidate<T>& c : beams[s]) ++prefix_offsets[c.row + 1];
  for (int64_t r = 0; r < rows; ++r) prefix_offsets[r + 1] += prefix_offsets[r];
  const int64_t kept = static_cast<int64_t>(prefix_offsets[rows]);
  Tensor* ids_out = ctx.Output("selected_ids");
  Tensor* scores_out = ctx.Output("selected_scores");
  Tensor* parent_out = ctx.OutputOrNull("parent_idx");
  int64_t* out_ids = ids_out->mutable_data<int64_t>(DDim{kept, 1}, ctx.place());
  T* out_scores = scores_out->mutable_data<T>(DDim{kept, 1}, ctx.place());
  int32_t* parents = parent_out ? parent_out->mutable_data<int32_t>(DDim{kept}, ctx.place()) : nullptr;
  std::vector<size_t>& next = state.next_row;
  next.assign(prefix_offsets.begin(), prefix_offsets.end() - 1);
  int64_t pruned = 0;
  for (int64_t s = 0; s < num_sources; ++s) {
    pruned += beams[s].empty() && sources[s + 1] > sources[s];
    for (const Candidate<T>& c : beams[s]) {
      const size_t j = next[c.row]++;
      out_ids[j] = c.id;
      out_scores[j] = c.score;
      if (parents) parents[j] = static_cast<int32_t>(c.row);
    }
  }
  const LoD out_lod{sources, std::move(prefix_offsets)};
  ids_out->set_lod(out_lod);
  scores_out->set_lod(out_lod);
  FL_VLOG(3) << "beam_search: " << num_sources << " sources, " << rows << " prefixes -> " << kept
             << " candidates kept, " << pruned << " sources pruned";
};

}  // namespace

FL_REGISTER_OP(beam_search, op) {
  op.Doc(
        "One step of beam search over LoD prefixes: for each source, the beam_size best candidates of all its "
        "prefixes (an ended prefix only carries itself on), laid out prefix by prefix with a 2-level LoD.")
      .Input("pre_ids",
             "int64, one per prefix: the ids chosen at the previous step ([batch_size, 1] with LoD "
             "[[0, 1, .., batch_size], [0, 1, .., batch_size]] at the first step)")
      .Input("pre_scores", "the accumulated scores of those ids, one per prefix")
      .DispensableInput("ids", "int64 [prefixes, W]: each prefix's candidate ids (absent: the candidate's index)")
      .Input("scores",
             "[prefixes, W] (float32 or float64, scores' LoD at `level` grouping the prefixes by source): the "
             "candidates' accumulated scores, or their probabilities when is_accumulated is false")
      .Output("selected_ids",
              "int64 [kept, 1]: the candidates kept, with the 2-level LoD {prefixes of each "
              "source, kept candidates of each prefix}")
      .Output("selected_scores", "[kept, 1]: their accumulated scores, with the same LoD")
      .DispensableOutput("parent_idx", "int32 [kept]: the prefix (row of scores) each kept candidate extends")
      .RequiredAttr<int32_t>("level", 0, "the LoD level of scores that groups prefixes by source")
      .Min(0)
      .RequiredAttr<int32_t>("beam_size", 1, "how many candidates each source keeps")
      .Min(1)
      .RequiredAttr<int32_t>("end_id", 0, "the id that ends a sequence")
      .Attr<bool>("is_accumulated", true,
                  "scores are accumulated log scores (true), or probabilities to add to pre_scores as logs")
      .SetInferShape(BeamSearchInferShape)
      .KernelDTypeFrom("scores")
      .CPUKernel<float, double>(kBeamSearch)
      .NoGradient();
}

}  // namespace fl
