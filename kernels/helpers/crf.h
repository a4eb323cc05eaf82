// What the tagging ops share (linear_chain_crf, crf_decoding, chunk_eval): where each sequence's rows are in either
// of Fluid's two input forms, the checks of their shapes and tag ids, and the layout of the CRF transition matrix.
//
// Two forms, as in Fluid 1.6+: a LoDTensor [T, ...] whose last LoD level marks the sequences, or a padded tensor
// [N, L, ...] with an int64 Length [N] (or [N, 1]) giving each row's true length. Either way a kernel sees the data
// as [rows, width] and each sequence as a run of rows (SequenceSpans).
#pragma once
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "lod.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

// Sequence s is rows [begin[s], begin[s] + length[s]) of the [rows, width] view of the data.
struct SequenceSpans {
  std::vector<int64_t> begin, length;
  // LoD form with more than one level: the levels above the sequences, the LoD of a one-row-per-sequence output.
  LoD upper;
  bool padded = false;
  int64_t size() const { return static_cast<int64_t>(begin.size()); }
  int64_t rows() const {  // rows covered by sequences
    int64_t n = 0;
    for (int64_t l : length) n += l;
    return n;
  }
};

// LoD form: the sequences of `lod_slot`'s last LoD level (checked: lod.h). `paired_slot` (null for none) is an input
// read row by row with it: when it has a LoD too (or `paired_needs_lod`), both must describe the same sequences.
inline SequenceSpans LoDSpans(const ExecutionContext& ctx, const char* lod_slot, const char* paired_slot,
                              bool paired_needs_lod) {
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, lod_slot);
  if (paired_slot && (paired_needs_lod || !ctx.Input(paired_slot).lod().empty()))
    CheckSameSequences(ctx, lod_slot, paired_slot);
  SequenceSpans spans;
  spans.upper = DropLastLevel(ctx.Input(lod_slot).lod());
  ForEachSequence(offsets, [&](int64_t, int64_t b, int64_t e) {
    spans.begin.push_back(b);
    spans.length.push_back(e - b);
  });
  return spans;
}

// Padded form: `data_slot` is [N, L, ...] and `length_slot` int64 with N entries, each in [0, L]; sequence s is rows
// [s * L, s * L + Length[s]).
inline SequenceSpans PaddedSpans(const ExecutionContext& ctx, const char* data_slot, const char* length_slot) {
  const Tensor& data = ctx.Input(data_slot);
  const Tensor& len = ctx.Input(length_slot);
  const int64_t n = data.dims()[0], max_len = data.dims()[1];
  FL_ENFORCE(len.numel() == n, ctx.Type(), ": ", length_slot, " '", ctx.InputName(length_slot), "' ", len.dims(),
             " must hold one length per row of ", data_slot, " '", ctx.InputName(data_slot), "' ", data.dims(), " (", n,
             "), got ", len.numel());
  const int64_t* l = len.data<int64_t>();
  SequenceSpans spans;
  spans.padded = true;
  for (int64_t s = 0; s < n; ++s) {
    FL_ENFORCE(l[s] >= 0 && l[s] <= max_len, ctx.Type(), ": ", length_slot, " '", ctx.InputName(length_slot), "'[", s,
               "] = ", l[s], " is not a length in [0, ", max_len, "] (the padded length of ", data_slot, " '",
               ctx.InputName(data_slot), "' ", data.dims(), ")");
    spans.begin.push_back(s * max_len);
    spans.length.push_back(l[s]);
  }
  return spans;
}

// Throws unless every id of `slot` inside the sequences lies in [0, bound]: the op, the variable, the sequence, the
// position and the value named. `what` says what the ids index ("a tag of Transition [6, 4]").
inline void CheckIdsInRange(const ExecutionContext& ctx, const char* slot, const SequenceSpans& spans, int64_t bound,
                            const std::string& what) {
  const int64_t* ids = ctx.Input(slot).data<int64_t>();
  for (int64_t s = 0; s < spans.size(); ++s)
    for (int64_t k = 0; k < spans.length[s]; ++k) {
      const int64_t v = ids[spans.begin[s] + k];
      FL_ENFORCE(v >= 0 && v <= bound, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' holds ", v,
                 " at position ", k, " of sequence ", s, " (row ", spans.begin[s] + k, "); it must be in [0, ", bound,
                 "], ", what);
    }
}

// How many parts to split the sequences into for ForEachSpanInParts: one per thread when each part gets at least
// kMinParallelElements of work (`row_cost` multiply-adds per row: tags * tags for the CRF recursions), else 1.
inline int SpanParts(const SequenceSpans& spans, int64_t row_cost) {
  const int64_t by_work = spans.rows() * row_cost / kMinParallelElements;
  const int64_t most = std::min<int64_t>(ThreadPool::Instance().Size(), spans.size());
  return static_cast<int>(std::max<int64_t>(1, std::min(by_work, most)));
}

