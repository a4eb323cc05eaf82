// sequence_conv: a 1-D convolution along each sequence of X's last LoD level (Fluid 1.8's sequence_conv_op with
// math/context_project.h). Row t of a sequence of length L sees the context rows t + contextStart + j for j in
// [0, contextLength): rows inside the sequence are X's; rows before its start or past its end are zeros, or with
// paddingTrainable the rows of PaddingData ([up_pad + down_pad, D], up_pad = max(0, -contextStart), down_pad =
// max(0, contextStart + contextLength - 1)): row r < 0 takes PaddingData row r + up_pad, row r >= L takes
// up_pad + r - L. This is where Fluid's ContextProjectFunctor places them (the two were compared over every
// contextStart in [-8, 8), contextLength in [1, 6] and length in [1, 11]). The window never crosses a sequence's
// ends.
//
// Forward: the context matrix Col [T, contextLength * D] (row t: its context rows side by side) is built for all
// rows at once, in parallel over sequences, then Out = Col @ Filter is ONE GEMM. Backward: dCol = Out@GRAD @
// Filter^T (one GEMM), X@GRAD adds each row's dCol blocks back into the rows they came from (per sequence, in
// parallel), PaddingData@GRAD the padding blocks, and Filter@GRAD = Col^T @ Out@GRAD with Col rebuilt (one GEMM).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "helpers/blas.h"
#include "helpers/lod.h"
#include "helpers/sequence_attrs.h"
#include "profiler.h"
#include "thread_pool.h"

