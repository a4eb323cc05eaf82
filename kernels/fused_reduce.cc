// fused_reduce: several reductions of one input X with the same axes (dim / keep_dim / reduce_all), computed in one
// pass over X. Made by the fuse_reductions pass (kernels/passes/fuse_reductions.cc) from reduce_sum / reduce_mean /
// reduce_max ops of X and of X * X (elementwise_mul(X, X), elementwise_mul(X, assign(X) or scale(X, 1)), square(X)),
// e.g. the tuning notes' pair reduce_sum(x, dim=[1]) and reduce_sum(x * identity(x), dim=[1]), or a mean and the
// mean of squares, or a mean and the variance around it, or softmax's max and sum of exponentials. `reductions`
// names what each Out is:
//   sum, mean, max                     of X;
//   sum_square, mean_square            of X * X (the product never materialises);
//   sum_square_dev, mean_square_dev    of (X - mean)^2, mean being X's mean over the same axes as reduce_mean
//                                      computes it (square(X - reduce_mean(X, keep_dim=True)): a variance);
//   sum_exp_dev                        of exp(X - max), max being X's max over the same axes (softmax's
//                                      denominator); the optional Exp output gets exp(X - max) itself when the
//                                      program reads it (softmax's numerator), else it never materialises.
// `fused_ops` names the ops it replaced (the profiler's args show them).
//
// The values are bit for bit those of the unfused ops: every output is accumulated in the order of helpers/reduce.h
// (ReduceContiguous's eight lanes along a contiguous reduced run, ReduceRuns' row order across one), X * X is
// rounded to T before it is added, as elementwise_mul's output is (it goes through a buffer, so the compiler cannot
// contract it into an FMA), and a mean is the sum times T(1) / count, as reduce_mean's is. What changes is the
// memory traffic: one reduced run (the usual case: a last-axis or first-axis reduction) is walked in cache-sized
// pieces, row by row or in column tiles, each piece read from memory once for every output (the deviations of a
// column tile take a second sweep over its rows, once their means are known); the pieces are split over the thread
// pool. Several separate reduced runs (dim=[0, 2] of a rank-3 X) fall back to one Reduce per output.
// fused_reduce has no gradient: the pass runs after backward, and the grad ops of the reductions it replaced stay.
#include <cstring>
#include <string>

#include "helpers/reduce.h"
#include "helpers/reduce_shape.h"