// fn(part, s) for each sequence s, the sequences split into `parts` runs of consecutive sequences that run in
// parallel; a part's sequences run in order on one thread, so a part may add into a buffer of its own.
template <typename Fn>
void ForEachSpanInParts(const SequenceSpans& spans, int parts, Fn fn) {
  const int64_t n = spans.size();
  ParallelFor(parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p)
      for (int64_t s = n * p / parts; s < n * (p + 1) / parts; ++s) fn(static_cast<int>(p), s);
  });
}

// ------------------------------------------------------------------ shapes

// The checks linear_chain_crf and crf_decoding make of Emission, Transition, Label (when given) and Length (when
// given: the padded form), with -1 (unknown at build time) matching anything. Returns the tag count D (or -1).
// Emission [T, D] (LoD form) or [N, L, D] (padded); Transition [D + 2, D]; Label [T] or [T, 1], or [N, L] or
// [N, L, 1]; Length int64.
inline int64_t CheckCrfInputs(InferShapeContext& ctx) {
  const bool padded = ctx.HasInput("Length");
  const DDim e = ctx.InputDim("Emission");
  const DDim w = ctx.InputDim("Transition");
  const int rank = padded ? 3 : 2;
  FL_ENFORCE(e.size() == rank, ctx.Type(), ": ", ctx.Describe("Emission"), " must have rank ", rank,
             padded ? " [N, L, D] (the padded form: Length is given)" : " [T, D] (a LoDTensor: no Length is given)");
  const DType et = ctx.InputDType("Emission");
  FL_ENFORCE(et == DType::FP32 || et == DType::FP64 || et == DType::UNDEFINED, ctx.Type(), ": ",
             ctx.Describe("Emission"), " must be float32 or float64, got ", DTypeName(et));
  ctx.EnforceSameDType("Emission", "Transition");
  const int64_t tags = e[rank - 1];
  FL_ENFORCE(tags != 0, ctx.Type(), ": ", ctx.Describe("Emission"), " must have at least one tag (its last dim)");
  FL_ENFORCE(w.size() == 2, ctx.Type(), ": ", ctx.Describe("Transition"), " must have rank 2 [D + 2, D]");
  FL_ENFORCE(w[0] < 0 || w[1] < 0 || w[0] == w[1] + 2, ctx.Type(), ": ", ctx.Describe("Transition"),
             " must be [D + 2, D] (start weights, end weights, then D rows of transitions)");
  FL_ENFORCE(tags < 0 || w[1] < 0 || tags == w[1], ctx.Type(), ": ", ctx.Describe("Emission"), " has ", tags,
             " tags but ", ctx.Describe("Transition"), " is for ", w[1]);
  if (ctx.HasInput("Label")) {
    const DDim l = ctx.InputDim("Label");
    const bool ok = l.size() == rank - 1 || (l.size() == rank && (l[rank - 1] == 1 || l[rank - 1] < 0));
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe("Label"), " must be ",
               padded ? "[N, L] or [N, L, 1]" : "[T] or [T, 1]", " for ", ctx.Describe("Emission"));
    for (int d = 0; d < rank - 1; ++d)
      FL_ENFORCE(e[d] < 0 || l[d] < 0 || e[d] == l[d], ctx.Type(), ": ", ctx.Describe("Label"), " and ",
                 ctx.Describe("Emission"), " must have the same ", d == 0 ? "number of rows" : "padded length");
    const DType lt = ctx.InputDType("Label");
    FL_ENFORCE(lt == DType::INT64 || lt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Label"),
               " must be int64, got ", DTypeName(lt));
  }
  if (padded) {
    const DDim n = ctx.InputDim("Length");
    FL_ENFORCE(n.size() == 1 || (n.size() == 2 && (n[1] == 1 || n[1] < 0)), ctx.Type(), ": ", ctx.Describe("Length"),
               " must be [N] or [N, 1]");
    FL_ENFORCE(n[0] < 0 || e[0] < 0 || n[0] == e[0], ctx.Type(), ": ", ctx.Describe("Length"),
               " must hold one length per row of ", ctx.Describe("Emission"));
    const DType nt = ctx.InputDType("Length");
    FL_ENFORCE(nt == DType::INT64 || nt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Length"),
               " must be int64, got ", DTypeName(nt));
  }
  return tags;
}

// ------------------------------------------------------------------ the transition matrix

// Fluid's CRF transition matrix [D + 2, D]: row 0 the start weights, row 1 the end weights, row 2 + j the weights of
// moving from tag j to each tag i (element (j + 2) * D + i). The same layout holds for its exponentials.
template <typename T>
struct Transitions {
  const T* w;
  int64_t tags;
  const T* start() const { return w; }
  const T* end() const { return w + tags; }
  const T* from(int64_t j) const { return w + (j + 2) * tags; }
  const T* matrix() const { return from(0); }  // the D x D transitions, row j = from(j)
};

