// sequence_pad and sequence_unpad, each other's inverse and each other's gradient: sequence_pad lays X's sequences
// (last LoD level) out as [N, L, ...] with the rows past each sequence's end set to PadValue, and sequence_unpad
// takes the first Length[i] rows of each [L, ...] block back into a LoDTensor. Both are row runs
// (helpers/row_runs.h): one data run per sequence, one pad run for the rest of its block.
#include <algorithm>
#include <string>
#include <vector>

#include "helpers/lod.h"
#include "helpers/row_runs.h"
#include "op_context.h"

namespace fl {

namespace {

// dst [n, padded, width] = the sequences of src (rows per `offsets`), each followed by copies of pad_row.
template <typename T>
void PadSequences(const T* src, const std::vector<size_t>& offsets, int64_t padded, int64_t width, const T* pad_row,
                  T* dst) {
  std::vector<RowRun> data, pads;
  ForEachSequence(offsets, [&](int64_t s, int64_t begin, int64_t end) {
    AddRun(data, begin, s * padded, end - begin);
    if (padded > end - begin) pads.push_back(RowRun{0, s * padded + end - begin, padded - (end - begin)});
  });
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(T));
  CopyRowRuns(src, dst, row_bytes, data);
  RepeatRowRuns(pad_row, dst, row_bytes, pads);
}

// dst rows per `offsets` = the first (offsets[s + 1] - offsets[s]) rows of block s of src [n, padded, width].
template <typename T>
void UnpadSequences(const T* src, const std::vector<size_t>& offsets, int64_t padded, int64_t width, T* dst) {
  std::vector<RowRun> data;
  ForEachSequence(offsets,
                  [&](int64_t s, int64_t begin, int64_t end) { AddRun(data, s * padded, begin, end - begin); });
  CopyRowRuns(src, dst, width * static_cast<int64_t>(sizeof(T)), data);
}

int64_t LongestSequence(const std::vector<size_t>& offsets, int64_t* which) {
  int64_t longest = 0;
  *which = -1;
  ForEachSequence(offsets, [&](int64_t s, int64_t begin, int64_t end) {
    if (end - begin > longest || *which < 0) longest = end - begin, *which = s;
  });
  return longest;
}

// sequence_pad's padded length: the attribute, or -1: the longest sequence, which it must not be shorter than.
int64_t PaddedLength(const ExecutionContext& ctx, const std::vector<size_t>& offsets) {
  int64_t which = -1;
  const int64_t longest = LongestSequence(offsets, &which);
  const int64_t padded = ctx.Attr<int32_t>("padded_length");
  if (padded == -1) return longest;
  FL_ENFORCE(padded >= longest, ctx.Type(), ": padded_length = ", padded, " is shorter than sequence ", which,
             " of X '", ctx.InputName("X"), "' LoD ", ctx.Input("X").LoDString(), " (", longest,
             " rows); it must be -1 (the longest sequence) or at least ", longest);
  return padded;
}

// [n, padded] + the row shape of X.
DDim PaddedDims(const DDim& x, int64_t n, int64_t padded) {
  DDim d{n, padded};
  for (int i = 1; i < x.size(); ++i) d.push_back(x[i]);
  return d;
}

// sequence_unpad's Length, read and checked against X [n, padded, ...], as LoD offsets.
std::vector<size_t> UnpadOffsets(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& len = ctx.Input("Length");
  FL_ENFORCE(len.dtype() == DType::INT64 && len.rank() == 1 && len.dims()[0] == x.dims()[0], ctx.Type(), ": Length '",
             ctx.InputName("Length"), "' must be int64 [", x.dims()[0], "] (one length per row of X '",
             ctx.InputName("X"), "' ", x.dims(), "), got ", DTypeName(len.dtype()), " ", len.dims());
  const int64_t padded = x.dims()[1];
  const int64_t* l = len.data<int64_t>();
  std::vector<size_t> offsets{0};
  for (int64_t s = 0; s < x.dims()[0]; ++s) {
    FL_ENFORCE(l[s] >= 0 && l[s] <= padded, ctx.Type(), ": Length[", s, "] = ", l[s], " of Length '",
               ctx.InputName("Length"), "' is outside [0, ", padded, "] (X '", ctx.InputName("X"), "' ", x.dims(),
               " holds sequences of up to ", padded, " rows)");
    offsets.push_back(offsets.back() + static_cast<size_t>(l[s]));
  }
  return offsets;
}

// sequence_unpad's Out dims: [total rows] + X.dims[2:], or [total rows, 1] for a rank-2 X (Fluid's rule).
DDim UnpaddedDims(const DDim& x, int64_t rows) {
  DDim d{rows};
  for (int i = 2; i < x.size(); ++i) d.push_back(x[i]);
  if (x.size() == 2) d.push_back(1);
  return d;
}

void CheckGradDims(const ExecutionContext& ctx, const DDim& want) {
  const Tensor& dout = ctx.Input("Out@GRAD");
  FL_ENFORCE(dout.dims() == want, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' has dims ", dout.dims(),
             " but the forward op's Out has ", want);
}

void SequencePadInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() >= 2, ctx.Type(), ": ", ctx.Describe("X"), " must have rank >= 2 (rows, then each step's shape)");
  const DDim step(x.begin() + 1, x.size() - 1), pad = ctx.InputDim("PadValue");
  bool matches = pad == DDim{1} || pad.size() == step.size();
  for (int i = 0; matches && pad != DDim{1} && i < step.size(); ++i)
    matches = pad[i] == step[i] || (!ctx.IsRuntime() && (pad[i] < 0 || step[i] < 0));
  FL_ENFORCE(matches, ctx.Type(), ": ", ctx.Describe("PadValue"), " must be [1] (one value) or one step's shape ", step,
             " (", ctx.Describe("X"), ")");
  if (ctx.IsRuntime()) return;  // N and the padded length follow from X's LoD: the kernel sets them
  const int32_t padded = ctx.Attr<int32_t>("padded_length");
  ctx.SetOutput("Out", PaddedDims(x, -1, padded > 0 ? padded : -1), ctx.InputDType("X"));
  ctx.SetOutput("Length", DDim{-1}, DType::INT64);
}

}  // namespace

