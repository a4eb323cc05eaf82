// sequence_concat: Out's sequence i = the i-th sequences of X[0], X[1], ... one after another (the inputs' last
// LoD level). The data moves as row runs (helpers/row_runs.h), and the gradient hands each input its runs back.
#include <string>
#include <vector>

#include "helpers/lod.h"
#include "helpers/row_runs.h"
#include "op_context.h"

namespace fl {

namespace {

// "X[0] 'a' [5, 2] LoD {{0, 3, 5}}, X[1] 'b' ..." for error messages.
std::string DescribeInputs(const ExecutionContext& ctx) {
  std::string s;
  for (int j = 0; j < ctx.InputSize("X"); ++j) {
    const Tensor& t = ctx.Input("X", j);
    s += Str(j ? ", " : "", "X[", j, "] '", ctx.InputName("X", j), "' ", t.dims(), " LoD ", t.LoDString());
  }
  return s;
}

// Every input's checked last-level offsets, after checking that all have as many sequences and the same upper
// levels (which Out keeps).
std::vector<const std::vector<size_t>*> SameSequences(const ExecutionContext& ctx) {
  const int n = ctx.InputSize("X");
  std::vector<const std::vector<size_t>*> offsets;
  const LoD& first = CheckedLoD(ctx, "X", 0);
  for (int j = 0; j < n; ++j) {
    const LoD& lod = CheckedLoD(ctx, "X", j);
    offsets.push_back(&lod.back());
    FL_ENFORCE(lod.size() == first.size() && SequenceCount(lod.back()) == SequenceCount(first.back()), ctx.Type(),
               ": every input must have as many sequences (at its last LoD level) and LoD levels, got ",
               DescribeInputs(ctx));
    for (size_t l = 0; l + 1 < lod.size(); ++l)
      FL_ENFORCE(lod[l] == first[l], ctx.Type(), ": the inputs' LoD levels above the last must be equal (Out keeps ",
                 "them), got ", DescribeInputs(ctx));
  }
  return offsets;
}

// Row runs between input j and Out, in Out's order (sequence by sequence, input by input), and Out's last level.
struct ConcatPlan {
  std::vector<std::vector<RowRun>> runs;  // runs[j]: src rows of X[j] -> dst rows of Out
  std::vector<size_t> out_offsets{0};
};

ConcatPlan PlanConcat(const std::vector<const std::vector<size_t>*>& offsets) {
  ConcatPlan p;
  p.runs.resize(offsets.size());
  const int64_t seqs = SequenceCount(*offsets[0]);
  int64_t row = 0;
  for (int64_t i = 0; i < seqs; ++i) {
    for (size_t j = 0; j < offsets.size(); ++j) {
      const int64_t begin = static_cast<int64_t>((*offsets[j])[i]), len = (*offsets[j])[i + 1] - begin;
      AddRun(p.runs[j], begin, row, len);
      row += len;
    }
    p.out_offsets.push_back(static_cast<size_t>(row));
  }
  return p;
}

void SequenceConcatInferShape(InferShapeContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n >= 2, ctx.Type(), ": X needs at least two tensors, got ", n);
  DDim out = ctx.InputDim("X", 0);
  FL_ENFORCE(out.size() >= 1, ctx.Type(), ": ", ctx.Describe("X", 0), " must have rank >= 1");
  const int64_t width = DDim(out.begin() + 1, out.size() - 1).numel();  // -1 when unknown
  for (int j = 1; j < n; ++j) {
    const DDim d = ctx.InputDim("X", j);
    FL_ENFORCE(d.size() >= 1, ctx.Type(), ": ", ctx.Describe("X", j), " must have rank >= 1");
    const int64_t w = DDim(d.begin() + 1, d.size() - 1).numel();
    FL_ENFORCE(width < 0 || w < 0 || w == width, ctx.Type(),
               ": every input's rows must have the same size: ", ctx.Describe("X", 0), " has ", width,
               " values a row, ", ctx.Describe("X", j), " has ", w);
    FL_ENFORCE(ctx.InputDType("X", j) == ctx.InputDType("X", 0) || ctx.InputDType("X", j) == DType::UNDEFINED ||
                   ctx.InputDType("X", 0) == DType::UNDEFINED,
               ctx.Type(), ": ", ctx.Describe("X", j), " is ", DTypeName(ctx.InputDType("X", j)), " but ",
               ctx.Describe("X", 0), " is ", DTypeName(ctx.InputDType("X", 0)));
    out[0] = out[0] < 0 || d[0] < 0 ? -1 : out[0] + d[0];
  }
  ctx.SetOutput("Out", out, ctx.InputDType("X", 0));
  if (!ctx.IsRuntime()) ctx.ShareLoD("X", "Out");  // at run time the kernel builds Out's LoD
}

}  // namespace

FL_REGISTER_OP(sequence_concat, op) {
  op.Doc(
        "Out's sequence i = sequence i of X[0], then of X[1], ...: the inputs must have as many sequences (last "
        "LoD level; any upper levels equal, and kept). Rows take X[0]'s shape.")
      .DuplicableInput("X", "at least two LoDTensors with as many sequences, one dtype and rows of one size")
      .Output("Out", "[total rows, ...] with the concatenated sequences' LoD")
      .SetInferShape(SequenceConcatInferShape)
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const std::vector<const std::vector<size_t>*> offsets = SameSequences(ctx);
        const ConcatPlan p = PlanConcat(offsets);
        Tensor* out = ctx.Output("Out");
        LoD lod = ctx.Input("X", 0).lod();
        lod.back() = p.out_offsets;
        out->set_lod(lod);
        T* o = out->mutable_data<T>(ctx.place());
        const int64_t row_bytes = out->dims().Product(1, out->rank()) * static_cast<int64_t>(sizeof(T));
        for (size_t j = 0; j < offsets.size(); ++j) CopyRowRuns(ctx.Input("X", j).data<T>(), o, row_bytes, p.runs[j]);
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD[j] = the rows of Out@GRAD that sequence_concat took from X[j].")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const std::vector<const std::vector<size_t>*> offsets = SameSequences(ctx);
        const ConcatPlan p = PlanConcat(offsets);
        const Tensor& dout = ctx.Input("Out@GRAD");
        const int64_t row_bytes = dout.dims().Product(1, dout.rank()) * static_cast<int64_t>(sizeof(T));
        for (size_t j = 0; j < offsets.size(); ++j) {
          Tensor* dx = ctx.OutputOrNull("X@GRAD", static_cast<int>(j));
          if (!dx) continue;
          dx->Resize(ctx.Input("X", j).dims());
          T* g = dx->mutable_data<T>(ctx.place());
          std::vector<RowRun> back;  // the same runs, from Out@GRAD to X@GRAD[j]
          for (const RowRun& r : p.runs[j]) back.push_back(RowRun{r.dst_row, r.src_row, r.rows});
          CopyRowRuns(dout.data<T>(), g, row_bytes, back);
        }
      });
}

}  // namespace fl
