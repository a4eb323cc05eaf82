// split_lod_tensor / merge_lod_tensor (Fluid 1.8's split_lod_tensor_op.cc, merge_lod_tensor_op.cc): IfElse's
// row-wise routing, each op the gradient of the other.
//
// Both move whole items: the sequences of LoD level `level` of the split tensor (with the levels below them), or
// its rows when it has no such level (Fluid's GetSubLoDAndAbsoluteOffset). Mask is a bool [N, 1], one entry per
// item.
//   split_lod_tensor: the items whose mask is true, in order, to OutTrue, the others to OutFalse; each output's
//     LoD is the selected items' levels from `level` down (the levels above `level` are dropped).
//   merge_lod_tensor: the inverse: item i of Out is the next item of InTrue if mask[i] else of InFalse (their items
//     are their level-0 sequences, or rows); Out's LoD is X's first `level` levels above the merged ones.
// Only the inputs the mask sends rows to are read: the branch of an IfElse that no row went to did not run, and its
// output is not this run's. Each contiguous run of rows is one memcpy (helpers/row_runs.h).
#include <string>
#include <utility>
#include <vector>

#include "grad_op_maker.h"
#include "helpers/lod.h"
#include "helpers/row_runs.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

// Items of a tensor with `lod` and `rows` rows at `level`: its sequences there, or its rows past its last level.
int64_t ItemCount(const LoD& lod, size_t level, int64_t rows) {
  return level < lod.size() ? static_cast<int64_t>(lod[level].size()) - 1 : rows;
}

const char* ItemWord(const LoD& lod, size_t level) { return level < lod.size() ? "sequences" : "rows"; }

// Whether a LoD built by AppendItem got any item (a level of more than its starting 0).
bool HasItems(const LoD& lod) { return !lod.empty() && lod[0].size() > 1; }

// Appends item i's lengths at levels level.. of `lod` to `out` (one output level per input level from `level`)
// and returns its rows [begin, end).
std::pair<int64_t, int64_t> AppendItem(const LoD& lod, size_t level, int64_t i, LoD* out) {
  size_t b = static_cast<size_t>(i), e = b + 1;
  for (size_t l = level, j = 0; l < lod.size(); ++l, ++j) {
    std::vector<size_t>& o = (*out)[j];
    for (size_t k = b; k < e; ++k) o.push_back(o.back() + lod[l][k + 1] - lod[l][k]);
    b = lod[l][b];
    e = lod[l][e];
  }
  return {static_cast<int64_t>(b), static_cast<int64_t>(e)};
}

// The mask as bools on the CPU, one per item, checked to be a bool tensor.
const bool* MaskData(const ExecutionContext& ctx, Tensor* cpu_copy) {
  const Tensor& m = ctx.Input("Mask");
  FL_ENFORCE(m.dtype() == DType::BOOL, ctx.Type(), ": Mask '", ctx.InputName("Mask"), "' must be bool, got ",
             DTypeName(m.dtype()), " ", m.dims());
  FL_ENFORCE(m.rank() >= 1 && m.numel() == m.dims()[0], ctx.Type(), ": Mask '", ctx.InputName("Mask"),
             "' must be [N, 1] (one entry per item), got ", m.dims());
  if (m.place().is_cpu()) return m.data<bool>();
  TensorCopy(m, Place::CPU(), cpu_copy);
  return cpu_copy->data<bool>();
}

int64_t RowBytes(const Tensor& t) {
  int64_t row = 1;
  for (int i = 1; i < t.rank(); ++i) row *= t.dims()[i];
  return row * static_cast<int64_t>(SizeOf(t.dtype()));
}

DDim WithRows(const DDim& like, int64_t rows) {
  DDim d = like;
  d[0] = rows;
  return d;
}

// Build time: Mask is [N, 1] (Fluid's InferShape check, with its hint for IfElse users).
void CheckMaskDims(InferShapeContext& ctx) {
  const DDim m = ctx.InputDim("Mask");
  FL_ENFORCE(m.size() == 2 && (m[1] == 1 || m[1] < 0), ctx.Type(), ": ", ctx.Describe("Mask"),
             " must be a 2-D [N, 1] tensor (with fluid.layers.IfElse(cond): cond must be [N, 1])");
  const DType dt = ctx.InputDType("Mask");
  FL_ENFORCE(dt == DType::BOOL || dt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Mask"), " must be bool, got ",
             DTypeName(dt));
}

