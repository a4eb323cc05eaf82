// Broadcasting for binary elementwise ops (X op Y -> Out), Fluid's `axis` rule plus numpy size-1 dims.
//
// Alignment: identical shapes are used as they are (axis is ignored, as in Fluid). Otherwise the lower-rank
// operand (normally Y) is placed inside the higher-rank one starting at `axis` (axis = -1 means
// rank(big) - rank(small), i.e. trailing alignment); trailing size-1 dims of the small operand that would not
// fit are trimmed first (Fluid's trim_trailing_singular_dims). After padding both to
// the output rank, each dim pair must be equal or contain a 1; the output takes the larger. Unknown (-1)
// compile-time dims are compatible with anything.
//
// Execution: the padded shapes are coalesced (size-1 output dims dropped, neighbouring dims with the same
// broadcast pattern merged) into a BroadcastPlan of at most kMaxRank dims with element strides (0 where
// an operand is broadcast). The innermost dim always has stride 0 or 1 for each operand, so every kernel
// runs as a contiguous inner loop chosen once per call (both contiguous / one side a scalar) under at most
// a few outer loops:
//   same shape            -> rank 1, one flat loop
//   [pre, n, post]        -> rank <= 3, plain nested loops (the bias / per-channel patterns)
//   anything else         -> an odometer over the outer dims
// Gradients use the same plan: BroadcastReduce writes dX (or dY) in the operand's own shape, summing over
// the dims it was broadcast along.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

// Pads x and y to a common rank under the axis rule and computes the output dims. Returns false (and a
// reason in *why) if they cannot broadcast.
inline bool AlignBroadcastDims(const DDim& x, const DDim& y, int axis, DDim* xa, DDim* ya, DDim* out,
                               std::string* why) {
  if (x == y) {  // identical shapes need no alignment: axis is ignored, as in Fluid
    *xa = *ya = *out = x;
    return true;
  }
  const bool y_small = x.size() >= y.size();
  const DDim& big = y_small ? x : y;
  const DDim& small = y_small ? y : x;
  const int R = big.size();
  int rs = small.size();
  if (axis < -1 || axis > R) {
    *why = Str("axis must be in [-1, ", R, "]");
    return false;
  }
  const int ax = axis == -1 ? R - rs : axis;
  while (rs > 0 && ax + rs > R && small[rs - 1] == 1) --rs;
  if (ax + rs > R) {
    *why = Str(y_small ? "Y" : "X", " does not fit inside ", y_small ? "X" : "Y", " at axis ", ax);
    return false;
  }
  DDim padded;
  for (int i = 0; i < R; ++i) padded.push_back(i >= ax && i < ax + rs ? small[i - ax] : 1);
  *xa = y_small ? big : padded;
  *ya = y_small ? padded : big;
  *out = DDim();
  for (int i = 0; i < R; ++i) {
    int64_t a = (*xa)[i], b = (*ya)[i], o;
    if (a == b || b == 1) o = a;
    else if (a == 1) o = b;
    else if (a < 0) o = b;  // unknown vs known (> 1): the known one, checked again at run time
    else if (b < 0) o = a;
    else {
      *why = Str("dim ", i, " of the aligned shapes ", xa->ToString(), " and ", ya->ToString(), " differs (", a, " vs ",
                 b, ")");
      return false;
    }
    out->push_back(o);
  }
  return true;
}

// AlignBroadcastDims that throws naming the op, both variables, both shapes and the axis, e.g.
// "elementwise_add: X 'x' [2, 3] and Y 'y' [4] cannot broadcast with axis=-1 (...)". Returns Out's dims.
inline DDim AlignOrThrow(const DDim& x, const DDim& y, int axis, const std::string& op, const std::string& xname,
                         const std::string& yname, DDim* xa, DDim* ya) {
  DDim out;
  std::string why;
  FL_ENFORCE(AlignBroadcastDims(x, y, axis, xa, ya, &out, &why), op, ": X '", xname, "' ", x, " and Y '", yname, "' ",
             y, " cannot broadcast with axis=", axis, " (", why, ")");
  return out;
}