namespace fl {

namespace {

constexpr int64_t kColumnTile = 1024;  // columns per piece: the tile's rows and accumulators stay in L1

// What each output accumulates: a channel (the sum of X, the sum of X * X, the max of X, the sum of (X - mean)^2
// with the mean that reduce_mean computes, the sum of exp(X - max)) and whether it is a mean.
enum Channel { kSum = 0, kSumSquare = 1, kMax = 2, kSumSquareDev = 3, kSumExpDev = 4, kChannels = 5 };

struct Reduction {
  Channel channel;
  bool mean;
};

const char* const kReductionNames[] = {
    "sum", "mean", "max", "sum_square", "mean_square", "sum_square_dev", "mean_square_dev", "sum_exp_dev"};
constexpr const char* kReductionList =
    "sum, mean, max, sum_square, mean_square, sum_square_dev, mean_square_dev, sum_exp_dev";

Reduction ParseReduction(const std::string& s) {
  if (s == "sum") return {kSum, false};
  if (s == "mean") return {kSum, true};
  if (s == "max") return {kMax, false};
  if (s == "sum_square") return {kSumSquare, false};
  if (s == "mean_square") return {kSumSquare, true};
  if (s == "sum_square_dev") return {kSumSquareDev, false};
  if (s == "mean_square_dev") return {kSumSquareDev, true};
  if (s == "sum_exp_dev") return {kSumExpDev, false};
  FL_THROW("fused_reduce: reduction '", s, "' is not one of ", kReductionList);
}

template <typename T>
struct Channels {
  bool need[kChannels] = {};  // kSumSquareDev needs kSum (its mean), kSumExpDev kMax
  T* out[kChannels] = {};     // out_numel values each
  T scale = T(1);             // 1 / count: a sum to a mean, as reduce_mean's
  T* exp = nullptr;           // exp(X - max) in X's shape, when the program reads it (the Exp output)
};

// Rows of a last-axis reduction ([outer, r] with inner == 1): each row is read from memory once and reduced from
// cache by ReduceContiguous, once per channel. `sq` holds r values (this thread's squares of the row).
template <typename T>
void ReduceRows(const T* x, int64_t o0, int64_t o1, int64_t r, const Channels<T>& c, T* sq) {
  auto load_sq = [sq](int64_t j) { return sq[j]; };
  for (int64_t o = o0; o < o1; ++o) {
    const T* row = x + o * r;
    auto load = [row](int64_t j) { return row[j]; };
    if (c.need[kSum]) c.out[kSum][o] = ReduceContiguous<SumReducer, T>(0, r, load);
    if (c.need[kMax]) c.out[kMax][o] = ReduceContiguous<MaxReducer, T>(0, r, load);
    if (c.need[kSumSquare]) {
      for (int64_t j = 0; j < r; ++j) sq[j] = row[j] * row[j];
      c.out[kSumSquare][o] = ReduceContiguous<SumReducer, T>(0, r, load_sq);
    }
    if (c.need[kSumSquareDev]) {
      const T m = c.out[kSum][o] * c.scale;
      for (int64_t j = 0; j < r; ++j) {
        const T d = row[j] - m;
        sq[j] = d * d;
      }
      c.out[kSumSquareDev][o] = ReduceContiguous<SumReducer, T>(0, r, load_sq);
    }
    if (c.need[kSumExpDev]) {
      const T m = c.out[kMax][o];
      T* e = c.exp ? c.exp + o * r : sq;
      for (int64_t j = 0; j < r; ++j) e[j] = VecExp(row[j] - m);
      c.out[kSumExpDev][o] = ReduceContiguous<SumReducer, T>(0, r, [e](int64_t j) { return e[j]; });
    }
  }
}

// A reduction across rows ([outer, r, inner], inner > 1) over the columns [i0, i1) of block o: ReduceRuns' order
// (y = the first row, then each further row combined in turn), with the tile's accumulators in cache. The squared
// deviations take a second sweep over the tile's rows, once their means are known. `sq` holds two tiles.
template <typename T>
void ReduceColumns(const T* x, int64_t o, int64_t r, int64_t inner, int64_t i0, int64_t i1, const Channels<T>& c,
                   T* sq) {
  const int64_t w = i1 - i0;
  auto at = [&](Channel ch) { return c.need[ch] ? c.out[ch] + o * inner + i0 : nullptr; };
  T *ys = at(kSum), *yq = at(kSumSquare), *ym = at(kMax), *yd = at(kSumSquareDev), *ye = at(kSumExpDev);
  auto row_at = [&](int64_t k) { return x + (o * r + k) * inner + i0; };
  for (int64_t k = 0; k < r; ++k) {
    const T* row = row_at(k);
    if (yq)
      for (int64_t i = 0; i < w; ++i) sq[i] = row[i] * row[i];
    if (k == 0) {
      if (ys) std::memcpy(ys, row, w * sizeof(T));
      if (ym) std::memcpy(ym, row, w * sizeof(T));
      if (yq) std::memcpy(yq, sq, w * sizeof(T));
      continue;
    }
    if (ys)
      for (int64_t i = 0; i < w; ++i) ys[i] = SumReducer::Combine(ys[i], row[i]);
    if (ym)
      for (int64_t i = 0; i < w; ++i) ym[i] = MaxReducer::Combine(ym[i], row[i]);
    if (yq)
      for (int64_t i = 0; i < w; ++i) yq[i] = SumReducer::Combine(yq[i], sq[i]);
  }
  if (yd) {
    T* m = sq + kColumnTile;
    for (int64_t i = 0; i < w; ++i) m[i] = ys[i] * c.scale;
    for (int64_t k = 0; k < r; ++k) {
      const T* row = row_at(k);
      for (int64_t i = 0; i < w; ++i) {
        const T d = row[i] - m[i];
        sq[i] = d * d;
      }
      if (k == 0) std::memcpy(yd, sq, w * sizeof(T));
      else
        for (int64_t i = 0; i < w; ++i) yd[i] = SumReducer::Combine(yd[i], sq[i]);
    }
  }
  if (ye) {
    for (int64_t k = 0; k < r; ++k) {
      const T* row = row_at(k);
      T* e = c.exp ? c.exp + (o * r + k) * inner + i0 : sq;
      for (int64_t i = 0; i < w; ++i) e[i] = VecExp(row[i] - ym[i]);
      if (k == 0) std::memcpy(ye, e, w * sizeof(T));
      else
        for (int64_t i = 0; i < w; ++i) ye[i] = SumReducer::Combine(ye[i], e[i]);
    }
  }
}

template <typename T>
void ComputeChannels(const T* x, const ReduceLayout& l, const Channels<T>& c) {
  int reduced = 0, k = -1;
  for (int j = 0; j < l.n; ++j)
    if (l.reduced[j]) ++reduced, k = j;
  if (reduced != 1 || l.numel == 0) {  // several reduced runs, none, or an empty X: one Reduce per channel
    std::unique_ptr<T[]> sq;
    for (int ch = 0; ch < kChannels; ++ch) {  // in order: the sum before the deviations from its mean
      if (!c.need[ch]) continue;
      const T* src = x;
      if (ch == kSumExpDev) {
        T* e = c.exp;
        if (!e) {
          if (!sq) sq.reset(new T[l.numel]);
          e = sq.get();
        }
        const T* mx = c.out[kMax];
        ForEachReduced(l, [x, mx, e](int64_t i, int64_t o) { e[i] = VecExp(x[i] - mx[o]); });
        src = e;
      } else if (ch == kSumSquare || ch == kSumSquareDev) {
        if (!sq) sq.reset(new T[l.numel]);
        if (ch == kSumSquare) {
          for (int64_t i = 0; i < l.numel; ++i) sq[i] = x[i] * x[i];
        } else {
          const T* s = c.out[kSum];
          const T scale = c.scale;
          T* q = sq.get();
          ForEachReduced(l, [x, s, scale, q](int64_t i, int64_t o) {
            const T d = x[i] - s[o] * scale;
            q[i] = d * d;
          });
        }
        src = sq.get();
      }
      if (ch == kMax) Reduce<MaxReducer>(src, l, c.out[ch]);
      else Reduce<SumReducer>(src, l, c.out[ch]);
    }
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int j = 0; j < k; ++j) outer *= l.size[j];
  for (int j = k + 1; j < l.n; ++j) inner *= l.size[j];
  const int64_t r = l.size[k];
  const bool squares = c.need[kSumSquare] || c.need[kSumSquareDev] || (c.need[kSumExpDev] && !c.exp);
  if (inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kMinParallelElements / r);
    ParallelFor(outer, grain, [&](int64_t o0, int64_t o1) {
      std::unique_ptr<T[]> sq(squares ? new T[r] : nullptr);
      ReduceRows(x, o0, o1, r, c, sq.get());
    });
    return;
  }
  const int64_t tiles = (inner + kColumnTile - 1) / kColumnTile;
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / (r * std::min(inner, kColumnTile)));
  ParallelFor(outer * tiles, grain, [&](int64_t p0, int64_t p1) {
    std::unique_ptr<T[]> sq(squares ? new T[2 * kColumnTile] : nullptr);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t o = p / tiles, i0 = (p % tiles) * kColumnTile;
      ReduceColumns(x, o, r, inner, i0, std::min(inner, i0 + kColumnTile), c, sq.get());
    }
  });
}

