// The attributes of sequence_pool (its pooltype) and sequence_conv (its context window), and sequence_pool_grad's
// checked inputs, read by their CPU kernels (kernels/sequence_pool.cc, kernels/sequence_conv.cc) and their CUDA
// kernels (kernels/cuda/sequence.cu).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lod.h"
#include "op_context.h"

namespace fl {
namespace seq {

enum class PoolType { kAverage, kSum, kSqrt, kMax, kLast, kFirst };

template <typename Ctx>
PoolType GetPoolType(const Ctx& ctx) {  // the registration's OneOf has checked the name
  const std::string& t = ctx.template Attr<std::string>("pooltype");
  if (t == "AVERAGE") return PoolType::kAverage;
  if (t == "SUM") return PoolType::kSum;
  if (t == "SQRT") return PoolType::kSqrt;
  if (t == "MAX") return PoolType::kMax;
  if (t == "LAST") return PoolType::kLast;
  return PoolType::kFirst;
}

// sequence_pool_grad's inputs checked (Out@GRAD one row per sequence; MaxIndex for MAX) and X@GRAD allocated on the
// kernel's place.
template <typename T>
struct PoolGradArgs {
  PoolGradArgs(const ExecutionContext& ctx, Tensor* dx)
      : x(ctx.Input("X")),  // its dims and LoD only
        offsets(SequenceOffsets(ctx, "X")),
        dout(ctx.Input("Out@GRAD")),
        type(GetPoolType(ctx)),
        sequences(SequenceCount(offsets)),
        w(x.dims().Product(1, x.rank())) {
    DDim want = x.dims();
    want[0] = sequences;
    FL_ENFORCE(dout.dims() == want, "sequence_pool_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
               " must be ", want, ": one row per sequence of X '", ctx.InputName("X"), "' ", x.dims(), " LoD ",
               x.LoDString());
    if (type == PoolType::kMax) {
      const Tensor* mi = ctx.InputOrNull("MaxIndex");
      FL_ENFORCE(mi != nullptr,
                 "sequence_pool_grad: pooltype MAX needs MaxIndex, which sequence_pool writes only when "
                 "is_test is false");
      FL_ENFORCE(mi->dtype() == DType::INT32 && mi->dims() == want, "sequence_pool_grad: MaxIndex '",
                 ctx.InputName("MaxIndex"), "' ", DTypeName(mi->dtype()), " ", mi->dims(), " must be int32 ", want);
      index = mi->data<int32_t>();
    }
    dx->Resize(x.dims());
    d = dx->mutable_data<T>(ctx.place());
  }
  const Tensor& x;
  const std::vector<size_t>& offsets;
  const Tensor& dout;
  const PoolType type;
  const int64_t sequences, w;
  const int32_t* index = nullptr;
  T* d = nullptr;
};

// The context window of one op, resolved from its attributes.
struct Context {
  int64_t start, length, up_pad, down_pad;
  bool trainable;

  template <typename Ctx>
  explicit Context(const Ctx& ctx)
      : start(ctx.template Attr<int32_t>("contextStart")),
        length(ctx.template Attr<int32_t>("contextLength")),
        up_pad(std::max<int64_t>(0, -start)),
        down_pad(std::max<int64_t>(0, start + length - 1)),
        trainable(ctx.template Attr<bool>("paddingTrainable")) {}

  // Row t of a sequence of length len reads slots [lo, hi) from the sequence (rows t + start + lo ...), slots
  // [0, lo) from the upper padding (rows t + start + up_pad ...) and [hi, length) from the lower padding (rows
  // up_pad + t + start + hi - len ...). lo <= hi always; a row with no slot inside the sequence has lo == hi.
  void Slots(int64_t t, int64_t len, int64_t* lo, int64_t* hi) const {
    *lo = std::min(length, std::max<int64_t>(0, -start - t));
    *hi = std::max(*lo, std::min(length, len - start - t));
  }
};

}  // namespace seq
}  // namespace fl