inline DDim BroadcastOutDims(const DDim& x, const DDim& y, int axis, const std::string& op, const std::string& xname,
                             const std::string& yname) {
  DDim xa, ya;
  return AlignOrThrow(x, y, axis, op, xname, yname, &xa, &ya);
}

// The shared InferShape of binary elementwise ops: Out gets the broadcast dims, X's dtype and X's LoD.
inline void InferBroadcastShape(InferShapeContext& ctx) {
  ctx.EnforceSameDType("X", "Y");
  DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  DDim out = BroadcastOutDims(x, y, ctx.Attr<int32_t>("axis"), ctx.Type(), ctx.InputName("X"), ctx.InputName("Y"));
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

struct BroadcastPlan {
  int rank = 0;  // coalesced rank (>= 1); 0 only when the output has no elements
  int64_t dims[DDim::kMaxRank];
  int64_t xs[DDim::kMaxRank], ys[DDim::kMaxRank];  // element strides, 0 = broadcast
  int64_t numel = 0;                               // output elements
  int64_t x_numel = 0, y_numel = 0;
  DDim out_dims;
};

// Coalesces the aligned shapes into a plan; throws like AlignOrThrow if they cannot broadcast.
inline BroadcastPlan MakeBroadcastPlan(const DDim& x, const DDim& y, int axis, const std::string& op = "elementwise",
                                       const std::string& xname = "X", const std::string& yname = "Y") {
  BroadcastPlan p;
  DDim xa, ya;
  p.out_dims = AlignOrThrow(x, y, axis, op, xname, yname, &xa, &ya);
  p.numel = p.out_dims.numel();
  p.x_numel = x.numel();
  p.y_numel = y.numel();
  FL_ENFORCE(p.numel >= 0, op, ": output dims ", p.out_dims, " are not known at run time");
  if (p.numel == 0) return p;
  // Merge dims with the same (x broadcast, y broadcast) pattern; drop size-1 output dims.
  bool xb[DDim::kMaxRank] = {}, yb[DDim::kMaxRank] = {};
  for (int i = 0; i < p.out_dims.size(); ++i) {
    const int64_t o = p.out_dims[i];
    if (o == 1) continue;
    const bool bx = xa[i] == 1, by = ya[i] == 1;
    if (p.rank > 0 && xb[p.rank - 1] == bx && yb[p.rank - 1] == by) {
      p.dims[p.rank - 1] *= o;
    } else {
      xb[p.rank] = bx;
      yb[p.rank] = by;
      p.dims[p.rank++] = o;
    }
  }
  int64_t sx = 1, sy = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    p.xs[i] = xb[i] ? 0 : sx;
    p.ys[i] = yb[i] ? 0 : sy;
    if (!xb[i]) sx *= p.dims[i];
    if (!yb[i]) sy *= p.dims[i];
  }
  if (p.rank == 0) {  // one element
    p.rank = 1;
    p.dims[0] = 1;
    p.xs[0] = p.ys[0] = 1;
  }
  return p;
}