std::vector<bool> KernelMask(const ExecutionContext& ctx) {
  return ReduceMask(ctx.Input("X").rank(), ctx.Attr<std::vector<int32_t>>("dim"), ctx.Attr<bool>("reduce_all"));
}

const auto kFusedReduce = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const ReduceLayout l = MakeReduceLayout(x.dims(), KernelMask(ctx));
  const auto& names = ctx.Attr<std::vector<std::string>>("reductions");
  const std::vector<Tensor*> outs = ctx.MultiOutput("Out");
  // Each channel is computed once, into the first output that is not a mean of it (else a scratch buffer).
  Channels<T> c;
  std::vector<Reduction> rs;
  std::vector<T*> dst;
  std::unique_ptr<T[]> scratch[kChannels];
  for (size_t i = 0; i < outs.size(); ++i) {
    rs.push_back(ParseReduction(names[i]));
    FL_ENFORCE(outs[i]->numel() == l.out_numel, ctx.Type(), ": Out '", ctx.OutputName("Out", i), "' ", outs[i]->dims(),
               " does not hold the ", l.out_numel, " results of reducing X ", x.dims());
    T* o = outs[i]->mutable_data<T>(ctx.place());
    dst.push_back(o);
    c.need[rs[i].channel] = true;
    if (rs[i].channel == kSumSquareDev) c.need[kSum] = true;
    if (rs[i].channel == kSumExpDev) c.need[kMax] = true;
    if (!rs[i].mean && !c.out[rs[i].channel]) c.out[rs[i].channel] = o;
  }
  for (int ch = 0; ch < kChannels; ++ch)
    if (c.need[ch] && !c.out[ch]) {
      scratch[ch].reset(new T[l.out_numel]);
      c.out[ch] = scratch[ch].get();
    }
  const T scale = T(1) / static_cast<T>(l.reduce_count);  // as reduce_mean: the sum times 1 / count
  c.scale = scale;
  if (ctx.HasOutput("Exp")) {
    Tensor* e = ctx.Output("Exp");
    e->Resize(x.dims());
    c.exp = e->mutable_data<T>(ctx.place());
  }
  ComputeChannels(x.data<T>(), l, c);
  for (size_t i = 0; i < outs.size(); ++i) {
    T* o = dst[i];
    const T* src = c.out[rs[i].channel];
    if (rs[i].mean) {
      for (int64_t j = 0; j < l.out_numel; ++j) o[j] = src[j] * scale;
    } else if (o != src) {
      std::memcpy(o, src, l.out_numel * sizeof(T));
    }
  }
};

}  // namespace

