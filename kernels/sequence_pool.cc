// sequence_pool: one row per sequence of X's last LoD level (Fluid 1.8's sequence_pool_op + math/sequence_pooling):
// AVERAGE, SUM, SQRT (sum / sqrt(len)), MAX, LAST, FIRST over the rows of each sequence, element by element. An empty
// sequence gives pad_value (and no gradient). Out keeps X's upper LoD levels: a 2-level input pools its sentences and
// Out's LoD is X's first level, one row per sentence.
//
// MAX also writes MaxIndex (int32, Out's dims): the row of X each output element came from (the first maximum, as
// Fluid's strict >), or -1 for an empty sequence. The gradient routes Out@GRAD through it; with is_test set it is
// not written (Fluid's inference mode). Sequences are pooled in parallel when the tensor is large enough.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "grad_op_maker.h"
#include "helpers/lod.h"
#include "helpers/sequence_attrs.h"
#include "thread_pool.h"

namespace fl {

namespace {

using seq::GetPoolType;
using seq::PoolType;

// Out is [number of sequences] + X.dims[1:]; the count is known only from the LoD, so InferShape gives -1 and the
// kernel sizes Out (and MaxIndex) at run time.
void InferSequencePool(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() >= 1, "sequence_pool: ", ctx.Describe("X"), " must have rank >= 1");
  if (GetPoolType(ctx) == PoolType::kMax)
    FL_ENFORCE(ctx.HasOutput("MaxIndex"), "sequence_pool: pooltype MAX needs the MaxIndex output");
  if (ctx.IsRuntime()) return;
  DDim out = x;
  out[0] = -1;
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  if (GetPoolType(ctx) == PoolType::kMax) ctx.SetOutput("MaxIndex", out, DType::INT32);
}

template <typename T>
void PoolSequence(PoolType type, const T* x, int64_t len, int64_t begin, int64_t w, T pad, T* out, int32_t* index) {
  if (len == 0) {
    std::fill(out, out + w, pad);
    if (index) std::fill(index, index + w, -1);
    return;
  }
  switch (type) {
    case PoolType::kFirst: std::memcpy(out, x, static_cast<size_t>(w) * sizeof(T)); return;
    case PoolType::kLast: std::memcpy(out, x + (len - 1) * w, static_cast<size_t>(w) * sizeof(T)); return;
    case PoolType::kMax:
      std::memcpy(out, x, static_cast<size_t>(w) * sizeof(T));
      if (index) {
        std::fill(index, index + w, static_cast<int32_t>(begin));
        for (int64_t r = 1; r < len; ++r) {
          const T* xr = x + r * w;
          const int32_t row = static_cast<int32_t>(begin + r);
          for (int64_t k = 0; k < w; ++k) {
            const bool larger = xr[k] > out[k];
            out[k] = larger ? xr[k] : out[k];
            index[k] = larger ? row : index[k];
          }
        }
      } else {
        for (int64_t r = 1; r < len; ++r) {
          const T* xr = x + r * w;
          for (int64_t k = 0; k < w; ++k) out[k] = xr[k] > out[k] ? xr[k] : out[k];
        }
      }
      return;
    default: {  // AVERAGE, SUM, SQRT: a sum of rows, then a scale
      std::memcpy(out, x, static_cast<size_t>(w) * sizeof(T));
      for (int64_t r = 1; r < len; ++r) {
        const T* xr = x + r * w;
        for (int64_t k = 0; k < w; ++k) out[k] += xr[k];
      }
      const T scale = type == PoolType::kAverage ? T(1) / static_cast<T>(len)
                      : type == PoolType::kSqrt  ? T(1) / std::sqrt(static_cast<T>(len))
                                                 : T(1);
      if (scale != T(1))
        for (int64_t k = 0; k < w; ++k) out[k] *= scale;
    }
  }
}

const auto kSequencePool = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const LoD& lod = CheckedLoD(ctx, "X");
  const std::vector<size_t>& offsets = lod.back();
  const PoolType type = GetPoolType(ctx);
  const int64_t sequences = SequenceCount(offsets), rows = x.dims()[0], w = x.dims().Product(1, x.rank());
  DDim out_dims = x.dims();
  out_dims[0] = sequences;
  Tensor* out = ctx.Output("Out");
  out->Resize(out_dims);
  out->set_lod(DropLastLevel(lod));
  T* o = out->mutable_data<T>(ctx.place());
  int32_t* index = nullptr;
  if (type == PoolType::kMax && !ctx.Attr<bool>("is_test")) {
    FL_ENFORCE(rows <= std::numeric_limits<int32_t>::max(), "sequence_pool: X '", ctx.InputName("X"), "' ", x.dims(),
               " has more rows than MAX pooling's int32 MaxIndex can address");
    Tensor* mi = ctx.Output("MaxIndex");
    mi->Resize(out_dims);
    mi->set_lod(out->lod());
    index = mi->mutable_data<int32_t>(ctx.place());
  }
  const T pad = static_cast<T>(ctx.Attr<float>("pad_value"));
  const T* xd = x.data<T>();
  ParallelForEachSequence(offsets, w, [&](int64_t s, int64_t begin, int64_t end) {
    PoolSequence<T>(type, xd + begin * w, end - begin, begin, w, pad, o + s * w, index ? index + s * w : nullptr);
  });
};