void InferSplit(InferShapeContext& ctx) {
  CheckMaskDims(ctx);
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() >= 1, "split_lod_tensor: ", ctx.Describe("X"), " must have rank >= 1");
  const int levels = std::max(0, ctx.InputLoDLevel("X") - ctx.Attr<int32_t>("level"));
  for (const char* out : {"OutTrue", "OutFalse"}) {
    if (!ctx.HasOutput(out)) continue;
    ctx.SetOutput(out, WithRows(x, -1), ctx.InputDType("X"));
    ctx.SetOutputLoDLevel(out, levels);
  }
}

void RunSplit(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);  // rows move with memcpy (helpers/row_runs.h)
  const Tensor& x = ctx.Input("X");
  FL_ENFORCE(x.rank() >= 1, "split_lod_tensor: X '", ctx.InputName("X"), "' must have rank >= 1, got ", x.dims());
  const LoD& lod = CheckedLoD(ctx, "X", 0, 0);
  const size_t level = static_cast<size_t>(ctx.Attr<int32_t>("level"));
  Tensor cpu_mask;
  const bool* mask = MaskData(ctx, &cpu_mask);
  const int64_t n = ctx.Input("Mask").numel();
  const int64_t items = ItemCount(lod, level, x.dims()[0]);
  FL_ENFORCE(n == items, "split_lod_tensor: Mask '", ctx.InputName("Mask"), "' has ", n, " entries but X '",
             ctx.InputName("X"), "' ", x.dims(), " (LoD ", x.LoDString(), ") has ", items, " ", ItemWord(lod, level),
             " at level ", level);
  const size_t sub_levels = level < lod.size() ? lod.size() - level : 0;
  LoD sub[2] = {LoD(sub_levels, std::vector<size_t>{0}), LoD(sub_levels, std::vector<size_t>{0})};
  std::vector<RowRun> runs[2];
  int64_t rows[2] = {0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const int side = mask[i] ? 1 : 0;
    const auto [b, e] = AppendItem(lod, level, i, &sub[side]);
    AddRun(runs[side], b, rows[side], e - b);
    rows[side] += e - b;
  }
  const char* slots[2] = {"OutFalse", "OutTrue"};
  for (int side = 0; side < 2; ++side) {
    Tensor* out = ctx.OutputOrNull(slots[side]);
    if (!out) continue;  // a gradient nobody wants
    out->Resize(WithRows(x.dims(), rows[side]));
    void* dst = out->mutable_data(ctx.place(), x.dtype());
    CopyRowRuns(x.raw_data(), dst, RowBytes(x), runs[side]);
    // A side no item went to has no LoD: Fluid gives it {{0}}, which is not a valid LoD (one offset per level).
    out->set_lod(HasItems(sub[side]) ? sub[side] : LoD{});
  }
}

void InferMerge(InferShapeContext& ctx) {
  CheckMaskDims(ctx);
  const DDim t = ctx.InputDim("InTrue"), f = ctx.InputDim("InFalse");
  FL_ENFORCE(t.size() >= 1, "merge_lod_tensor: ", ctx.Describe("InTrue"), " must have rank >= 1");
  if (t.size() == f.size()) {
    for (int k = 1; k < t.size(); ++k)
      FL_ENFORCE(t[k] < 0 || f[k] < 0 || t[k] == f[k], "merge_lod_tensor: ", ctx.Describe("InTrue"), " and ",
                 ctx.Describe("InFalse"), " must agree in every dim but the first");
  } else {
    FL_THROW("merge_lod_tensor: ", ctx.Describe("InTrue"), " and ", ctx.Describe("InFalse"),
             " must have the same rank");
  }
  const DType tt = ctx.InputDType("InTrue"), ft = ctx.InputDType("InFalse");
  FL_ENFORCE(tt == ft || tt == DType::UNDEFINED || ft == DType::UNDEFINED, "merge_lod_tensor: ", ctx.Describe("InTrue"),
             " is ", DTypeName(tt), " but ", ctx.Describe("InFalse"), " is ", DTypeName(ft));
  ctx.SetOutput("Out", WithRows(t, -1), tt);
  ctx.SetOutputLoDLevel("Out", ctx.Attr<int32_t>("level") + ctx.InputLoDLevel("InTrue"));
}

