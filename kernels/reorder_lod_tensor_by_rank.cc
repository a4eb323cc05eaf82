// reorder_lod_tensor_by_rank (Fluid 1.8's reorder_lod_tensor_by_rank_op.cc): X's sequences put in the order of a
// rank table (longest first), as DynamicRNN's static_input and memory(init=..., need_reorder=True) do. A sequence
// is one of X's level-0 sequences (with its finer levels), or one row when X has no LoD. The gradient puts
// Out@GRAD's sequences back in X's order. Kernel-less: rows of any dtype move with memcpy.
#include <cstring>

#include "helpers/lod.h"
#include "helpers/rank_table.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

// X's sequences (rows when it has no LoD), each with its finer LoD lengths and rows.
std::vector<SubLoD> SequencesOf(const ExecutionContext& ctx, const char* slot, const Tensor& x) {
  std::vector<SubLoD> seqs;
  if (x.lod().empty()) {
    const size_t rows = x.rank() ? static_cast<size_t>(x.dims()[0]) : 0;
    seqs.resize(rows);
    for (size_t i = 0; i < rows; ++i) seqs[i].row_begin = i, seqs[i].row_end = i + 1;
    return seqs;
  }
  const LoD& lod = CheckedLoD(ctx, slot);
  seqs.reserve(lod[0].size() - 1);
  for (size_t i = 0; i + 1 < lod[0].size(); ++i) seqs.push_back(SubLoDOf(lod, i, i + 1, 0));
  return seqs;
}

void CheckRanksAll(const ExecutionContext& ctx, const LoDRankTable& table, const std::vector<SubLoD>& seqs,
                   const Tensor& x, const char* slot) {
  FL_ENFORCE(table.items.size() == seqs.size(), ctx.Type(), ": the rank table RankTable '", ctx.InputName("RankTable"),
             "' ranks ", table.items.size(), " sequences, but ", slot, " '", ctx.InputName(slot), "' ", x.dims(),
             " has ", seqs.size(),
             x.lod().empty() ? " rows (no LoD: one sequence per row)" : " sequences at LoD level 0 " + x.LoDString());
}

size_t RowBytes(const Tensor& t) {
  return t.rank() == 0 || t.dims()[0] == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dims()[0]);
}

// dst rows [at, ...) = src rows of `seq`, for each (seq, at) pair, in parallel when the copy is large.
void CopySequences(const Tensor& src, Tensor* dst, const std::vector<SubLoD>& seqs,
                   const std::vector<std::pair<size_t, size_t>>& moves) {
  const size_t row_bytes = RowBytes(src);
  const char* s = src.nbytes() ? static_cast<const char*>(src.raw_data()) : nullptr;
  char* d = dst->nbytes() ? static_cast<char*>(dst->raw_mutable()) : nullptr;
  if (!s || !d) return;
  const int64_t n = static_cast<int64_t>(moves.size());
  const int64_t grain = src.numel() >= 2 * kMinParallelElements ? 1 : n;
  ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const SubLoD& seq = seqs[moves[m].first];
      std::memcpy(d + moves[m].second * row_bytes, s + seq.row_begin * row_bytes,
                  (seq.row_end - seq.row_begin) * row_bytes);
    }
  });
}

void RunReorder(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);
  const Tensor& x = ctx.Input("X");
  const LoDRankTable& table = InputRankTable(ctx);
  const std::vector<SubLoD> seqs = SequencesOf(ctx, "X", x);
  CheckRanksAll(ctx, table, seqs, x, "X");
  LoD lod;
  std::vector<std::pair<size_t, size_t>> moves;  // (X's sequence, its first row in Out)
  size_t at = 0;
  for (const auto& item : table.items) {
    const SubLoD& seq = seqs[item.index];
    AppendLoDLengths(&lod, seq.lengths);
    moves.emplace_back(item.index, at);
    at += seq.row_end - seq.row_begin;
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(x.dims());
  out->mutable_data(ctx.place(), x.dtype());
  CopySequences(x, out, seqs, moves);
  out->set_lod(lod);
}

// X@GRAD: Out@GRAD's sequences (X's, in rank order) back in X's order; X lends the LoD and the row layout.
void RunReorderGrad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  CheckCPUPlace(ctx);
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const LoDRankTable& table = InputRankTable(ctx);
  FL_ENFORCE(dout.dims() == x.dims() && dout.dtype() == x.dtype(), "reorder_lod_tensor_by_rank_grad: Out@GRAD '",
             ctx.InputName("Out@GRAD"), "' is ", DTypeName(dout.dtype()), " ", dout.dims(), ", but X '",
             ctx.InputName("X"), "' is ", DTypeName(x.dtype()), " ", x.dims());
  const std::vector<SubLoD> seqs = SequencesOf(ctx, "X", x);
  CheckRanksAll(ctx, table, seqs, x, "X");
  // Out@GRAD rows [at, ...) of rank position k are X's sequence items[k].index: as (Out@GRAD piece, X row) moves.
  std::vector<SubLoD> pieces(seqs.size());
  std::vector<std::pair<size_t, size_t>> moves;
  size_t at = 0;
  for (size_t k = 0; k < table.items.size(); ++k) {
    const SubLoD& seq = seqs[table.items[k].index];
    pieces[k].row_begin = at;
    pieces[k].row_end = at += seq.row_end - seq.row_begin;
    moves.emplace_back(k, seq.row_begin);
  }
  dx->Resize(x.dims());
  dx->mutable_data(ctx.place(), x.dtype());
  CopySequences(dout, dx, pieces, moves);
  dx->set_lod(x.lod());
}

}  // namespace

FL_REGISTER_OP(reorder_lod_tensor_by_rank, op) {
  op.Doc(
        "Out = X's sequences (level-0 sequences with their finer levels, or rows when X has no LoD) in the order "
        "of the rank table RankTable, longest first; Out's LoD is that of the reordered sequences.")
      .Input("X", "the tensor to reorder: one sequence (or row) per sequence the rank table ranks")
      .Input("RankTable", "the rank table (LOD_RANK_TABLE) giving the order")
      .Output("Out", "X's sequences in rank order")
      .NonDifferentiable({"RankTable"})
      .SetInferShape([](InferShapeContext& ctx) {
        CheckRankTableInput(ctx);
        SameShapeAsInput(ctx);  // the LoD level at build time; the kernel sets the reordered LoD
      })
      .SetRun(RunReorder);
  op.GradOp({"X", "RankTable", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD's sequences put back in X's order (X gives the LoD).")
      .SetRun(RunReorderGrad);
}

}  // namespace fl