FL_REGISTER_OP(fused_reduce, op) {
  op.Doc(
        "Several reductions of X over the same axes in one pass (made by the fuse_reductions pass): Out[i] is X's "
        "sum, mean or max, the sum or mean of X * X, the sum or mean of (X - its mean)^2, or the sum of exp(X - its "
        "max), as reductions[i] says; Exp (optional) gets exp(X - max).")
      .Input("X", "input tensor (float32 or float64)")
      .DuplicableOutput("Out", "the reductions, one per entry of `reductions`")
      .DispensableOutput("Exp", "exp(X - max) in X's shape, with a sum_exp_dev reduction that the program reads")
      .Attr<std::vector<int32_t>>("dim", {0}, "axes to reduce; negative values count from the end")
      .Axis()
      .Attr<bool>("keep_dim", false, "keep reduced axes as size 1")
      .Attr<bool>("reduce_all", false, "reduce every axis (ignores dim)")
      .Attr<std::vector<std::string>>("reductions", {}, "what each Out is")
      .Size(1, 64)
      .Constrain(std::string("each one of ") + kReductionList,
                 [](const Attribute& v) -> std::string {
                   for (const auto& s : std::get<std::vector<std::string>>(v)) {
                     bool known = false;
                     for (const char* n : kReductionNames) known = known || s == n;
                     if (!known) return std::string("one of ") + kReductionList + " (got '" + s + "')";
                   }
                   return "";
                 })
      .Attr<std::vector<std::string>>("fused_ops", {}, "the ops this one replaced, in program order")
      .Check([](const OpCheckContext& ctx) {
        const size_t n = ctx.desc().Attr<std::vector<std::string>>("reductions").size();
        FL_ENFORCE(static_cast<size_t>(ctx.OutputSize("Out")) == n, "fused_reduce: ", n, " reductions but ",
                   ctx.OutputSize("Out"), " Out variables were given");
        const auto& rs = ctx.desc().Attr<std::vector<std::string>>("reductions");
        FL_ENFORCE(ctx.OutputSize("Exp") == 0 || std::count(rs.begin(), rs.end(), "sum_exp_dev") > 0,
                   "fused_reduce: an Exp output needs a sum_exp_dev reduction");
      })
      .SetInferShape([](InferShapeContext& ctx) {
        const DType dt = ctx.InputDType("X");
        FL_ENFORCE(dt == DType::FP32 || dt == DType::FP64, ctx.Type(), ": ", ctx.Describe("X"),
                   " must be float32 or float64, got ", DTypeName(dt));
        const std::vector<bool> mask = ReducedAxes(ctx);
        for (int i = 0; i < ctx.OutputSize("Out"); ++i) SetReducedOutput(ctx, mask, "Out", i);
        if (ctx.HasOutput("Exp")) {
          ctx.SetOutput("Exp", ctx.InputDim("X"), dt);
          ctx.ShareLoD("X", "Exp");
        }
      })
      .CPUKernel<float, double>(kFusedReduce);  // no gradient clause: backward raises if one must flow through
}

}  // namespace fl