// The recursions below are row vector x matrix products over the D x D transitions (sums for the forward and
// backward vectors, max-plus for Viterbi). They sweep the matrix rows while a tile of 4 AVX2 registers of outputs
// (GCC vector types, as in moments.h) stays in registers: each step is one contiguous load and 4 independent
// updates, so neither memory traffic nor a dependency chain limits it (a per-element loop that loads and stores
// its outputs on every row ran 1.2-2x slower at D = 59, one register per sweep 1.6x). The matrix is copied once
// per kernel call with its rows padded to whole tiles, so every tile is full.
template <typename T>
struct TileMatrix {
  typedef T V __attribute__((vector_size(32)));
  static constexpr int64_t kLanes = 32 / sizeof(T), kTile = 4 * kLanes;
  int64_t d, stride;
  std::vector<T> data;
  // Element (j, i) = m[j * row_step + i * col_step] for i, j in [0, d) (row_step 1, col_step d: the transpose); the
  // padding columns hold `pad`.
  TileMatrix(const T* m, int64_t d, int64_t row_step, int64_t col_step, T pad)
      : d(d), stride((d + kTile - 1) / kTile * kTile), data(d * stride, pad) {
    for (int64_t j = 0; j < d; ++j)
      for (int64_t i = 0; i < d; ++i) data[j * stride + i] = m[j * row_step + i * col_step];
  }
  const T* row(int64_t j) const { return data.data() + j * stride; }
  // Stores the outputs i0 .. i0 + kTile of a tile (fewer at the end of the row).
  template <typename U, typename VU>
  void Store(const VU* tile, U* out, int64_t i0) const {
    if (i0 + kTile <= d) {
      std::memcpy(out + i0, tile, sizeof(VU) * 4);
    } else {
      U tmp[kTile];
      std::memcpy(tmp, tile, sizeof(VU) * 4);
      std::copy(tmp, tmp + (d - i0), out + i0);
    }
  }
};

// out[i] = sum_j v[j] * m(j, i) for i in [0, d): the row vector v times the matrix.
template <typename T>
void VectorTimesMatrix(const T* __restrict v, const TileMatrix<T>& m, T* __restrict out) {
  typedef typename TileMatrix<T>::V V;
  constexpr int64_t L = TileMatrix<T>::kLanes;
  for (int64_t i0 = 0; i0 < m.d; i0 += TileMatrix<T>::kTile) {
    V acc[4] = {};
    for (int64_t j = 0; j < m.d; ++j) {
      const T vj = v[j];
      const T* r = m.row(j) + i0;
      for (int q = 0; q < 4; ++q) {
        V x;
        std::memcpy(&x, r + q * L, sizeof(V));
        acc[q] += vj * x;
      }
    }
    m.Store(acc, out, i0);
  }
}

// out[i] = max_j v[j] + m(j, i) and arg[i] = the first j that attains it (the max-plus product of Viterbi; strict
// comparisons from T's lowest value, as in Fluid, so ties keep the smaller j).
template <typename T>
void VectorMaxPlusMatrix(const T* __restrict v, const TileMatrix<T>& m, T* __restrict out, int32_t* __restrict arg) {
  typedef typename TileMatrix<T>::V V;
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;  // a comparison's lanes: T's width
  typedef I VI __attribute__((vector_size(32)));
  constexpr int64_t L = TileMatrix<T>::kLanes;
  for (int64_t i0 = 0; i0 < m.d; i0 += TileMatrix<T>::kTile) {
    V best[4];
    VI at[4];
    for (int q = 0; q < 4; ++q) {
      best[q] = V{} + std::numeric_limits<T>::lowest();
      at[q] = VI{};
    }
    for (int64_t j = 0; j < m.d; ++j) {
      const T vj = v[j];
      const VI jv = VI{} + static_cast<I>(j);
      const T* r = m.row(j) + i0;
      for (int q = 0; q < 4; ++q) {
        V x;
        std::memcpy(&x, r + q * L, sizeof(V));
        const V s = vj + x;
        const VI better = s > best[q];  // all ones where s wins
        best[q] = (V)(((VI)s & better) | ((VI)best[q] & ~better));
        at[q] = (jv & better) | (at[q] & ~better);
      }
    }
    m.Store(best, out, i0);
    I args[TileMatrix<T>::kTile];
    std::memcpy(args, at, sizeof(at));
    for (int64_t l = 0; l < TileMatrix<T>::kTile && i0 + l < m.d; ++l) arg[i0 + l] = static_cast<int32_t>(args[l]);
  }
}

}  // namespace fl
