// Shared reduction machinery for reduce_*, mean, the softmax family and the losses.
//
// A set of reduced axes turns a tensor into alternating runs of kept and reduced axes (adjacent axes of
// the same kind merge, size-1 axes vanish). One reduced run is an [outer, reduce, inner] view and is
// reduced in one pass by ReduceRuns; several reduced runs take one pass each, innermost first (sum and
// max compose). ForEachReduced walks the input in memory order together with the output position each
// element reduces into: the broadcast every reduction gradient needs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "op_context.h"
#include "thread_pool.h"
#include "vec_exp.h"

namespace fl {

// ------------------------------------------------------------------ reducers

struct SumReducer {
  template <typename T> static T Init() { return T(0); }
  template <typename T> static T Combine(T a, T b) { return a + b; }
};

struct MaxReducer {
  template <typename T> static T Init() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  template <typename T> static T Combine(T a, T b) { return a > b ? a : b; }
};

struct ProdReducer {
  template <typename T> static T Init() { return T(1); }
  template <typename T> static T Combine(T a, T b) { return a * b; }
};

// Logical reducers for bool tensors (reduce_all, reduce_any).
struct AndReducer {
  template <typename T> static T Init() { return T(true); }
  template <typename T> static T Combine(T a, T b) { return a && b; }
};
struct OrReducer {
  template <typename T> static T Init() { return T(false); }
  template <typename T> static T Combine(T a, T b) { return a || b; }
};

// ------------------------------------------------------------------ axes

// Normalises a possibly negative axis into [0, rank); the error names the op and the input.
inline int NormalizeAxis(const InferShapeContext& ctx, const char* slot, int axis, const char* attr = "axis") {
  const int rank = ctx.InputDim(slot).size();
  FL_ENFORCE(axis >= -rank && axis < rank, ctx.Type(), ": ", attr, "=", axis, " is out of range for ",
             ctx.Describe(slot), " (rank ", rank, ", valid range [", -rank, ", ", rank, "))");
  return axis < 0 ? axis + rank : axis;
}

// The reduce ops' `dim` / `reduce_all` attributes as a per-axis mask. Kernels call this after InferShape
// validated the attributes; InferShape calls ReducedAxes, which names the op and input on error.
// `dim` must be in range even with reduce_all, as in Fluid (the layer sets reduce_all when dim names as many
// axes as X has: reduce_sum(x, dim=[1]) on a rank-1 x is an error, not a sum of everything). Rank 0 with
// reduce_all (a shape unknown at build time, or a scalar) has nothing to check.
inline std::vector<bool> ReduceMask(int rank, const std::vector<int32_t>& dim, bool reduce_all) {
  std::vector<bool> mask(rank, reduce_all);
  if (reduce_all && rank == 0) return mask;
  for (int d : dim) {
    const int a = d < 0 ? d + rank : d;
    FL_ENFORCE(a >= 0 && a < rank, "reduce: dim ", d, " is out of range for rank ", rank);
    mask[a] = true;
  }
  if (reduce_all) mask.assign(rank, true);
  return mask;
}

inline std::vector<bool> ReducedAxes(const InferShapeContext& ctx, const char* slot = "X") {
  const auto& dim = ctx.Attr<std::vector<int32_t>>("dim");
  const bool reduce_all = ctx.Attr<bool>("reduce_all");
  if (!reduce_all || ctx.InputDim(slot).size() > 0)
    for (int d : dim) NormalizeAxis(ctx, slot, d, "dim");
  return ReduceMask(ctx.InputDim(slot).size(), dim, reduce_all);
}

// ------------------------------------------------------------------ layout

struct ReduceLayout {
  int n = 0;                     // number of runs
  int64_t size[DDim::kMaxRank];  // elements per run
  bool reduced[DDim::kMaxRank];  // run kind
  int64_t numel = 1;             // input elements
  int64_t reduce_count = 1;      // input elements combined into one output
  int64_t out_numel = 1;         // output elements
};

inline ReduceLayout MakeReduceLayout(const DDim& dims, const std::vector<bool>& mask) {
  ReduceLayout l;
  for (int i = 0; i < dims.size(); ++i) {
    l.numel *= dims[i];
    (mask[i] ? l.reduce_count : l.out_numel) *= dims[i];
    if (dims[i] == 1) continue;
    if (l.n > 0 && l.reduced[l.n - 1] == mask[i]) {
      l.size[l.n - 1] *= dims[i];
    } else {
      l.size[l.n] = dims[i];
      l.reduced[l.n] = mask[i];
      ++l.n;
    }
  }
  return l;
}

// The [outer, reduce, inner] view of reducing one axis (softmax's axis).
struct AxisView {
  int64_t outer, axis, inner;
};
inline AxisView ViewAroundAxis(const DDim& dims, int axis) {
  if (axis < 0) axis += dims.size();
  return AxisView{dims.Product(0, axis), dims[axis], dims.Product(axis + 1, dims.size())};
}
// The same view as a ReduceLayout (for ForEachReduced over a per-position result).
inline ReduceLayout AxisLayout(const AxisView& v) {
  return MakeReduceLayout(DDim{v.outer, v.axis, v.inner}, {false, true, false});
}

// ------------------------------------------------------------------ reduction loops

// Reduces load(base), ..., load(base + n - 1). Eight independent accumulators let the compiler vectorise
// (and keep float sums more accurate than one running total).
template <typename Rd, typename T, typename Load>
inline T ReduceContiguous(int64_t base, int64_t n, Load load) {
  constexpr int kLanes = 8;
  if (n < kLanes) {
    T a = Rd::template Init<T>();
    for (int64_t j = 0; j < n; ++j) a = Rd::Combine(a, static_cast<T>(load(base + j)));
    return a;
  }
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = load(base + l);
  int64_t j = kLanes;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = Rd::Combine(acc[l], static_cast<T>(load(base + j + l)));
  for (; j < n; ++j) acc[0] = Rd::Combine(acc[0], static_cast<T>(load(base + j)));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = Rd::Combine(acc[l], acc[l + w]);
  return acc[0];
}

// out[o, i] = reduce_r load((o * r_len + r) * inner + i) for the [outer, r_len, inner] view. `out` may
// alias the loaded buffer (each output block lies at or before the input block it is read from), which
// the multi-pass reduction uses to work in place.
template <typename Rd, typename T, typename Load>
void ReduceRuns(int64_t outer, int64_t r_len, int64_t inner, Load load, T* out) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) out[o] = ReduceContiguous<Rd, T>(o * r_len, r_len, load);
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    T* y = out + o * inner;
    const int64_t base = o * r_len * inner;
    if (r_len == 0) {
      for (int64_t i = 0; i < inner; ++i) y[i] = Rd::template Init<T>();
      continue;
    }
    for (int64_t i = 0; i < inner; ++i) y[i] = load(base + i);
    for (int64_t r = 1; r < r_len; ++r)
      for (int64_t i = 0; i < inner; ++i) y[i] = Rd::Combine(y[i], static_cast<T>(load(base + r * inner + i)));
  }
}

