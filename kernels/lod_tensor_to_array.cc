// lod_tensor_to_array / array_to_lod_tensor (Fluid 1.8's lod_tensor_to_array_op.cc, array_to_lod_tensor_op.cc):
// DynamicRNN's step inputs and outputs. With a rank table built at LoD level L, entry t of the array holds step t
// of every sequence of level L longer than t, in rank order (longest first): for the last level a step is one row;
// above it a step is a sub-sequence, with its finer LoD levels. array_to_lod_tensor puts the steps back in the
// original order and rebuilds the LoD (the table's coarse levels, level L from its lengths, the entries' finer
// levels). Each is the other's gradient. Kernel-less: rows of any dtype are moved with memcpy, split over the
// thread pool by step (to_array) or by sequence (to_lod_tensor).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "grad_op_maker.h"
#include "helpers/lod.h"
#include "helpers/rank_table.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

struct RowRange {
  size_t begin, end;  // rows of the source
};

bool IsBackward(const ExecutionContext& ctx) {
  return (ctx.Attr<int32_t>("op_role") & static_cast<int>(OpRole::kBackward)) != 0;
}

size_t RowBytes(const Tensor& t) {
  return t.rank() == 0 || t.dims()[0] == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dims()[0]);
}

// The LoD the table was built from, as far as the table knows it: its coarse levels and level L from the lengths.
LoD RankedLoD(const LoDRankTable& table) {
  LoD lod = table.coarse_lod;
  std::vector<size_t> lengths(table.items.size());
  for (const auto& item : table.items) lengths[item.index] = item.length;
  std::vector<size_t> offsets{0};
  for (size_t len : lengths) offsets.push_back(offsets.back() + len);
  lod.push_back(std::move(offsets));
  return lod;
}

// Copies the row ranges `src` of `from` to consecutive rows of `to`.
void CopyRows(const Tensor& from, const std::vector<RowRange>& src, Tensor* to, size_t row_bytes) {
  if (!to->nbytes()) return;
  char* dst = static_cast<char*>(to->raw_mutable());
  const char* base = static_cast<const char*>(from.raw_data());
  for (const RowRange& r : src) {
    const size_t bytes = (r.end - r.begin) * row_bytes;
    std::memcpy(dst, base + r.begin * row_bytes, bytes);
    dst += bytes;
  }
}

// Parallel over `n` jobs when the bytes moved pay for threads.
template <typename F>
void ParallelCopies(size_t n, size_t total_bytes, F f) {
  const int64_t grain = total_bytes >= size_t(2 * kMinParallelElements) * sizeof(float) ? 1 : static_cast<int64_t>(n);
  ParallelFor(static_cast<int64_t>(n), grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(static_cast<size_t>(i));
  });
}

void InferLoDTensorToArray(InferShapeContext& ctx) {
  CheckRankTableInput(ctx);
  DDim d = ctx.InputDim("X");
  if (d.size() > 0) d[0] = -1;  // an entry holds the sequences longer than its step
  ctx.SetOutput("Out", d, ctx.InputDType("X"));
  ctx.SetOutputLoDLevel("Out", std::max(0, ctx.InputLoDLevel("X") - 1));  // Fluid's rule
}

void RunLoDTensorToArray(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);
  const Tensor& x = ctx.Input("X");
  const LoDRankTable& table = InputRankTable(ctx);
  const size_t level = table.coarse_lod.size();
  // A gradient whose LoD an op dropped (the rows are those of the forward LoD tensor) is split by the table's LoD.
  LoD ranked;
  const LoD* checked = nullptr;
  if (x.lod().empty() && IsBackward(ctx)) {
    ranked = RankedLoD(table);
    const std::string problem = LoDProblem(ranked, x.rank() ? x.dims()[0] : 0);
    FL_ENFORCE(problem.empty(), "lod_tensor_to_array: X '", ctx.InputName("X"), "' ", x.dims(),
               " has no LoD and does not fit the rank table's ", LoDString(ranked), ": ", problem);
    checked = &ranked;
  } else {
    checked = &CheckedLoD(ctx, "X", 0, level + 1);
  }
  const LoD& lod = *checked;
  CheckRankTableFits(ctx, table, lod, level, "X");
  const std::vector<size_t> active = ActiveCounts(table);
  const size_t steps = active.size(), row_bytes = RowBytes(x);
  std::vector<std::vector<RowRange>> ranges(steps);
  TensorList out(steps);
  for (size_t t = 0; t < steps; ++t) {
    LoD entry_lod;
    size_t rows = 0;
    ranges[t].reserve(active[t]);
    for (size_t k = 0; k < active[t]; ++k) {
      const size_t step = lod[level][table.items[k].index] + t;
      SubLoD sub = SubLoDOf(lod, step, step + 1, level + 1);
      AppendLoDLengths(&entry_lod, sub.lengths);
      ranges[t].push_back({sub.row_begin, sub.row_end});
      rows += sub.row_end - sub.row_begin;
    }
    DDim dims = x.dims();
    dims[0] = static_cast<int64_t>(rows);
    out[t].Resize(dims);
    out[t].mutable_data(ctx.place(), x.dtype());
    out[t].set_lod(entry_lod);
  }
  const size_t total = x.rank() ? static_cast<size_t>(x.dims()[0]) * row_bytes : 0;
  ParallelCopies(steps, total, [&](size_t t) { CopyRows(x, ranges[t], &out[t], row_bytes); });
  OutputArray(ctx, "Out") = std::move(out);
}