namespace detail {

// Steps the multi-index `idx` over the plan's outer dims (all but the innermost) to the next row,
// keeping the x and y offsets in step.
inline void NextRow(const BroadcastPlan& p, int64_t* idx, int64_t& xo, int64_t& yo) {
  for (int d = p.rank - 2; d >= 0; --d) {
    xo += p.xs[d];
    yo += p.ys[d];
    if (++idx[d] < p.dims[d]) return;
    xo -= p.xs[d] * p.dims[d];
    yo -= p.ys[d] * p.dims[d];
    idx[d] = 0;
  }
}

// Calls row(x_offset, y_offset, out_offset) for every innermost row of the plan.
template <typename Row>
inline void ForEachRow(const BroadcastPlan& p, Row row) {
  const int r = p.rank;
  const int64_t n = p.dims[r - 1];
  if (r == 1) {
    row(int64_t{0}, int64_t{0}, int64_t{0});
  } else if (r == 2) {
    for (int64_t i = 0; i < p.dims[0]; ++i) row(i * p.xs[0], i * p.ys[0], i * n);
  } else if (r == 3) {  // [pre, n, post]
    int64_t o = 0;
    for (int64_t i = 0; i < p.dims[0]; ++i)
      for (int64_t j = 0; j < p.dims[1]; ++j, o += n) row(i * p.xs[0] + j * p.xs[1], i * p.ys[0] + j * p.ys[1], o);
  } else {
    int64_t idx[DDim::kMaxRank] = {0};
    int64_t xo = 0, yo = 0;
    for (int64_t o = 0; o < p.numel; o += n) {
      row(xo, yo, o);
      NextRow(p, idx, xo, yo);
    }
  }
}

// Calls row(x_offset, y_offset, out_offset) for the innermost rows [r0, r1) of the plan (rank >= 2).
template <typename Row>
inline void ForEachRowIn(const BroadcastPlan& p, int64_t r0, int64_t r1, Row row) {
  const int r = p.rank;
  const int64_t n = p.dims[r - 1];
  int64_t idx[DDim::kMaxRank] = {0};
  int64_t xo = 0, yo = 0;
  for (int d = r - 2; d >= 0; --d) {  // the multi-index of row r0
    int64_t stride = 1;
    for (int e = d + 1; e <= r - 2; ++e) stride *= p.dims[e];
    idx[d] = r0 / stride % p.dims[d];
    xo += idx[d] * p.xs[d];
    yo += idx[d] * p.ys[d];
  }
  for (int64_t o = r0; o < r1; ++o) {
    row(xo, yo, o * n);
    NextRow(p, idx, xo, yo);
  }
}

// row(x offset, y offset, out offset, length) over every output row like ForEachRow, the rows split
// across the thread pool (a rank-1 plan's single row split into pieces). Only for writes that go to
// distinct elements per row (no reduction into a shared element).
template <typename Row>
inline void ParallelForEachRow(const BroadcastPlan& p, Row row) {
  const int r = p.rank;
  const int64_t n = p.dims[r - 1];
  if (r == 1) {
    ParallelFor(n, kMinParallelElements, [&](int64_t b, int64_t e) { row(b * p.xs[0], b * p.ys[0], b, e - b); });
    return;
  }
  ParallelFor(p.numel / n, std::max<int64_t>(1, kMinParallelElements / n), [&](int64_t r0, int64_t r1) {
    ForEachRowIn(p, r0, r1, [&](int64_t xo, int64_t yo, int64_t oo) { row(xo, yo, oo, n); });
  });
}

// Calls body(std::integral_constant<int, SX>, std::integral_constant<int, SY>) with the innermost strides
// as compile-time constants (each 0 or 1), so inner loops are plain contiguous or scalar-broadcast loops.
template <typename Body>
inline void DispatchInner(const BroadcastPlan& p, Body body) {
  const int64_t sx = p.xs[p.rank - 1], sy = p.ys[p.rank - 1];
  if (sx && sy) body(std::integral_constant<int, 1>{}, std::integral_constant<int, 1>{});
  else if (sx) body(std::integral_constant<int, 1>{}, std::integral_constant<int, 0>{});
  else body(std::integral_constant<int, 0>{}, std::integral_constant<int, 1>{});
}

}  // namespace detail

// out[i] = f(x[xi], y[yi]) over the broadcast output (O may differ from T, e.g. bool for comparisons).
template <typename T, typename O, typename F>
void BroadcastBinary(const BroadcastPlan& p, const T* x, const T* y, O* out, F f) {
  if (p.numel == 0) return;
  detail::DispatchInner(p, [&](auto SX, auto SY) {
    detail::ParallelForEachRow(p, [&](int64_t xo, int64_t yo, int64_t oo, int64_t n) {
      const T* xp = x + xo;
      const T* yp = y + yo;
      O* op = out + oo;
      if constexpr (SX == 0) {
        const T a = *xp;
        for (int64_t i = 0; i < n; ++i) op[i] = f(a, yp[i]);
      } else if constexpr (SY == 0) {
        const T b = *yp;
        for (int64_t i = 0; i < n; ++i) op[i] = f(xp[i], b);
      } else {
        for (int64_t i = 0; i < n; ++i) op[i] = f(xp[i], yp[i]);
      }
    });
  });
}

