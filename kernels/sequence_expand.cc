// sequence_expand and sequence_expand_as: X's rows (or X's sequences) repeated as many times as a reference LoD
// of Y says, Fluid 1.8's rules. Both are row-run copies (helpers/row_runs.h); both gradients sum each source's
// copies back (SumCopies), in parallel over the sources.
#include <algorithm>
#include <string>
#include <vector>

#include "helpers/lod.h"
#include "helpers/row_runs.h"
#include "op_context.h"

namespace fl {

namespace {

// What a source of the expansion is: source i spans X's rows [x[i], x[i + 1]) (X's sequence i, or its row i
// when X has no LoD) and is repeated ref[i + 1] - ref[i] times, its copies one after another in Out.
struct Expansion {
  std::vector<size_t> x;           // X's sequence offsets (0, 1, 2, ... when X has no LoD)
  const std::vector<size_t>* ref;  // the reference level of Y
  bool x_has_lod = false;          // Out gets a LoD (one sequence per copy) only then
  int64_t Sources() const { return SequenceCount(x); }
  int64_t Repeats(int64_t i) const { return static_cast<int64_t>((*ref)[i + 1] - (*ref)[i]); }
  int64_t Length(int64_t i) const { return static_cast<int64_t>(x[i + 1] - x[i]); }
};

std::string Named(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  return Str(slot, " '", ctx.InputName(slot), "' ", t.dims(), " LoD ", t.LoDString());
}

// sequence_expand: Y's level ref_level (-1: the last); X has no LoD (one row per reference sequence) or one level
// (as many sequences as the reference level has).
Expansion PlanSequenceExpand(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const LoD& y_lod = CheckedLoD(ctx, "Y");
  const int levels = static_cast<int>(y_lod.size());
  int level = ctx.Attr<int32_t>("ref_level");
  FL_ENFORCE(level == -1 || (level >= 0 && level < levels), ctx.Type(), ": ref_level ", level, " is out of range for ",
             Named(ctx, "Y"), ": it must be -1 (the last level) or in [0, ", levels, ")");
  if (level == -1) level = levels - 1;
  Expansion e;
  e.ref = &y_lod[level];
  const LoD& x_lod = CheckedLoD(ctx, "X", 0, 0);
  FL_ENFORCE(x_lod.size() <= 1, ctx.Type(), ": ", Named(ctx, "X"), " has ", x_lod.size(),
             " LoD levels; X may have at most one");
  const int64_t refs = SequenceCount(*e.ref);
  if (x_lod.empty()) {
    FL_ENFORCE(x.dims()[0] == refs, ctx.Type(), ": ", Named(ctx, "X"),
               " has no LoD, so it needs one row per sequence of level ", level, " of ", Named(ctx, "Y"), ": ", refs,
               " rows, got ", x.dims()[0]);
    e.x.resize(refs + 1);
    for (int64_t i = 0; i <= refs; ++i) e.x[i] = static_cast<size_t>(i);
  } else {
    FL_ENFORCE(SequenceCount(x_lod[0]) == refs, ctx.Type(), ": ", Named(ctx, "X"), " has ", SequenceCount(x_lod[0]),
               " sequences but level ", level, " of ", Named(ctx, "Y"), " has ", refs, "; they must be equal");
    e.x = x_lod[0];
    e.x_has_lod = true;
  }
  return e;
}

// sequence_expand_as: X's row i repeated to the length of Y's sequence i (Y's last level).
Expansion PlanSequenceExpandAs(const ExecutionContext& ctx) {
  Expansion e;
  e.ref = &SequenceOffsets(ctx, "Y");
  const int64_t refs = SequenceCount(*e.ref);
  const Tensor& x = ctx.Input("X");
  FL_ENFORCE(x.dims()[0] == refs, ctx.Type(), ": X '", ctx.InputName("X"), "' ", x.dims(),
             " needs one row per sequence of ", Named(ctx, "Y"), ": ", refs, " rows, got ", x.dims()[0]);
  e.x.resize(refs + 1);
  for (int64_t i = 0; i <= refs; ++i) e.x[i] = static_cast<size_t>(i);
  return e;
}

// Out = the copies, and Out's LoD when X has one (each copy of a sequence its own sequence).
template <typename T>
void Expand(const ExecutionContext& ctx, const Expansion& e, bool set_lod) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const int64_t width = x.dims().Product(1, x.rank());
  std::vector<RowRun> runs;
  std::vector<size_t> out_offsets{0};
  int64_t row = 0;
  for (int64_t i = 0; i < e.Sources(); ++i) {
    const int64_t len = e.Length(i), repeats = e.Repeats(i);
    if (!e.x_has_lod) {  // one row repeated: one run, filled by doubling
      if (repeats > 0) runs.push_back(RowRun{static_cast<int64_t>(e.x[i]), row, repeats});
      row += repeats;
      continue;
    }
    for (int64_t j = 0; j < repeats; ++j) {
      AddRun(runs, static_cast<int64_t>(e.x[i]), row, len);
      row += len;
      out_offsets.push_back(static_cast<size_t>(row));
    }
  }
  DDim dims = x.dims();
  dims[0] = row;
  out->Resize(dims);
  if (set_lod) out->set_lod(e.x_has_lod ? LoD{out_offsets} : LoD{});
  T* o = out->mutable_data<T>(ctx.place());
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(T));
  if (e.x_has_lod) CopyRowRuns(x.data<T>(), o, row_bytes, runs);
  else RepeatRowRuns(x.data<T>(), o, row_bytes, runs);
}