void InferArrayToLoDTensor(InferShapeContext& ctx) {
  CheckArrayInput(ctx, "X");
  CheckRankTableInput(ctx);
  DDim d = ctx.InputDim("X");
  if (d.size() > 0) d[0] = -1;
  ctx.SetOutput("Out", d, ctx.InputDType("X"));
  ctx.SetOutputLoDLevel("Out", ctx.InputLoDLevel("X") + 1);  // Fluid's rule
}

void RunArrayToLoDTensor(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);
  const TensorList& x = InputArray(ctx, "X");
  const LoDRankTable& table = InputRankTable(ctx);
  const std::vector<size_t> active = ActiveCounts(table);
  const size_t steps = active.size();
  const bool backward = IsBackward(ctx);
  auto entry_name = [&](size_t t) { return Str("entry ", t, " of X '", ctx.InputName("X"), "'"); };
  FL_ENFORCE(x.size() >= steps, "array_to_lod_tensor: X '", ctx.InputName("X"), "' has ", x.size(),
             " entries, but the rank table RankTable '", ctx.InputName("RankTable"), "' has sequences of ", steps,
             " steps");
  const Tensor* proto = nullptr;  // the entry giving the row shape, dtype and LoD depth
  for (const Tensor& e : x)
    if (e.IsInitialized() && (!proto || (proto->numel() == 0 && e.numel() > 0))) proto = &e;
  FL_ENFORCE(proto != nullptr, "array_to_lod_tensor: X '", ctx.InputName("X"), "' has ", x.size(),
             " entries and none was written: there is no entry to join");
  // Each step's entry holds one element per sequence longer than the step: a row, or a sub-sequence (its LoD).
  std::vector<const Tensor*> entries(steps, nullptr);
  for (size_t t = 0; t < steps; ++t) {
    const Tensor& e = x[t];
    if (!e.IsInitialized()) {
      // A gradient step the loss never reached is zeros (of one row per element).
      FL_ENFORCE(backward && proto->lod().empty(), "array_to_lod_tensor: ", entry_name(t),
                 " was never written, but the rank table has ", active[t], " sequences longer than ", t);
      continue;
    }
    bool same_rows = e.rank() >= 1 && e.rank() == proto->rank();
    for (int d = 1; same_rows && d < e.rank(); ++d) same_rows = e.dims()[d] == proto->dims()[d];
    FL_ENFORCE(same_rows && e.dtype() == proto->dtype() && e.lod().size() == proto->lod().size(),
               "array_to_lod_tensor: ", entry_name(t), " is ", DTypeName(e.dtype()), " ", e.dims(), " with LoD ",
               e.LoDString(), ", unlike entry ", proto - x.data(), ": ", DTypeName(proto->dtype()), " ", proto->dims(),
               " with LoD ", proto->LoDString(), " (entries differ in dim 0 only)");
    const size_t elements = e.lod().empty() ? static_cast<size_t>(e.dims()[0]) : e.lod()[0].size() - 1;
    FL_ENFORCE(elements == active[t], "array_to_lod_tensor: ", entry_name(t), " ", e.dims(), " LoD ", e.LoDString(),
               " holds ", elements, " ", e.lod().empty() ? "rows" : "sequences", ", but the rank table RankTable '",
               ctx.InputName("RankTable"), "' has ", active[t], " sequences longer than ", t);
    if (!e.lod().empty()) {
      const std::string problem = LoDProblem(e.lod(), e.dims()[0]);
      FL_ENFORCE(problem.empty(), "array_to_lod_tensor: ", entry_name(t), " ", e.dims(), " has an invalid LoD ",
                 e.LoDString(), ": ", problem);
    }
    entries[t] = &e;
  }
  // Sequence j (in the original order) is rank position rank_of[j]; it is element rank_of[j] of its steps.
  std::vector<size_t> rank_of(table.items.size());
  for (size_t r = 0; r < table.items.size(); ++r) rank_of[table.items[r].index] = r;
  LoD lod = RankedLoD(table);
  LoD fine;  // the entries' levels, below level L
  // Out's rows in order, as pieces: sequence j's steps t, each rows of entry t (pieces[first_piece[j]...]).
  struct Piece {
    size_t step;
    RowRange rows;
  };
  std::vector<Piece> pieces;
  std::vector<size_t> first_piece(rank_of.size() + 1, 0), first_row(rank_of.size() + 1, 0);
  for (size_t j = 0; j < rank_of.size(); ++j) {
    const size_t r = rank_of[j];
    size_t rows = 0;
    for (size_t t = 0; t < table.items[r].length; ++t) {
      RowRange range{r, r + 1};  // a row; a step never written (a gradient) gives a row of zeros
      if (entries[t] && !entries[t]->lod().empty()) {
        SubLoD sub = SubLoDOf(entries[t]->lod(), r, r + 1, 0);
        AppendLoDLengths(&fine, sub.lengths);
        range = {sub.row_begin, sub.row_end};
      }
      pieces.push_back({t, range});
      rows += range.end - range.begin;
    }
    first_piece[j + 1] = pieces.size();
    first_row[j + 1] = first_row[j] + rows;
  }
  lod.insert(lod.end(), fine.begin(), fine.end());
  Tensor* out = ctx.Output("Out");
  DDim dims = proto->dims();
  dims[0] = static_cast<int64_t>(first_row.back());
  out->Resize(dims);
  char* dst = static_cast<char*>(out->mutable_data(ctx.place(), proto->dtype()));
  out->set_lod(lod);
  const size_t row_bytes = RowBytes(*out);
  ParallelCopies(rank_of.size(), out->nbytes(), [&](size_t j) {
    char* d = dst + first_row[j] * row_bytes;
    for (size_t k = first_piece[j]; k < first_piece[j + 1]; ++k) {
      const Piece& p = pieces[k];
      const size_t bytes = (p.rows.end - p.rows.begin) * row_bytes;
      if (const Tensor* e = entries[p.step])
        std::memcpy(d, static_cast<const char*>(e->raw_data()) + p.rows.begin * row_bytes, bytes);
      else std::memset(d, 0, bytes);
      d += bytes;
    }
  });
}

}  // namespace

