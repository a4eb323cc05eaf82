// The attributes of sequence_pool (its pooltype) and sequence_conv (its context window), read by their CPU kernels
// (kernels/sequence_pool.cc, kernels/sequence_conv.cc) and their CUDA kernels (kernels/cuda/sequence.cu).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

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