enum class BroadcastSide { X, Y };

// The gradient of one operand: d[k] = sum over output elements e that read operand element k of
// g(x[xi], y[yi], dout[e]). `d` has the operand's own shape.
template <BroadcastSide kSide, typename T, typename G>
void BroadcastReduce(const BroadcastPlan& p, const T* x, const T* y, const T* dout, T* d, G g) {
  const int64_t d_numel = kSide == BroadcastSide::X ? p.x_numel : p.y_numel;
  const bool reduce = d_numel != p.numel;
  if (reduce) std::fill(d, d + d_numel, T(0));
  if (p.numel == 0) return;
  if (!reduce) {  // one operand element per output element: an elementwise map, split across the pool
    detail::DispatchInner(p, [&](auto SX, auto SY) {
      detail::ParallelForEachRow(p, [&](int64_t xo, int64_t yo, int64_t oo, int64_t n) {
        T* dp = d + (kSide == BroadcastSide::X ? xo : yo);
        for (int64_t i = 0; i < n; ++i) dp[i] = g(x[xo + i * SX], y[yo + i * SY], dout[oo + i]);
      });
    });
    return;
  }
  const int64_t n = p.dims[p.rank - 1];
  // Rows [r0, r1) summed into dd (d's shape, zeroed).
  auto sum_rows = [&](T* dd, int64_t r0, int64_t r1) {
    detail::DispatchInner(p, [&](auto SX, auto SY) {
      constexpr int SD = kSide == BroadcastSide::X ? decltype(SX)::value : decltype(SY)::value;
      auto row = [&](int64_t xo, int64_t yo, int64_t oo) {
        const T* xp = x + xo;
        const T* yp = y + yo;
        const T* gp = dout + oo;
        T* dp = dd + (kSide == BroadcastSide::X ? xo : yo);
        if constexpr (SD == 0) {  // this operand is one scalar along the row: a sum
          // 8 independent partial sums: the compiler vectorises them (one running sum cannot be reordered).
          // The block count is computed up front: Python builds with -fwrapv, under which `i + 8 <= n` hides
          // the trip count from the vectoriser.
          T acc[8] = {};
          const int64_t blocks = n / 8;
          for (int64_t b = 0; b < blocks; ++b)
            for (int k = 0; k < 8; ++k) {
              const int64_t i = b * 8 + k;
              acc[k] += g(xp[i * SX], yp[i * SY], gp[i]);
            }
          T s = 0;
          for (int64_t i = blocks * 8; i < n; ++i) s += g(xp[i * SX], yp[i * SY], gp[i]);
          for (int k = 0; k < 8; ++k) s += acc[k];
          dp[0] += s;
        } else {  // contiguous along the row, but summed over outer dims
          for (int64_t i = 0; i < n; ++i) dp[i] += g(xp[i * SX], yp[i * SY], gp[i]);
        }
      };
      if (p.rank == 1 || (r0 == 0 && r1 * n == p.numel)) detail::ForEachRow(p, row);
      else detail::ForEachRowIn(p, r0, r1, row);
    });
  };
  // A large reduction (a bias gradient over many rows): each part of the rows sums into its own zeroed copy of
  // d, and the copies are added in part order (the same result for a given thread count).
  const int64_t rows = p.numel / n;
  const int64_t parts = std::min<int64_t>({ThreadPool::Instance().Size(), rows, p.numel / kMinParallelElements});
  if (parts < 2) {
    sum_rows(d, 0, rows);
    return;
  }
  std::vector<T> partial(static_cast<size_t>((parts - 1) * d_numel), T(0));
  ParallelFor(parts, 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q)
      sum_rows(q == 0 ? d : partial.data() + (q - 1) * d_numel, rows * q / parts, rows * (q + 1) / parts);
  });
  for (int64_t q = 1; q < parts; ++q) {
    const T* s = partial.data() + (q - 1) * d_numel;
    for (int64_t i = 0; i < d_numel; ++i) d[i] += s[i];
  }
}

}  // namespace fl