FL_REGISTER_OP(lod_tensor_to_array, op) {
  op.Doc(
        "Out = X split into time steps by the rank table RankTable (built at LoD level L): entry t holds step t of "
        "each sequence of level L longer than t, longest first (a row for the last level, else a sub-sequence with "
        "its finer LoD).")
      .Input("X", "a LoDTensor with the LoD the rank table was built from (any dtype)")
      .Input("RankTable", "the rank table (LOD_RANK_TABLE) of X's level L")
      .Output("Out", "the steps (LOD_TENSOR_ARRAY), one entry per step of the longest sequence")
      .NonDifferentiable({"RankTable"})
      .SetInferShape(InferLoDTensorToArray)
      .SetRun(RunLoDTensorToArray)
      .Grad([](GradOpMaker& g) {  // X@GRAD = array_to_lod_tensor(Out@GRAD), as Fluid
        OpDesc& op = g.NewOp("array_to_lod_tensor");
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetInput("RankTable", g.Input("RankTable"));
        op.SetOutput("Out", g.InputGrad("X"));
      });
}

FL_REGISTER_OP(array_to_lod_tensor, op) {
  op.Doc(
        "Out = the steps of the LoDTensorArray X (as lod_tensor_to_array made them) joined back into one LoDTensor "
        "in the original sequence order, its LoD rebuilt from the rank table and the entries' LoD.")
      .Input("X", "the steps (LOD_TENSOR_ARRAY): entry t holds one row or sub-sequence per sequence longer than t")
      .Input("RankTable", "the rank table (LOD_RANK_TABLE) the steps were ordered by")
      .Output("Out", "the joined LoDTensor")
      .NonDifferentiable({"RankTable"})
      .SetInferShape(InferArrayToLoDTensor)
      .SetRun(RunArrayToLoDTensor)
      .Grad([](GradOpMaker& g) {  // X@GRAD = lod_tensor_to_array(Out@GRAD), as Fluid
        OpDesc& op = g.NewOp("lod_tensor_to_array");
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetInput("RankTable", g.Input("RankTable"));
        op.SetOutput("Out", g.InputGrad("X"));
      });
}

}  // namespace fl
