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

// ForEachSequence split over the thread pool when the job pays for it (about row_cost elementwise operations per
// row, so rows * row_cost >= 2 * kMinParallelElements): the rows are cut into equal slices and each slice runs the
// sequences that start in it, in order (the last slice also those starting at the end: trailing empty sequences).
// fn must only write what its own sequences own. One long sequence stays on one thread.
template <typename Fn>
void ParallelForEachSequence(const std::vector<size_t>& offsets, int64_t row_cost, Fn fn) {
  const int64_t n = SequenceCount(offsets);
  if (n <= 0) return;
  const int64_t rows = static_cast<int64_t>(offsets[n]);
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, row_cost));
  if (rows < 2 * grain) return ForEachSequence(offsets, fn);
  const size_t* o = offsets.data();
  ParallelFor(rows, grain, [&](int64_t b, int64_t e) {
    const int64_t s0 = std::lower_bound(o, o + n, static_cast<size_t>(b)) - o;
    const int64_t s1 = e == rows ? n : std::lower_bound(o, o + n, static_cast<size_t>(e)) - o;
    for (int64_t s = s0; s < s1; ++s) fn(s, static_cast<int64_t>(o[s]), static_cast<int64_t>(o[s + 1]));
  });
}

// `lod` with its last level dropped (what a pooling op leaves: one row per last-level sequence).
inline LoD DropLastLevel(const LoD& lod) { return LoD(lod.begin(), lod.end() - (lod.empty() ? 0 : 1)); }

}  // namespace fl
