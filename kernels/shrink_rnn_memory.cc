// shrink_rnn_memory (layers.shrink_memory; Fluid 1.8's shrink_rnn_memory_op.cc): DynamicRNN's memory at step I
// keeps only the rows of the sequences still running. Its rows are in rank order (longest first), so the k
// sequences longer than I are the first k rows (or, when X holds sequences, the first k of its level-0 sequences).
// The gradient is Out@GRAD in those rows and zeros in the dropped ones.
#include <algorithm>
#include <cstring>

#include "helpers/lod.h"
#include "helpers/rank_table.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

void InferShrinkRNNMemory(InferShapeContext& ctx) {
  CheckArrayIndexInput(ctx);
  CheckRankTableInput(ctx);
  DDim d = ctx.InputDim("X");
  if (d.size() > 0) d[0] = -1;  // the rows of the sequences longer than I
  ctx.SetOutput("Out", d, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

void RunShrinkRNNMemory(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const int64_t step = ArrayIndexInput(ctx);
  const LoDRankTable& table = InputRankTable(ctx);
  const auto& items = table.items;
  // items are sorted by length, longest first: the first `keep` are longer than step
  const size_t keep = std::lower_bound(items.begin(), items.end(), static_cast<size_t>(step),
                                       [](const LoDRankTable::Item& a, size_t s) { return a.length > s; }) -
                      items.begin();
  FL_ENFORCE(x.rank() >= 1, "shrink_rnn_memory: X '", ctx.InputName("X"), "' ", x.dims(), " has no rows");
  size_t rows = keep;
  LoD lod;
  if (!x.lod().empty()) {
    const LoD& x_lod = CheckedLoD(ctx, "X");
    FL_ENFORCE(x_lod[0].size() - 1 >= keep, "shrink_rnn_memory: X '", ctx.InputName("X"), "' (LoD ", x.LoDString(),
               ") has ", x_lod[0].size() - 1, " sequences, but the rank table RankTable '", ctx.InputName("RankTable"),
               "' has ", keep, " longer than step ", step);
    const SubLoD sub = SubLoDOf(x_lod, 0, keep, 0);
    AppendLoDLengths(&lod, sub.lengths);
    rows = sub.row_end;
  } else {
    FL_ENFORCE(static_cast<size_t>(x.dims()[0]) >= keep, "shrink_rnn_memory: X '", ctx.InputName("X"), "' ", x.dims(),
               " has ", x.dims()[0], " rows, but the rank table RankTable '", ctx.InputName("RankTable"), "' has ",
               keep, " sequences longer than step ", step);
  }
  Tensor* out = ctx.Output("Out");
  DDim dims = x.dims();
  dims[0] = static_cast<int64_t>(rows);
  out->Resize(dims);
  void* dst = out->mutable_data(ctx.place(), x.dtype());
  if (out->nbytes()) MemCopy(ctx.place(), dst, x.place(), x.raw_data(), out->nbytes());
  out->set_lod(lod);
}

void RunShrinkRNNMemoryGrad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  CheckCPUPlace(ctx);
  const Tensor& x = ctx.Input("X");
  const Tensor* dout = ctx.HasInput("Out@GRAD") ? ctx.InputOrNull("Out@GRAD") : nullptr;
  dx->Resize(x.dims());
  char* dst = static_cast<char*>(dx->mutable_data(ctx.place(), x.dtype()));
  size_t copied = 0;
  if (dout) {
    bool fits = dout->rank() == x.rank() && dout->dims()[0] <= x.dims()[0] && dout->dtype() == x.dtype();
    for (int d = 1; fits && d < x.rank(); ++d) fits = dout->dims()[d] == x.dims()[d];
    FL_ENFORCE(fits, "shrink_rnn_memory_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' is ", DTypeName(dout->dtype()),
               " ", dout->dims(), ", which is not the first rows of X '", ctx.InputName("X"), "' ",
               DTypeName(x.dtype()), " ", x.dims());
    copied = dout->nbytes();
    if (copied) MemCopy(ctx.place(), dst, dout->place(), dout->raw_data(), copied);
  }
  std::memset(dst + copied, 0, dx->nbytes() - copied);  // the rows of the sequences that had ended
  dx->set_lod(x.lod());
}

}  // namespace

FL_REGISTER_OP(shrink_rnn_memory, op) {
  op.Doc(
        "Out = the first rows of X that belong to the sequences of the rank table longer than I (X's rows are in "
        "rank order; with a LoD, its first level-0 sequences): DynamicRNN's memory for step I.")
      .Input("X", "the memory, one row (or one level-0 sequence) per running sequence, in rank order")
      .Input("I", "the step, an int64 (or int32) tensor of one element, >= 0")
      .Input("RankTable", "the rank table (LOD_RANK_TABLE) of the sequences")
      .Output("Out", "the rows of the sequences longer than I")
      .NonDifferentiable({"I", "RankTable"})
      .SetInferShape(InferShrinkRNNMemory)
      .SetRun(RunShrinkRNNMemory);
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD in X's first rows, zeros in the rest (the sequences that had ended).")
      .Optional({"Out@GRAD"})
      .SetRun(RunShrinkRNNMemoryGrad);
}

}  // namespace fl