// out = x reduced over the layout's reduced runs (out holds l.out_numel() elements).
template <typename Rd, typename T>
void Reduce(const T* x, const ReduceLayout& l, T* out) {
  if (l.numel == 0) {  // an empty reduced axis leaves the identity
    std::fill(out, out + l.out_numel, Rd::template Init<T>());
    return;
  }
  int last = -1, count = 0;
  for (int k = 0; k < l.n; ++k)
    if (l.reduced[k]) last = k, ++count;
  if (count == 0) {  // nothing (or only size-1 axes) reduced
    std::copy(x, x + l.numel, out);
    return;
  }
  // Passes run from the innermost reduced run outwards; all but the last go to a scratch buffer.
  std::unique_ptr<T[]> scratch;  // not a std::vector: vector<bool> has no data()
  if (count > 1) scratch.reset(new T[l.numel / l.size[last]]);
  const T* src = x;
  int64_t inner = 1;
  int done = 0;
  for (int k = l.n - 1; k >= 0; --k) {
    if (!l.reduced[k]) {
      inner *= l.size[k];
      continue;
    }
    int64_t outer = 1;
    for (int j = 0; j < k; ++j) outer *= l.size[j];
    T* dst = ++done == count ? out : scratch.get();
    ReduceRuns<Rd, T>(outer, l.size[k], inner, [src](int64_t i) { return src[i]; }, dst);
    src = dst;
  }
}

// x (slot `in`) reduced over `mask` into `out` (already shaped by InferShape); mean divides by the count.
template <typename Rd, typename T>
void ReduceTensor(const ExecutionContext& ctx, const std::vector<bool>& mask, bool mean, const char* in = "X",
                  const char* out = "Out") {
  const Tensor& x = ctx.Input(in);
  const ReduceLayout l = MakeReduceLayout(x.dims(), mask);
  Tensor* o = ctx.Output(out);
  FL_ENFORCE(o->numel() == l.out_numel, ctx.Type(), ": Out ", o->dims(), " does not hold the ", l.out_numel,
             " results of reducing ", in, " ", x.dims());
  T* op = o->mutable_data<T>(ctx.place());
  Reduce<Rd>(x.data<T>(), l, op);
  if constexpr (std::is_same_v<T, bool>) {
    FL_ENFORCE(!mean, ctx.Type(), ": no mean of bool");
  } else if (mean) {
    const T scale = T(1) / static_cast<T>(l.reduce_count);
    for (int64_t i = 0; i < l.out_numel; ++i) op[i] *= scale;
  }
}