namespace fl {

namespace {

using seq::Context;

void CheckSequenceConv(const OpCheckContext& ctx) {
  FL_ENFORCE(!ctx.Attr<bool>("paddingTrainable") || ctx.Attr<int32_t>("contextStart") != 0 ||
                 ctx.Attr<int32_t>("contextLength") != 1,
             "sequence_conv: paddingTrainable must be false when contextStart is 0 and contextLength is 1 (the "
             "window never leaves the sequence, so there is no padding to train)");
}

void InferSequenceConv(InferShapeContext& ctx) {
  const Context c(ctx);
  const DDim x = ctx.InputDim("X");
  const DDim filter = ctx.InputDim("Filter");
  FL_ENFORCE(x.size() == 2, "sequence_conv: ", ctx.Describe("X"), " must be 2-D [T, D]");
  FL_ENFORCE(filter.size() == 2, "sequence_conv: ", ctx.Describe("Filter"), " must be 2-D [contextLength * D, M]");
  FL_ENFORCE(filter[0] < 0 || x[1] < 0 || filter[0] == c.length * x[1], "sequence_conv: ", ctx.Describe("Filter"),
             " must have contextLength * D = ", c.length, " * ", x[1], " = ", c.length * x[1], " rows for ",
             ctx.Describe("X"));
  ctx.EnforceSameDType("X", "Filter");
  if (c.trainable) {
    FL_ENFORCE(ctx.HasInput("PaddingData"), "sequence_conv: paddingTrainable needs the PaddingData input [",
               c.up_pad + c.down_pad, ", D]");
    const DDim pad = ctx.InputDim("PaddingData");
    FL_ENFORCE(pad.size() == 2 && (pad[0] < 0 || pad[0] == c.up_pad + c.down_pad) &&
                   (pad[1] < 0 || x[1] < 0 || pad[1] == x[1]),
               "sequence_conv: ", ctx.Describe("PaddingData"), " must be [up_pad + down_pad, D] = [",
               c.up_pad + c.down_pad, ", ", x[1], "] for contextStart ", c.start, " and contextLength ", c.length,
               " (up_pad = max(0, -contextStart) = ", c.up_pad,
               ", down_pad = max(0, contextStart + contextLength - 1) = ", c.down_pad, ")");
    ctx.EnforceSameDType("X", "PaddingData");
  }
  ctx.SetOutput("Out", DDim{x[0], filter[1]}, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

// Col rows of every sequence: X rows, then the padding rows (or zeros) around them.
template <typename T>
void BuildContext(const Context& c, const std::vector<size_t>& offsets, const T* x, const T* pad, int64_t d, T* col) {
  const int64_t k = c.length * d;
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(T);
  ParallelForEachSequence(offsets, k, [&](int64_t, int64_t begin, int64_t end) {
    const int64_t len = end - begin;
    for (int64_t t = 0; t < len; ++t) {
      T* row = col + (begin + t) * k;
      int64_t lo, hi;
      c.Slots(t, len, &lo, &hi);
      if (hi > lo) std::memcpy(row + lo * d, x + (begin + t + c.start + lo) * d, (hi - lo) * row_bytes);
      if (pad) {
        if (lo > 0) std::memcpy(row, pad + (t + c.start + c.up_pad) * d, lo * row_bytes);
        if (hi < c.length)
          std::memcpy(row + hi * d, pad + (c.up_pad + t + c.start + hi - len) * d, (c.length - hi) * row_bytes);
      } else {
        std::fill(row, row + lo * d, T(0));
        std::fill(row + hi * d, row + k, T(0));
      }
    }
  });
}

// A [T, K] buffer from the allocator (cached between runs, counted in the tensor memory figures).
template <typename T>
T* Workspace(Tensor* t, int64_t rows, int64_t cols, const Place& place) {
  return t->mutable_data<T>(DDim{rows, cols}, place);
}

const auto kSequenceConv = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Context c(ctx);
  const Tensor& x = ctx.Input("X");
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
  const Tensor& filter = ctx.Input("Filter");
  const Tensor* pad = c.trainable ? &ctx.Input("PaddingData") : nullptr;
  const int64_t rows = x.dims()[0], d = x.dims()[1], m = filter.dims()[1], k = c.length * d;
  Tensor col;
  T* cd = Workspace<T>(&col, rows, k, ctx.place());
  {
    RecordEvent ev("sequence_conv::context", "Operator");
    BuildContext<T>(c, offsets, x.data<T>(), pad ? pad->data<T>() : nullptr, d, cd);
  }
  RecordEvent ev("sequence_conv::gemm", "Operator");
  blas::Gemm<T>(false, false, rows, m, k, T(1), cd, filter.data<T>(), T(0), ctx.Alloc<T>("Out"));
};

const auto kSequenceConvGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Context c(ctx);
  const Tensor& x = ctx.Input("X");
  const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
  const Tensor& filter = ctx.Input("Filter");
  const Tensor& dout = ctx.Input("Out@GRAD");
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  Tensor* dfilter = ctx.OutputOrNull("Filter@GRAD");
  Tensor* dpad = ctx.OutputOrNull("PaddingData@GRAD");
  const int64_t rows = x.dims()[0], d = x.dims()[1], m = filter.dims()[1], k = c.length * d;
  const T* g = dout.data<T>();
  if (dpad) {  // zeros unless trainable padding receives something below
    dpad->Resize(ctx.Input("PaddingData").dims());
    T* p = dpad->mutable_data<T>(ctx.place());
    std::fill(p, p + dpad->numel(), T(0));
  }
  if (dx || (dpad && c.trainable)) {
    Tensor dcol_t;
    T* dcol = Workspace<T>(&dcol_t, rows, k, ctx.place());
    {
      RecordEvent ev("sequence_conv_grad::dcol_gemm", "Operator");
      blas::Gemm<T>(false, true, rows, k, m, T(1), g, filter.data<T>(), T(0), dcol);
    }
    if (dx) {
      RecordEvent ev("sequence_conv_grad::dx", "Operator");
      dx->Resize(x.dims());
      T* dxd = dx->mutable_data<T>(ctx.place());
      ParallelForEachSequence(offsets, k, [&](int64_t, int64_t begin, int64_t end) {
        const int64_t len = end - begin;
        T* dseq = dxd + begin * d;
        std::fill(dseq, dseq + len * d, T(0));
        for (int64_t t = 0; t < len; ++t) {  // slots [lo, hi) of row t came from consecutive rows of X
          int64_t lo, hi;
          c.Slots(t, len, &lo, &hi);
          const T* src = dcol + (begin + t) * k + lo * d;
          T* dst = dseq + (t + c.start + lo) * d;
          for (int64_t i = 0, n = (hi - lo) * d; i < n; ++i) dst[i] += src[i];
        }
      });
    }
    if (dpad && c.trainable) {  // padding rows are shared by all sequences: added up serially (few rows)
      T* p = dpad->mutable_data<T>(ctx.place());
      ForEachSequence(offsets, [&](int64_t, int64_t begin, int64_t end) {
        const int64_t len = end - begin;
        for (int64_t t = 0; t < len; ++t) {
          int64_t lo, hi;
          c.Slots(t, len, &lo, &hi);
          const T* src = dcol + (begin + t) * k;
          if (lo > 0) {
            T* dst = p + (t + c.start + c.up_pad) * d;
            for (int64_t i = 0; i < lo * d; ++i) dst[i] += src[i];
          }
          if (hi < c.length) {
            T* dst = p + (c.up_pad + t + c.start + hi - len) * d;
            for (int64_t i = 0; i < (c.length - hi) * d; ++i) dst[i] += src[hi * d + i];
          }
        }
      });
    }
  }
  if (dfilter) {
    const Tensor* pad = c.trainable ? &ctx.Input("PaddingData") : nullptr;
    Tensor col;
    T* cd = Workspace<T>(&col, rows, k, ctx.place());
    {
      RecordEvent ev("sequence_conv_grad::context", "Operator");
      BuildContext<T>(c, offsets, x.data<T>(), pad ? pad->data<T>() : nullptr, d, cd);
    }
    RecordEvent ev("sequence_conv_grad::filter_gemm", "Operator");
    dfilter->Resize(filter.dims());
    blas::Gemm<T>(true, false, k, m, rows, T(1), cd, g, T(0), dfilter->mutable_data<T>(ctx.place()));
  }
};

}  // namespace

FL_REGISTER_OP(sequence_conv, op) {
  op.Doc(
        "1-D convolution along each sequence of X's last LoD level: Out[t] = concat(rows t + contextStart + j, j < "
        "contextLength) @ Filter, rows outside the sequence being zeros (or PaddingData's rows with "
        "paddingTrainable). Out has X's LoD.")
      .Input("X", "LoDTensor [T, D] with at least one LoD level")
      .DispensableInput("PaddingData", "[up_pad + down_pad, D]: the rows outside a sequence, with paddingTrainable")
      .Input("Filter", "[contextLength * D, M]: row j * D + i weighs column i of context row j")
      .Output("Out", "[T, M], X's LoD")
      .Attr<bool>("paddingTrainable", false, "the rows outside a sequence are PaddingData's (else zeros)")
      .RequiredAttr<int32_t>("contextLength", 1, "the window height: context rows per output row")
      .Min(1)
      .Attr<int32_t>("contextStart", 0,
                     "the window's first row relative to the output row (negative: rows before it, padded at a "
                     "sequence's start)")
      .Attr<int32_t>("contextStride", 1, "the window's stride; only 1, as in Fluid")
      .Constrain("1",
                 [](const Attribute& a) {
                   return std::get<int32_t>(a) == 1 ? ""
                                                    : "sequence_conv supports only contextStride = 1 (as Fluid 1.8)";
                 })
      .Check(CheckSequenceConv)
      .KernelDTypeFrom("X")
      .SetInferShape(InferSequenceConv)
      .CPUKernel<float, double>(kSequenceConv);
  op.GradOp({"X", "Filter", "PaddingData", "Out@GRAD"})
      .Doc(
          "Gradient of sequence_conv: dCol = Out@GRAD @ Filter^T added back into X@GRAD (and PaddingData@GRAD), "
          "Filter@GRAD = Col^T @ Out@GRAD with the context matrix rebuilt.")
      .Optional({"PaddingData"})
      .CPUKernel<float, double>(kSequenceConvGrad);
}

}  // namespace fl