void RunMerge(const ExecutionContext& ctx) {
  CheckCPUPlace(ctx);
  const size_t level = static_cast<size_t>(ctx.Attr<int32_t>("level"));
  Tensor cpu_mask;
  const bool* mask = MaskData(ctx, &cpu_mask);
  const int64_t n = ctx.Input("Mask").numel();
  int64_t wanted[2] = {0, 0};  // items each side must supply
  for (int64_t i = 0; i < n; ++i) ++wanted[mask[i] ? 1 : 0];
  const char* slots[2] = {"InFalse", "InTrue"};
  const Tensor* in[2] = {nullptr, nullptr};
  for (int side = 0; side < 2; ++side) {
    if (wanted[side] == 0) continue;  // not read: that branch may not have run this time
    const Tensor* t = ctx.InputOrNull(slots[side]);
    FL_ENFORCE(t != nullptr, "merge_lod_tensor: Mask sends ", wanted[side], " items to ", slots[side], " '",
               ctx.InputName(slots[side]), "', which is not initialized");
    FL_ENFORCE(t->rank() >= 1, "merge_lod_tensor: ", slots[side], " '", ctx.InputName(slots[side]),
               "' must have rank >= 1, got ", t->dims());
    const LoD& lod = CheckedLoD(ctx, slots[side], 0, 0);
    const int64_t items = ItemCount(lod, 0, t->dims()[0]);
    FL_ENFORCE(items == wanted[side], "merge_lod_tensor: Mask '", ctx.InputName("Mask"), "' sends ", wanted[side],
               " items to ", slots[side], " '", ctx.InputName(slots[side]), "' ", t->dims(), " (LoD ", t->LoDString(),
               "), which has ", items, " ", ItemWord(lod, 0));
    in[side] = t;
  }
  if (in[0] && in[1]) {
    const DDim a = in[1]->dims(), b = in[0]->dims();
    bool same = a.size() == b.size() && in[1]->dtype() == in[0]->dtype() && in[1]->lod().size() == in[0]->lod().size();
    for (int k = 1; same && k < a.size(); ++k) same = a[k] == b[k];
    FL_ENFORCE(same, "merge_lod_tensor: InTrue '", ctx.InputName("InTrue"), "' ", DTypeName(in[1]->dtype()), " ", a,
               " (LoD ", in[1]->LoDString(), ") and InFalse '", ctx.InputName("InFalse"), "' ",
               DTypeName(in[0]->dtype()), " ", b, " (LoD ", in[0]->LoDString(),
               ") must agree in dtype, LoD levels and every dim but the first");
  }
  // The input that gives Out its dtype, trailing dims and LoD depth; with no items at all, whichever exists.
  const Tensor* like = in[1] ? in[1] : in[0];
  if (!like) like = ctx.InputOrNull("InTrue") ? ctx.InputOrNull("InTrue") : ctx.InputOrNull("InFalse");
  FL_ENFORCE(like != nullptr, "merge_lod_tensor: neither InTrue '", ctx.InputName("InTrue"), "' nor InFalse '",
             ctx.InputName("InFalse"), "' is initialized: nothing gives Out its shape");
  // Out's LoD: X's first `level` levels, then the merged items' levels.
  LoD out_lod;
  if (level > 0) {
    const LoD& x_lod = CheckedLoD(ctx, "X", 0, level);
    out_lod.assign(x_lod.begin(), x_lod.begin() + static_cast<std::ptrdiff_t>(level));
  }
  const size_t sub_levels = like->lod().size();
  LoD sub(sub_levels, std::vector<size_t>{0});
  std::vector<RowRun> runs[2];
  int64_t next[2] = {0, 0}, rows = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int side = mask[i] ? 1 : 0;
    const auto [b, e] = AppendItem(in[side]->lod(), 0, next[side]++, &sub);
    AddRun(runs[side], b, rows, e - b);
    rows += e - b;
  }
  if (n == 0) out_lod.clear();  // no items: no LoD (a level of one offset is not a valid LoD)
  else out_lod.insert(out_lod.end(), sub.begin(), sub.end());
  const std::string problem = LoDProblem(out_lod, rows);
  FL_ENFORCE(problem.empty(), "merge_lod_tensor: the merged LoD ", LoDString(out_lod), " of ", rows,
             " rows is invalid (X '", ctx.InputName("X"), "' gives its first ", level, " levels): ", problem);
  Tensor* out = ctx.Output("Out");
  out->Resize(WithRows(like->dims(), rows));
  void* dst = out->mutable_data(ctx.place(), like->dtype());
  for (int side = 0; side < 2; ++side)
    if (in[side]) CopyRowRuns(in[side]->raw_data(), dst, RowBytes(*like), runs[side]);
  out->set_lod(out_lod);
}

