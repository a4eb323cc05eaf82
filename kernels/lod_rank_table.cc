// lod_rank_table: the sequences of one LoD level of X, stably sorted by length, longest first, as (index, length)
// items, plus the coarser levels above it (Fluid 1.8's lod_rank_table_op.cc and framework/lod_rank_table.cc).
// max_sequence_len: the longest length in a rank table, int64 [1]. DynamicRNN ranks its input with them; neither
// has a gradient.
#include <algorithm>

#include "helpers/lod.h"
#include "helpers/rank_table.h"
#include "logging.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(lod_rank_table, op) {
  op.Doc(
        "Out = the sequences of LoD level `level` of X ordered by length, longest first (a stable sort: equal "
        "lengths keep their order), as (index, length) items, with the levels above `level` kept.")
      .Input("X", "a LoDTensor with more than `level` LoD levels (any dtype; only its LoD is read)")
      .Output("Out", "the rank table (LOD_RANK_TABLE)")
      .Attr<int32_t>("level", 0, "the LoD level whose sequences are ranked")
      .Min(0)
      .NoGradient()
      .SetRun([](const ExecutionContext& ctx) {
        const size_t level = static_cast<size_t>(ctx.Attr<int32_t>("level"));
        const LoD& lod = CheckedLoD(ctx, "X", 0, level + 1);
        LoDRankTable table;
        table.coarse_lod.assign(lod.begin(), lod.begin() + level);
        const std::vector<size_t>& offsets = lod[level];
        table.items.reserve(offsets.size() - 1);
        for (size_t i = 0; i + 1 < offsets.size(); ++i) table.items.push_back({i, offsets[i + 1] - offsets[i]});
        std::stable_sort(table.items.begin(), table.items.end(),
                         [](const LoDRankTable::Item& a, const LoDRankTable::Item& b) { return a.length > b.length; });
        FL_VLOG(10) << "lod_rank_table: " << ctx.InputName("X") << " level " << level << ", " << table.items.size()
                    << " sequences, longest " << (table.items.empty() ? 0 : table.items[0].length);
        Variable* out = ctx.OutputVar("Out");
        FL_ENFORCE(!out->IsInitialized() || out->IsRankTable(), "lod_rank_table: output Out variable '",
                   ctx.OutputName("Out"), "' holds a ", out->KindName(), ", not a LoDRankTable");
        *out->GetMutableRankTable() = std::move(table);
      });
}

FL_REGISTER_OP(max_sequence_len, op) {
  op.Doc("Out = the length of the longest sequence of the rank table RankTable (0 when it ranks none), int64 [1].")
      .Input("RankTable", "the rank table (LOD_RANK_TABLE)")
      .Output("Out", "int64 [1]")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        CheckRankTableInput(ctx);
        ctx.SetOutput("Out", DDim{1}, DType::INT64);
      })
      .SetRun([](const ExecutionContext& ctx) {
        const LoDRankTable& table = InputRankTable(ctx);
        const int64_t longest = table.items.empty() ? 0 : static_cast<int64_t>(table.items[0].length);
        ctx.Output("Out")->mutable_data<int64_t>(DDim{1}, Place::CPU())[0] = longest;
      });
}

}  // namespace fl
