// sequence_slice: Out's sequence i = rows [Offset[i], Offset[i] + Length[i]) of X's sequence i (X's last LoD
// level). Offset and Length are [N, 1] int64 (int32 accepted) tensors, each pair checked against its sequence's
// bounds. One row run per sequence (helpers/row_runs.h); the gradient copies the runs back and zeros the rest.
#include <string>
#include <vector>

#include "helpers/lod.h"
#include "helpers/row_runs.h"
#include "helpers/rows.h"
#include "op_context.h"

namespace fl {

namespace {

// Offset[i] and Length[i] as int64, after checking the tensor is [N, 1] for X's N sequences.
std::vector<int64_t> ReadPerSequence(const ExecutionContext& ctx, const char* slot, int64_t seqs) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.rank() == 2 && t.dims()[0] == seqs && t.dims()[1] == 1, ctx.Type(), ": ", slot, " '",
             ctx.InputName(slot), "' must be [", seqs, ", 1] (one value per sequence of X '", ctx.InputName("X"),
             "' LoD ", ctx.Input("X").LoDString(), "), got ", t.dims());
  return VisitIndexDType(t.dtype(), Str(ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "'"), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = t.data<I>();
    return std::vector<int64_t>(p, p + seqs);
  });
}

// The run of each sequence (X rows -> Out rows), after checking every slice lies inside its sequence, and Out's
// LoD (X's, its last level the slices' lengths).
struct SlicePlan {
  std::vector<RowRun> runs;
  LoD out_lod;
};

SlicePlan PlanSlice(const ExecutionContext& ctx) {
  const LoD& lod = CheckedLoD(ctx, "X");
  const std::vector<size_t>& offsets = lod.back();
  const int64_t seqs = SequenceCount(offsets);
  const std::vector<int64_t> off = ReadPerSequence(ctx, "Offset", seqs), len = ReadPerSequence(ctx, "Length", seqs);
  SlicePlan p;
  p.out_lod = lod;
  std::vector<size_t>& out_offsets = p.out_lod.back();
  ForEachSequence(offsets, [&](int64_t s, int64_t begin, int64_t end) {
    const int64_t rows = end - begin;
    FL_ENFORCE(off[s] >= 0 && len[s] >= 0 && off[s] <= rows && len[s] <= rows - off[s], ctx.Type(), ": sequence ", s,
               " of X '", ctx.InputName("X"), "' LoD ", ctx.Input("X").LoDString(), " has ", rows, " rows, so Offset[",
               s, "] = ", off[s], " and Length[", s, "] = ", len[s],
               " must satisfy 0 <= offset, 0 <= length and offset + length <= ", rows);
    AddRun(p.runs, begin + off[s], static_cast<int64_t>(out_offsets[s]), len[s]);
    out_offsets[s + 1] = out_offsets[s] + static_cast<size_t>(len[s]);
  });
  return p;
}

void CheckOffsetsInput(InferShapeContext& ctx, const char* slot) {
  const DDim d = ctx.InputDim(slot);
  FL_ENFORCE(d.size() == 2 && (d[1] == 1 || d[1] < 0), ctx.Type(), ": ", ctx.Describe(slot),
             " must be [N, 1]: one value per sequence of X");
  const DType t = ctx.InputDType(slot);
  FL_ENFORCE(t == DType::INT64 || t == DType::INT32 || t == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot),
             " must be int64 (or int32), got ", DTypeName(t));
}

}  // namespace

FL_REGISTER_OP(sequence_slice, op) {
  op.Doc("Out's sequence i = rows [Offset[i], Offset[i] + Length[i]) of X's sequence i (X's last LoD level).")
      .Input("X", "the LoDTensor sliced, [rows, ...]")
      .Input("Offset", "int64 [N, 1]: each slice's first row within its sequence")
      .Input("Length", "int64 [N, 1]: each slice's length")
      .Output("Out", "[sum of Length, ...] with the slices' LoD")
      .NonDifferentiable({"Offset", "Length"})
      .SetInferShape([](InferShapeContext& ctx) {
        FL_ENFORCE(ctx.InputDim("X").size() >= 1, ctx.Type(), ": ", ctx.Describe("X"), " must have rank >= 1");
        CheckOffsetsInput(ctx, "Offset");
        CheckOffsetsInput(ctx, "Length");
        if (ctx.IsRuntime()) return;  // Out's rows follow from Length: the kernel sets them
        DDim dims = ctx.InputDim("X");
        dims[0] = -1;
        ctx.SetOutput("Out", dims, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const SlicePlan p = PlanSlice(ctx);
        Tensor* out = ctx.Output("Out");
        DDim dims = x.dims();
        dims[0] = static_cast<int64_t>(p.out_lod.back().back());
        out->Resize(dims);
        out->set_lod(p.out_lod);
        const int64_t row_bytes = x.dims().Product(1, x.rank()) * static_cast<int64_t>(sizeof(T));
        CopyRowRuns(x.data<T>(), out->mutable_data<T>(ctx.place()), row_bytes, p.runs);
      });
  op.GradOp({"X", "Offset", "Length", "Out@GRAD"})
      .Doc("X@GRAD = each slice's rows of Out@GRAD where the slice was taken, zeros elsewhere.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        const SlicePlan p = PlanSlice(ctx);
        DDim want = x.dims();
        want[0] = static_cast<int64_t>(p.out_lod.back().back());
        FL_ENFORCE(dout.dims() == want, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' has dims ",
                   dout.dims(), " but sequence_slice's Out has ", want);
        dx->Resize(x.dims());
        T* g = dx->mutable_data<T>(ctx.place());
        // Out@GRAD's rows back where their slices were taken, zeros in the rows between (each row written once).
        std::vector<RowRun> back, gaps;
        int64_t next = 0;  // the runs are in X's row order
        for (const RowRun& r : p.runs) {
          back.push_back(RowRun{r.dst_row, r.src_row, r.rows});
          if (r.src_row > next) gaps.push_back(RowRun{0, next, r.src_row - next});
          next = r.src_row + r.rows;
        }
        if (x.dims()[0] > next) gaps.push_back(RowRun{0, next, x.dims()[0] - next});
        const int64_t width = x.dims().Product(1, x.rank()), row_bytes = width * static_cast<int64_t>(sizeof(T));
        const std::vector<T> zeros(width, T(0));
        CopyRowRuns(dout.data<T>(), g, row_bytes, back);
        RepeatRowRuns(zeros.data(), g, row_bytes, gaps);
      });
}

}  // namespace fl
