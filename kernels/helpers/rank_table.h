// LoD rank tables (LOD_RANK_TABLE, built by lod_rank_table) and the sub-LoD walks of the ops that split a LoD
// tensor into time steps by one (lod_tensor_to_array, array_to_lod_tensor, shrink_rnn_memory,
// reorder_lod_tensor_by_rank; DynamicRNN is built from them).
#pragma once
#include <cstddef>
#include <vector>

#include "op_context.h"

namespace fl {

// The rank table input `slot` holds, or an error naming the op, the slot, the variable and what it holds.
inline const LoDRankTable& InputRankTable(const ExecutionContext& ctx, const char* slot = "RankTable") {
  const Variable* v = ctx.InputVar(slot);
  const LoDRankTable* t = v->GetRankTable();
  FL_ENFORCE(t != nullptr, ctx.Type(), ": input ", slot, " variable '", ctx.InputName(slot), "' holds ",
             v->IsInitialized() ? v->KindName() : "nothing", ", not a LoDRankTable (made by layers.lod_rank_table)");
  return *t;
}

// Build time: input `slot` is declared a LOD_RANK_TABLE.
inline void CheckRankTableInput(InferShapeContext& ctx, const char* slot = "RankTable") {
  const VarKind k = ctx.InputKind(slot);
  FL_ENFORCE(k == VarKind::LOD_RANK_TABLE, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' is a ", VarKindName(k),
             " variable, not a LOD_RANK_TABLE (layers.lod_rank_table)");
}

// The sequences a rank table ranks: how many have a length > t, for each t < max length (items are sorted by
// length, longest first). active[t] rows of step t are the first active[t] items.
inline std::vector<size_t> ActiveCounts(const LoDRankTable& table) {
  const size_t steps = table.items.empty() ? 0 : table.items[0].length;
  std::vector<size_t> active(steps, 0);
  for (const auto& item : table.items)
    for (size_t t = 0; t < item.length && t < steps; ++t) ++active[t];
  return active;
}

// Fluid's GetSubLoDAndAbsoluteOffset: entries [begin, end) of LoD level `level` (rows when level == lod.size())
// seen down to the rows: the lengths of every finer level (one vector per level, in entries of the next), and the
// rows they span.
struct SubLoD {
  LoD lengths;  // levels level..lod.size()-1, as lengths
  size_t row_begin = 0, row_end = 0;
};
inline SubLoD SubLoDOf(const LoD& lod, size_t begin, size_t end, size_t level) {
  SubLoD s;
  for (size_t l = level; l < lod.size(); ++l) {
    const std::vector<size_t>& offsets = lod[l];
    std::vector<size_t> lengths;
    lengths.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) lengths.push_back(offsets[i + 1] - offsets[i]);
    s.lengths.push_back(std::move(lengths));
    begin = offsets[begin];
    end = offsets[end];
  }
  s.row_begin = begin;
  s.row_end = end;
  return s;
}

// Fluid's AppendLoD: appends per-level lengths to a LoD held as offsets (an empty one gets the levels).
inline void AppendLoDLengths(LoD* offsets, const LoD& lengths) {
  if (offsets->empty()) offsets->assign(lengths.size(), std::vector<size_t>{0});
  FL_ENFORCE(offsets->size() == lengths.size(), "cannot append ", lengths.size(), " LoD levels to a LoD of ",
             offsets->size(), " levels");
  for (size_t l = 0; l < lengths.size(); ++l) {
    std::vector<size_t>& level = (*offsets)[l];
    for (size_t len : lengths[l]) level.push_back(level.back() + len);
  }
}

// Throws unless `table` ranks the sequences of level `level` of `lod` (the one it was built from, or one with the
// same sequence lengths): as many items as sequences, each with that sequence's length.
inline void CheckRankTableFits(const ExecutionContext& ctx, const LoDRankTable& table, const LoD& lod, size_t level,
                               const char* slot) {
  const std::vector<size_t>& offsets = lod[level];
  const size_t n = offsets.size() - 1;
  FL_ENFORCE(table.items.size() == n, ctx.Type(), ": the rank table RankTable '", ctx.InputName("RankTable"),
             "' ranks ", table.items.size(), " sequences, but ", slot, " '", ctx.InputName(slot), "' has ", n,
             " at LoD level ", level, " (", LoDString(lod), ")");
  for (const auto& item : table.items)
    FL_ENFORCE(item.index < n && offsets[item.index + 1] - offsets[item.index] == item.length, ctx.Type(),
               ": the rank table RankTable '", ctx.InputName("RankTable"), "' gives sequence ", item.index, " length ",
               item.length, ", but in ", slot, " '", ctx.InputName(slot), "' (LoD ", LoDString(lod), ") it has ",
               item.index < n ? offsets[item.index + 1] - offsets[item.index] : 0);
}

}  // namespace fl