FL_REGISTER_OP(sequence_pad, op) {
  op.Doc(
        "Out[i] = X's sequence i (last LoD level) followed by PadValue rows up to padded_length; Length[i] = its "
        "length. Out keeps X's upper LoD levels (none for a one-level X).")
      .Input("X", "the LoDTensor padded, [rows, ...]")
      .Input("PadValue", "X's dtype: [1] (broadcast to every step) or one step's shape X.dims[1:]")
      .Output("Out", "[N sequences, padded_length, ...]")
      .Output("Length", "int64 [N]: the sequences' lengths")
      .NonDifferentiable({"PadValue"})
      .Attr<int32_t>("padded_length", -1, "the length Out pads to; -1: the longest sequence's")
      .Min(-1)
      .SetInferShape(SequencePadInferShape)
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& pad = ctx.Input("PadValue");
        const LoD& lod = CheckedLoD(ctx, "X");
        const std::vector<size_t>& offsets = lod.back();
        const int64_t n = SequenceCount(offsets), padded = PaddedLength(ctx, offsets);
        const int64_t width = x.dims().Product(1, x.rank());
        FL_ENFORCE(pad.dtype() == x.dtype(), ctx.Type(), ": PadValue '", ctx.InputName("PadValue"), "' is ",
                   DTypeName(pad.dtype()), " but X '", ctx.InputName("X"), "' is ", DTypeName(x.dtype()));
        std::vector<T> pad_row(width, pad.data<T>()[0]);  // PadValue [1] broadcast, or the step itself
        if (pad.numel() == width) std::copy(pad.data<T>(), pad.data<T>() + width, pad_row.begin());
        Tensor* out = ctx.Output("Out");
        out->Resize(PaddedDims(x.dims(), n, padded));
        out->set_lod(DropLastLevel(lod));
        PadSequences(x.data<T>(), offsets, padded, width, pad_row.data(), out->mutable_data<T>(ctx.place()));
        Tensor* length = ctx.Output("Length");
        length->Resize(DDim{n});
        length->set_lod({});
        int64_t* l = length->mutable_data<int64_t>(ctx.place());
        ForEachSequence(offsets, [&](int64_t s, int64_t begin, int64_t end) { l[s] = end - begin; });
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = the first len_i rows of Out@GRAD[i] for each sequence i (sequence_unpad of Out@GRAD).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
        const int64_t padded = PaddedLength(ctx, offsets);
        CheckGradDims(ctx, PaddedDims(x.dims(), SequenceCount(offsets), padded));
        dx->Resize(x.dims());
        UnpadSequences(ctx.Input("Out@GRAD").data<T>(), offsets, padded, x.dims().Product(1, x.rank()),
                       dx->mutable_data<T>(ctx.place()));
      });
}

FL_REGISTER_OP(sequence_unpad, op) {
  op.Doc(
        "Out = the first Length[i] rows of each X[i], one after another, as a LoDTensor whose sequence i has "
        "Length[i] rows (the inverse of sequence_pad).")
      .Input("X", "[N, L, ...] padded sequences")
      .Input("Length", "int64 [N]: each sequence's length, in [0, L]")
      .Output("Out", "[sum of Length] + X.dims[2:] ([sum of Length, 1] for a rank-2 X), LoD from Length")
      .NonDifferentiable({"Length"})
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X"), len = ctx.InputDim("Length");
        FL_ENFORCE(x.size() >= 2, ctx.Type(), ": ", ctx.Describe("X"), " must have rank >= 2 [N, L, ...]");
        FL_ENFORCE(len.size() == 1 && (len[0] == x[0] || len[0] < 0 || x[0] < 0), ctx.Type(), ": ",
                   ctx.Describe("Length"), " must be [N] for ", ctx.Describe("X"), " (one length per sequence)");
        const DType lt = ctx.InputDType("Length");
        FL_ENFORCE(lt == DType::INT64 || lt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Length"),
                   " must be int64, got ", DTypeName(lt));
        if (ctx.IsRuntime()) return;  // the rows follow from Length's values: the kernel sets them
        ctx.SetOutput("Out", UnpaddedDims(x, -1), ctx.InputDType("X"));
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const std::vector<size_t> offsets = UnpadOffsets(ctx);
        Tensor* out = ctx.Output("Out");
        out->Resize(UnpaddedDims(x.dims(), static_cast<int64_t>(offsets.back())));
        out->set_lod({offsets});
        UnpadSequences(x.data<T>(), offsets, x.dims()[1], x.dims().Product(2, x.rank()),
                       out->mutable_data<T>(ctx.place()));
      });
  op.GradOp({"X", "Length", "Out@GRAD"})
      .Doc("X@GRAD[i] = Out@GRAD's sequence i followed by zero rows (sequence_pad of Out@GRAD with 0).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const std::vector<size_t> offsets = UnpadOffsets(ctx);
        CheckGradDims(ctx, UnpaddedDims(x.dims(), static_cast<int64_t>(offsets.back())));
        const int64_t width = x.dims().Product(2, x.rank());
        const std::vector<T> zeros(width, T(0));
        dx->Resize(x.dims());
        PadSequences(ctx.Input("Out@GRAD").data<T>(), offsets, x.dims()[1], width, zeros.data(),
                     dx->mutable_data<T>(ctx.place()));
      });
}

}  // namespace fl