// split's gradient: the branches' gradients merged back in X's order (merge_lod_tensor with split's level).
void SplitGrad(GradOpMaker& g) {
  const std::string dx = FirstArg(g.InputGrad("X"));
  if (dx.empty()) return;
  OpDesc& op = g.NewOp("merge_lod_tensor");
  op.SetInput("X", g.Input("X"));
  op.SetInput("Mask", g.Input("Mask"));
  op.SetInput("InTrue", g.OutputGrad("OutTrue"));
  op.SetInput("InFalse", g.OutputGrad("OutFalse"));
  op.SetOutput("Out", {dx});
}

// merge's gradient: Out@GRAD split again by the mask (split_lod_tensor with merge's level).
void MergeGrad(GradOpMaker& g) {
  const std::string dt = FirstArg(g.InputGrad("InTrue")), df = FirstArg(g.InputGrad("InFalse"));
  if (dt.empty() && df.empty()) return;
  OpDesc& op = g.NewOp("split_lod_tensor");
  op.SetInput("X", g.OutputGrad("Out"));
  op.SetInput("Mask", g.Input("Mask"));
  if (!dt.empty()) op.SetOutput("OutTrue", {dt});
  if (!df.empty()) op.SetOutput("OutFalse", {df});
}

}  // namespace

FL_REGISTER_OP(split_lod_tensor, op) {
  op.Doc(
        "Splits X's items (sequences at LoD level `level`, or rows) by a bool [N, 1] Mask: true ones to OutTrue, "
        "the others to OutFalse, in order, each with its LoD from `level` down.")
      .Input("X", "the tensor to split, rank >= 1")
      .Input("Mask", "bool [N, 1], one entry per item of X")
      .NonDifferentiable({"Mask"})
      // Dispensable (Fluid's are required): as merge_lod_tensor's gradient, a branch gradient nobody wants is absent.
      .DispensableOutput("OutTrue", "the items whose mask is true")
      .DispensableOutput("OutFalse", "the other items")
      .Attr<int32_t>("level", 0, "the LoD level whose sequences are the items (rows if X has no such level)")
      .Min(0)
      .SetInferShape(InferSplit)
      .SetRun(RunSplit)
      .Grad(SplitGrad);
}

FL_REGISTER_OP(merge_lod_tensor, op) {
  op.Doc(
        "Merges InTrue's and InFalse's items (level-0 sequences, or rows) back in Mask's order: item i of Out is the "
        "next item of InTrue if Mask[i] else of InFalse. Out's LoD: X's first `level` levels above the merged ones.")
      .Input("X", "the tensor that was split: gives the LoD levels above `level` (unread when level is 0)")
      .Input("Mask", "bool [N, 1], one entry per item")
      .Input("InTrue", "the items for true entries (not read when there are none)")
      .Input("InFalse", "the items for false entries (not read when there are none)")
      .NonDifferentiable({"X", "Mask"})
      .Output("Out", "the merged tensor")
      .Attr<int32_t>("level", 0, "the LoD level the items were split at")
      .Min(0)
      .SetInferShape(InferMerge)
      .SetRun(RunMerge)
      .Grad(MergeGrad);
}

}  // namespace fl
