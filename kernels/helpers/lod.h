// Reading LoD in sequence kernels. Every sequence op reads its input's offsets through here, so a missing or
// malformed LoD is the same clear error everywhere: the op, the slot, the variable and the offsets named.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

// slot[i]'s LoD, checked: it has at least `min_levels` levels, each well formed (Fluid's CheckLoD), and its last
// level ends at the tensor's row count.
inline const LoD& CheckedLoD(const ExecutionContext& ctx, const char* slot, int i = 0, size_t min_levels = 1) {
  const Tensor& t = ctx.Input(slot, i);
  const LoD& lod = t.lod();
  FL_ENFORCE(lod.size() >= min_levels, ctx.Type(), ": ", slot, " '", ctx.InputName(slot, i), "' ", t.dims(),
             " must be a LoDTensor with at least ", min_levels, " LoD level(s), got ", lod.size(), " (", t.LoDString(),
             "); feed it with fluid.create_lod_tensor or an (array, recursive_seq_lens) pair");
  const std::string problem = LoDProblem(lod, t.rank() ? t.dims()[0] : 0);
  FL_ENFORCE(problem.empty(), ctx.Type(), ": ", slot, " '", ctx.InputName(slot, i), "' ", t.dims(),
             " has an invalid LoD ", t.LoDString(), ": ", problem);
  return lod;
}

// The offsets of level `level` (negative counts from the last level) of slot[i]'s checked LoD.
inline const std::vector<size_t>& SequenceOffsets(const ExecutionContext& ctx, const char* slot, int i = 0,
                                                  int level = -1) {
  const LoD& lod = CheckedLoD(ctx, slot, i, level < 0 ? static_cast<size_t>(-level) : static_cast<size_t>(level) + 1);
  return lod[level < 0 ? lod.size() + level : level];
}

// Throws unless slot a[i] and slot b[j] describe the same sequences at their last LoD level (the same offsets: an
// emission and its labels, or two inputs an op pairs sequence by sequence), naming both variables and their LoD.
inline void CheckSameSequences(const ExecutionContext& ctx, const char* a, const char* b, int i = 0, int j = 0) {
  const std::vector<size_t>& oa = SequenceOffsets(ctx, a, i);
  const std::vector<size_t>& ob = SequenceOffsets(ctx, b, j);
  FL_ENFORCE(oa == ob, ctx.Type(), ": ", a, " '", ctx.InputName(a, i), "' ", ctx.Input(a, i).dims(), " LoD ",
             ctx.Input(a, i).LoDString(), " and ", b, " '", ctx.InputName(b, j), "' ", ctx.Input(b, j).dims(), " LoD ",
             ctx.Input(b, j).LoDString(), " must describe the same sequences (equal last-level offsets)");
}

// Number of sequences described by `offsets`.
inline int64_t SequenceCount(const std::vector<size_t>& offsets) { return static_cast<int64_t>(offsets.size()) - 1; }

// fn(s, begin, end) for each sequence s, rows [begin, end).
template <typename Fn>
void ForEachSequence(const std::vector<size_t>& offsets, Fn fn) {
  for (size_t s = 0; s + 1 < offsets.size(); ++s)
    fn(static_cast<int64_t>(s), static_cast<int64_t>(offsets[s]), static_cast<int64_t>(offsets[s + 1]));
}

// How many slices ParallelForEachSequence cuts these sequences into: 1 (all on the caller) unless the job pays for
// threads, about row_cost elementwise operations per row so that rows * row_cost >= 2 * kMinParallelElements.
inline int SequenceSlices(const std::vector<size_t>& offsets, int64_t row_cost) {
  const int64_t n = SequenceCount(offsets);
  if (n <= 0) return 1;
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, row_cost));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ThreadPool::Instance().Size(), offsets[n] / grain)));
}

// ForEachSequence split over the thread pool: the rows are cut into `parts` equal slices (SequenceSlices; the caller
// sizes any per-slice buffers by the same count) and slice p runs the sequences that start in it, in order (the last
// slice also those starting at the end: trailing empty sequences), as fn(p, s, begin, end). fn must only write what
// its own sequences own, or per-slice partial results (a sum over all rows: one accumulator per slice). One long
// sequence stays in one slice.
template <typename Fn>
void ParallelForEachSequenceSlice(const std::vector<size_t>& offsets, int parts, Fn fn) {
  const int64_t n = SequenceCount(offsets);
  if (n <= 0) return;
  if (parts <= 1) return ForEachSequence(offsets, [&](int64_t s, int64_t b, int64_t e) { fn(0, s, b, e); });
  const size_t* o = offsets.data();
  const int64_t rows = static_cast<int64_t>(o[n]);
  ParallelFor(parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t s0 = std::lower_bound(o, o + n, static_cast<size_t>(rows * p / parts)) - o;
      const int64_t s1 =
          p + 1 == parts ? n : std::lower_bound(o, o + n, static_cast<size_t>(rows * (p + 1) / parts)) - o;
      for (int64_t s = s0; s < s1; ++s)
        fn(static_cast<int>(p), s, static_cast<int64_t>(o[s]), static_cast<int64_t>(o[s + 1]));
    }
  });
}

// ParallelForEachSequence for sequences that write only their own rows: fn(s, begin, end).
template <typename Fn>
void ParallelForEachSequence(const std::vector<size_t>& offsets, int64_t row_cost, Fn fn) {
  ParallelForEachSequenceSlice(offsets, SequenceSlices(offsets, row_cost),
                               [&](int, int64_t s, int64_t b, int64_t e) { fn(s, b, e); });
}

// Level `level` of a valid `lod` (CheckedLoD) as offsets in rows of the tensor (Fluid's ToAbsOffset): entry i of that
// level spans rows [result[i], result[i + 1]). The last level already counts rows; an upper one is mapped down
// through every level below it.
inline std::vector<size_t> AbsoluteOffsets(const LoD& lod, size_t level) {
  std::vector<size_t> out = lod[level];
  for (size_t below = level + 1; below < lod.size(); ++below)
    for (size_t& o : out) o = lod[below][o];
  return out;
}

// `lod` with its last level dropped (what a pooling op leaves: one row per last-level sequence).
inline LoD DropLastLevel(const LoD& lod) { return LoD(lod.begin(), lod.end() - (lod.empty() ? 0 : 1)); }

}  // namespace fl