// X@GRAD rows of source i = the sum of Out@GRAD over the source's copies (zeros for a source repeated 0 times).
template <typename T>
void SumCopies(const ExecutionContext& ctx, const Expansion& e) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int64_t width = x.dims().Product(1, x.rank());
  const int64_t n = e.Sources();
  std::vector<int64_t> first(n + 1, 0);  // Out's row of each source's first copy
  for (int64_t i = 0; i < n; ++i) first[i + 1] = first[i] + e.Repeats(i) * e.Length(i);
  DDim want = x.dims();
  want[0] = first[n];
  FL_ENFORCE(dout.dims() == want, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' has dims ", dout.dims(),
             " but the forward op's Out has ", want, " (from ", Named(ctx, "X"), " and ", Named(ctx, "Y"), ")");
  dx->Resize(x.dims());
  T* g = dx->mutable_data<T>(ctx.place());
  const T* d = dout.data<T>();
  const int64_t grain = std::max<int64_t>(1, n * kMinParallelElements / std::max<int64_t>(1, dout.numel()));
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t size = e.Length(i) * width, repeats = e.Repeats(i);
      T* gi = g + static_cast<int64_t>(e.x[i]) * width;
      const T* src = d + first[i] * width;
      if (repeats == 0) {
        std::fill(gi, gi + size, T(0));
        continue;
      }
      std::copy(src, src + size, gi);
      for (int64_t j = 1; j < repeats; ++j) {
        const T* copy = src + j * size;
        for (int64_t k = 0; k < size; ++k) gi[k] += copy[k];
      }
    }
  });
}

void CheckRank(InferShapeContext& ctx) {
  FL_ENFORCE(ctx.InputDim("X").size() >= 2, ctx.Type(), ": ", ctx.Describe("X"),
             " must have rank >= 2 (rows, then each row's shape)");
}

}  // namespace

FL_REGISTER_OP(sequence_expand, op) {
  op.Doc(
        "Out = X's rows (X without LoD) or X's sequences (X with one LoD level) repeated: source i as many times "
        "as sequence i of Y's LoD level ref_level is long. Out has a LoD, one sequence per copy, when X has one.")
      .Input("X", "[N, ...]: N rows (no LoD) or sequences (one LoD level), N = sequences of Y's reference level")
      .Input("Y", "the LoDTensor whose level ref_level gives the repeat counts (its data is not read)")
      .Output("Out", "the copies, in order: [sum of repeats * source lengths, ...]")
      .NonDifferentiable({"Y"})
      .Attr<int32_t>("ref_level", -1, "the LoD level of Y to read repeat counts from; -1: the last")
      .Min(-1)
      .SetInferShape([](InferShapeContext& ctx) {
        CheckRank(ctx);
        if (ctx.IsRuntime()) return;  // Out's rows and LoD follow from the LoDs: the kernel sets them
        DDim dims = ctx.InputDim("X");
        dims[0] = -1;
        ctx.SetOutput("Out", dims, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        Expand<typename decltype(tag)::type>(ctx, PlanSequenceExpand(ctx), true);
      });
  op.GradOp({"X", "Y", "Out@GRAD"})
      .Doc("X@GRAD: each source's rows = the sum of Out@GRAD over its copies (0 where it was repeated 0 times).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        SumCopies<typename decltype(tag)::type>(ctx, PlanSequenceExpand(ctx));
      });
}

FL_REGISTER_OP(sequence_expand_as, op) {
  op.Doc(
        "Out = X's row i repeated as many times as Y's sequence i is long (Y's last LoD level); Out takes Y's LoD. "
        "X's own LoD is not read.")
      .Input("X", "[N, ...], N = the number of sequences of Y")
      .Input("Y", "the LoDTensor whose sequence lengths are the repeat counts (its data is not read)")
      .Output("Out", "[rows of Y, ...] with Y's LoD")
      .NonDifferentiable({"Y"})
      .SetInferShape([](InferShapeContext& ctx) {
        CheckRank(ctx);
        FL_ENFORCE(ctx.InputDim("Y").size() >= 1, ctx.Type(), ": ", ctx.Describe("Y"), " must have rank >= 1");
        DDim dims = ctx.InputDim("X");
        dims[0] = ctx.IsRuntime() ? ctx.InputDim("Y")[0] : -1;  // a valid LoD of Y ends at its row count
        ctx.SetOutput("Out", dims, ctx.InputDType("X"));
        ctx.ShareLoD("Y", "Out");
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        Expand<typename decltype(tag)::type>(ctx, PlanSequenceExpandAs(ctx), false);
      });
  op.GradOp({"X", "Y", "Out@GRAD"})
      .Doc("X@GRAD row i = the sum of Out@GRAD over Y's sequence i (0 for an empty sequence).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        SumCopies<typename decltype(tag)::type>(ctx, PlanSequenceExpandAs(ctx));
      });
}

}  // namespace fl