// Calls f(x_index, out_index) for every input element in memory order, with the index of the output
// element it reduces into. The innermost loop is contiguous in x and either contiguous or constant in out.
template <typename F>
void ForEachReduced(const ReduceLayout& l, F f) {
  if (l.n == 0) {
    if (l.numel == 1) f(int64_t{0}, int64_t{0});
    return;
  }
  int64_t ostride[DDim::kMaxRank], idx[DDim::kMaxRank] = {0};
  int64_t s = 1;
  for (int k = l.n - 1; k >= 0; --k) {
    ostride[k] = l.reduced[k] ? 0 : s;
    if (!l.reduced[k]) s *= l.size[k];
  }
  const int64_t inner = l.size[l.n - 1];
  const bool bcast = l.reduced[l.n - 1];
  const int64_t blocks = inner ? l.numel / inner : 0;
  int64_t xo = 0, oo = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    if (bcast) {
      for (int64_t j = 0; j < inner; ++j) f(xo + j, oo);
    } else {
      for (int64_t j = 0; j < inner; ++j) f(xo + j, oo + j);
    }
    xo += inner;
    for (int k = l.n - 2; k >= 0; --k) {
      oo += ostride[k];
      if (++idx[k] < l.size[k]) break;
      oo -= ostride[k] * l.size[k];
      idx[k] = 0;
    }
  }
}

// ------------------------------------------------------------------ softmax

// The blocks [o0, o1) of SoftmaxForward, on one thread.
template <typename T, typename After>
void SoftmaxBlocks(const T* x, T* y, const AxisView& v, int64_t o0, int64_t o1, After& after) {
  std::vector<T> mx(v.inner), sum(v.inner);
  const int64_t block = v.axis * v.inner;
  for (int64_t o = o0; o < o1; ++o) {
    const T* xb = x + o * block;
    T* yb = y + o * block;
    ReduceRuns<MaxReducer, T>(1, v.axis, v.inner, [xb](int64_t k) { return xb[k]; }, mx.data());
    if (v.inner == 1) {  // the common last-axis case: one contiguous, vectorisable row
      const T m = mx[0];
      for (int64_t r = 0; r < v.axis; ++r) yb[r] = VecExp(xb[r] - m);
    } else {
      for (int64_t r = 0; r < v.axis; ++r)
        for (int64_t i = 0; i < v.inner; ++i) yb[r * v.inner + i] = VecExp(xb[r * v.inner + i] - mx[i]);
    }
    ReduceRuns<SumReducer, T>(1, v.axis, v.inner, [yb](int64_t k) { return yb[k]; }, sum.data());
    after(o, static_cast<const T*>(mx.data()), static_cast<const T*>(sum.data()));
    for (int64_t i = 0; i < v.inner; ++i) sum[i] = T(1) / sum[i];
    if (v.inner == 1) {
      const T s = sum[0];
      for (int64_t r = 0; r < v.axis; ++r) yb[r] *= s;
    } else {
      for (int64_t r = 0; r < v.axis; ++r)
        for (int64_t i = 0; i < v.inner; ++i) yb[r * v.inner + i] *= sum[i];
    }
  }
}

// Softmax over the middle axis of an [outer, axis, inner] view: y = exp(x - max) / sum. For each outer
// block, after(o, max, sum) sees the per-position max and sum of exp (inner values each) so losses can
// use log-sum-exp without another pass. The block stays in cache between the four sweeps. The blocks are
// split over the thread pool, so `after` may run on several threads at once (each block on one).
template <typename T, typename After>
void SoftmaxForward(const T* x, T* y, const AxisView& v, After after) {
  const int64_t block = v.axis * v.inner;
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, block));
  ParallelFor(v.outer, grain, [&](int64_t o0, int64_t o1) { SoftmaxBlocks(x, y, v, o0, o1, after); });
}

template <typename T>
void SoftmaxForward(const T* x, T* y, const AxisView& v) {
  SoftmaxForward(x, y, v, [](int64_t, const T*, const T*) {});
}

// Fluid's TolerableValue: log(0) = -inf becomes a large finite number so losses stay finite.
template <typename T>
inline T TolerableLog(T x) {
  constexpr T kBig = static_cast<T>(1e20);
  T v = std::log(x);
  return v < -kBig ? -kBig : (v > kBig ? kBig : v);
}

}  // namespace fl