// X@GRAD: each sequence's rows get their share of the sequence's Out@GRAD row (all of it for SUM, 1/len for AVERAGE,
// 1/sqrt(len) for SQRT; only the first or last row for FIRST and LAST; for MAX, the element MaxIndex names). Rows
// of nothing (an empty sequence has none) stay zero.
const auto kSequencePoolGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const seq::PoolGradArgs<T> args(ctx, dx);
  const Tensor &x = args.x, &dout = args.dout;
  const std::vector<size_t>& offsets = args.offsets;
  const seq::PoolType type = args.type;
  const int64_t w = args.w;
  const int32_t* index = args.index;
  T* d = args.d;
  const T* g = dout.data<T>();
  const bool scatter = type == PoolType::kMax || type == PoolType::kFirst || type == PoolType::kLast;
  ParallelForEachSequence(offsets, w, [&](int64_t s, int64_t begin, int64_t end) {
    const int64_t len = end - begin;
    const T* gs = g + s * w;
    T* ds = d + begin * w;
    if (scatter) std::fill(ds, ds + len * w, T(0));
    if (len == 0) return;
    if (type == PoolType::kFirst) {
      std::memcpy(ds, gs, static_cast<size_t>(w) * sizeof(T));
    } else if (type == PoolType::kLast) {
      std::memcpy(ds + (len - 1) * w, gs, static_cast<size_t>(w) * sizeof(T));
    } else if (type == PoolType::kMax) {
      const int32_t* is = index + s * w;
      for (int64_t k = 0; k < w; ++k) {
        FL_ENFORCE(is[k] >= begin && is[k] < end, "sequence_pool_grad: MaxIndex '", ctx.InputName("MaxIndex"),
                   "' holds row ", is[k], " at position ", s * w + k, ", outside sequence ", s, "'s rows [", begin,
                   ", ", end, ") of X '", ctx.InputName("X"), "' LoD ", x.LoDString());
        d[is[k] * w + k] = gs[k];
      }
    } else {
      const T scale = type == PoolType::kAverage ? T(1) / static_cast<T>(len)
                      : type == PoolType::kSqrt  ? T(1) / std::sqrt(static_cast<T>(len))
                                                 : T(1);
      for (int64_t r = 0; r < len; ++r)
        for (int64_t k = 0; k < w; ++k) ds[r * w + k] = gs[k] * scale;
    }
  });
};

}  // namespace

FL_REGISTER_OP(sequence_pool, op) {
  op.Doc(
        "Pools each sequence of X's last LoD level into one row: AVERAGE, SUM, SQRT (sum / sqrt(length)), MAX, LAST "
        "or FIRST; an empty sequence gives pad_value. Out keeps X's upper LoD levels.")
      .Input("X", "LoDTensor [T, ...] with at least one LoD level; its last level marks the sequences")
      .Output("Out", "[number of sequences, ...]; LoD: X's LoD without its last level")
      .DispensableOutput("MaxIndex",
                         "int32, Out's dims: the row of X each MAX output came from (-1 for an empty sequence); "
                         "written for pooltype MAX when is_test is false")
      .Attr<bool>("is_test", false, "inference only: MAX does not write MaxIndex")
      .Attr("pooltype", "AVERAGE", "AVERAGE, SUM, SQRT, LAST, FIRST or MAX")
      .OneOf({"AVERAGE", "SUM", "SQRT", "LAST", "FIRST", "MAX"})
      .Attr<float>("pad_value", 0.0f, "the output of an empty sequence")
      .KernelDTypeFrom("X")
      .SetInferShape(InferSequencePool)
      .CPUKernel<float, double>(kSequencePool);
  op.GradOp({"X", "MaxIndex", "Out@GRAD"})
      .Doc(
          "Gradient of sequence_pool: each sequence's Out@GRAD row spread over its rows as the pooling took them "
          "(MAX through MaxIndex); empty sequences give nothing.")
      .Optional({"MaxIndex"})
      .CPUKernel<float, double>(kSequencePoolGrad);
}

}  // namespace fl
