// layer_norm, group_norm, instance_norm and affine_channel (Fluid 1.x), and their grads.
//
// The three normalisations share one shape: X is seen as `rows` contiguous rows of `len` elements each,
// normalised by the row's mean and biased variance; a row is `segs` segments of `inner` elements, and
// segment k of row r takes the learned Scale / Bias of channel c0(r) + k:
//   layer_norm     rows = prod(dims[:begin_norm_axis]), segs = len = prod(dims[begin_norm_axis:]), inner 1,
//                  c0 = 0 (Scale / Bias hold one value per normalised element);
//   group_norm     rows = N * groups, segs = C / groups, inner = H * W, c0 = (r % groups) * segs (NHWC is
//                  transposed to NCHW per sample and back);
//   instance_norm  rows = N * C, segs = 1, inner = H * W, c0 = r % C.
// Forward: y = (x - mean) * inv * scale[c] + bias[c], inv = 1 / sqrt(var + epsilon). Backward, with
// g = dy * scale[c] and xhat = (x - mean) * inv over one row of n elements:
//   dx = inv * (g - sum(g) / n - xhat * sum(g * xhat) / n);  dScale[c] = sum dy * xhat;  dBias[c] = sum dy.
// Row sums use the shifted float-lane sums of helpers/moments.h (added up in double); rows run in parallel,
// and the parameter gradients are summed per block of rows, then over the blocks in a fixed order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "helpers/moments.h"
#include "helpers/transpose.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

struct RowView {
  int64_t rows = 0, segs = 0, inner = 0;
  int64_t channels = 0;  // Scale / Bias length
  int64_t group = 1;     // c0(r) = (r % group) * segs
  int64_t len() const { return segs * inner; }
  int64_t c0(int64_t r) const { return (r % group) * segs; }
  // Scale / Bias index = position in the row (layer_norm): the loops skip the segments.
  bool per_element() const { return inner == 1 && group == 1; }
};

// mean and biased variance of one row (shifted by its first element, so a large mean does not cancel).
template <typename T>
void RowMoments(const T* x, int64_t n, T& mean, T& var) {
  double s1 = 0, s2 = 0;
  const T k = x[0];
  RunSums<false, T>(x, nullptr, n, k, s1, s2);
  const double dm = s1 / n;
  mean = static_cast<T>(k + dm);
  var = static_cast<T>(std::max(s2 / n - dm * dm, 0.0));
}

// Normalises every row; mean / var receive each row's statistics.
template <typename T>
void NormForward(const RowView& v, const T* x, const T* scale, const T* bias, T eps, T* y, T* mean, T* var) {
  const int64_t n = v.len();
  ParallelFor(v.rows, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, n)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const T* xr = x + r * n;
                  T* yr = y + r * n;
                  T m, s;
                  RowMoments(xr, n, m, s);
                  mean[r] = m;
                  var[r] = s;
                  const T inv = T(1) / std::sqrt(s + eps);
                  if (v.per_element()) {  // one scale per element (layer_norm)
                    if (scale && bias) {
                      for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * inv * scale[j] + bias[j];
                    } else {
                      for (int64_t j = 0; j < n; ++j)
                        yr[j] = (xr[j] - m) * inv * (scale ? scale[j] : T(1)) + (bias ? bias[j] : T(0));
                    }
                    continue;
                  }
                  const int64_t c0 = v.c0(r);
                  for (int64_t k = 0; k < v.segs; ++k) {
                    const T a = inv * (scale ? scale[c0 + k] : T(1));
                    const T b = bias ? bias[c0 + k] : T(0);
                    const T* xs = xr + k * v.inner;
                    T* ys = yr + k * v.inner;
                    for (int64_t i = 0; i < v.inner; ++i) ys[i] = (xs[i] - m) * a + b;
                  }
                }
              });
}

// Gradients of NormForward given each row's mean and inv = 1 / sqrt(var + eps). dx, dscale, dbias may be
// null (not wanted); scale null means a scale of 1.
template <typename T>
void NormBackward(const RowView& v, const T* x, const T* dy, const T* scale, const T* mean, const T* inv, T* dx,
                  T* dscale, T* dbias) {
  const int64_t n = v.len();
  const bool params = dscale || dbias;
  const int64_t C = v.channels;
  // Blocks of rows: each sums its own parameter gradients (in double), added up in block order below.
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, n));
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>(ThreadPool::Instance().Size(), v.rows / std::max<int64_t>(1, grain)));
  std::vector<double> part_s(params ? blocks * C : 0, 0.0), part_b(params ? blocks * C : 0, 0.0);
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> g(dx ? n : 0);
    for (int64_t blk = b0; blk < b1; ++blk) {
      double* ps = params ? part_s.data() + blk * C : nullptr;
      double* pb = params ? part_b.data() + blk * C : nullptr;
      for (int64_t r = v.rows * blk / blocks; r < v.rows * (blk + 1) / blocks; ++r) {
        const T* xr = x + r * n;
        const T* dr = dy + r * n;
        const T m = mean[r], iv = inv[r];
        const int64_t c0 = v.c0(r);
        if (params) {
          if (v.per_element()) {
            for (int64_t j = 0; j < n; ++j) {
              ps[j] += static_cast<double>(dr[j] * ((xr[j] - m) * iv));
              pb[j] += static_cast<double>(dr[j]);
            }
          } else {
            for (int64_t k = 0; k < v.segs; ++k) {
              double s1 = 0, s2 = 0;
              RunSums<true, T>(xr + k * v.inner, dr + k * v.inner, v.inner, m, s1, s2);
              ps[c0 + k] += s2 * iv;
              pb[c0 + k] += s1;
            }
          }
        }
        if (!dx) continue;
        if (!scale) {
          std::copy(dr, dr + n, g.begin());
        } else if (v.per_element()) {
          for (int64_t j = 0; j < n; ++j) g[j] = dr[j] * scale[j];
        } else {
          for (int64_t k = 0; k < v.segs; ++k) {
            const T s = scale[c0 + k];
            for (int64_t i = 0; i < v.inner; ++i) g[k * v.inner + i] = dr[k * v.inner + i] * s;
          }
        }
        double s1 = 0, s2 = 0;  // sum g, sum g * (x - mean)
        RunSums<true, T>(xr, g.data(), n, m, s1, s2);
        // dx = iv * g + a * x + b with a = -iv^3 * s2 / n, b = -iv * s1 / n - a * mean
        const double ivd = iv, a = -ivd * ivd * ivd * s2 / n, b = -ivd * s1 / n - a * m;
        const T at = static_cast<T>(a), bt = static_cast<T>(b);
        T* out = dx + r * n;
        for (int64_t j = 0; j < n; ++j) out[j] = iv * g[j] + at * xr[j] + bt;
      }
    }
  });
  if (!params) return;
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, b = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) s += part_s[blk * C + c], b += part_b[blk * C + c];
    if (dscale) dscale[c] = static_cast<T>(s);
    if (dbias) dbias[c] = static_cast<T>(b);
  }
}

// ------------------------------------------------------------------ shared checks

void CheckParam(InferShapeContext& ctx, const char* op, const char* slot, int64_t want, const std::string& what) {
  if (!ctx.HasInput(slot)) return;
  const DDim d = ctx.InputDim(slot);
  FL_ENFORCE(d.size() == 1 && (want < 0 || d[0] < 0 || d[0] == want), op, ": ", ctx.Describe(slot), " must be [", want,
             "] (", what, ") for ", ctx.Describe("X"));
  FL_ENFORCE(ctx.InputDType(slot) == ctx.InputDType("X"), op, ": ", ctx.Describe(slot), " has dtype ",
             DTypeName(ctx.InputDType(slot)), " but X has ", DTypeName(ctx.InputDType("X")));
}

template <typename T>
const T* ParamData(const ExecutionContext& ctx, const char* op, const char* slot, int64_t want) {
  const Tensor* t = ctx.InputOrNull(slot);
  if (!t) return nullptr;
  FL_ENFORCE(t->numel() == want, op, ": ", slot, " '", ctx.InputName(slot), "' ", t->dims(), " must hold ", want,
             " values for X ", ctx.Input("X").dims());
  return t->data<T>();
}

// ------------------------------------------------------------------ layer_norm

void InferLayerNorm(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const int axis = ctx.Attr<int32_t>("begin_norm_axis");
  FL_ENFORCE(axis >= 1 && axis < x.size(), "layer_norm: begin_norm_axis ", axis, " must be in [1, ", x.size(), ") for ",
             ctx.Describe("X"));
  const int64_t left = x.Product(0, axis), right = x.Product(axis, x.size());
  CheckParam(ctx, "layer_norm", "Scale", right, "the product of X's dims from begin_norm_axis");
  CheckParam(ctx, "layer_norm", "Bias", right, "the product of X's dims from begin_norm_axis");
  const DType dt = ctx.InputDType("X");
  ctx.SetOutput("Y", x, dt);
  ctx.ShareLoD("X", "Y");
  for (const char* slot : {"Mean", "Variance"})
    if (ctx.HasOutput(slot)) ctx.SetOutput(slot, DDim{left}, dt);
}

RowView LayerNormView(const DDim& x, int axis) {
  const int64_t right = x.Product(axis, x.size());
  return RowView{x.Product(0, axis), right, 1, right, 1};
}

template <typename T>
void LayerNormForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const RowView v = LayerNormView(x.dims(), ctx.Attr<int32_t>("begin_norm_axis"));
  const T* scale = ParamData<T>(ctx, "layer_norm", "Scale", v.channels);
  const T* bias = ParamData<T>(ctx, "layer_norm", "Bias", v.channels);
  std::vector<T> mean_buf, var_buf;
  T* mean = nullptr;
  T* var = nullptr;
  if (Tensor* t = ctx.OutputOrNull("Mean")) mean = t->mutable_data<T>(DDim{v.rows}, ctx.place());
  else mean_buf.resize(v.rows), mean = mean_buf.data();
  if (Tensor* t = ctx.OutputOrNull("Variance")) var = t->mutable_data<T>(DDim{v.rows}, ctx.place());
  else var_buf.resize(v.rows), var = var_buf.data();
  T* y = ctx.Output("Y")->mutable_data<T>(x.dims(), ctx.place());
  NormForward<T>(v, x.data<T>(), scale, bias, static_cast<T>(ctx.Attr<float>("epsilon")), y, mean, var);
}

// inv = 1 / sqrt(var + eps) per row from a Variance input.
template <typename T>
std::vector<T> InvStd(const ExecutionContext& ctx, const char* op, int64_t rows) {
  const Tensor& var = ctx.Input("Variance");
  FL_ENFORCE(var.numel() == rows, op, ": Variance '", ctx.InputName("Variance"), "' ", var.dims(), " must hold ", rows,
             " values for X ", ctx.Input("X").dims());
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  std::vector<T> inv(rows);
  const T* vp = var.data<T>();
  for (int64_t r = 0; r < rows; ++r) inv[r] = T(1) / std::sqrt(vp[r] + eps);
  return inv;
}

template <typename T>
const T* RowStats(const ExecutionContext& ctx, const char* op, const char* slot, int64_t rows) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == rows, op, ": ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " must hold ", rows,
             " values for X ", ctx.Input("X").dims());
  return t.data<T>();
}

template <typename T>
T* GradOut(const ExecutionContext& ctx, const char* slot, const DDim& dims) {
  Tensor* t = ctx.OutputOrNull(slot);
  return t ? t->mutable_data<T>(dims, ctx.place()) : nullptr;
}

template <typename T>
void CheckGradInput(const ExecutionContext& ctx, const char* op) {
  FL_ENFORCE(ctx.Input("Y@GRAD").dims() == ctx.Input("X").dims(), op, ": Y@GRAD '", ctx.InputName("Y@GRAD"), "' ",
             ctx.Input("Y@GRAD").dims(), " must match X ", ctx.Input("X").dims());
}

template <typename T>
void LayerNormBackward(const ExecutionContext& ctx) {
  CheckGradInput<T>(ctx, "layer_norm_grad");
  const Tensor& x = ctx.Input("X");
  const RowView v = LayerNormView(x.dims(), ctx.Attr<int32_t>("begin_norm_axis"));
  const T* scale = ParamData<T>(ctx, "layer_norm_grad", "Scale", v.channels);
  const T* mean = RowStats<T>(ctx, "layer_norm_grad", "Mean", v.rows);
  const std::vector<T> inv = InvStd<T>(ctx, "layer_norm_grad", v.rows);
  T* dx = GradOut<T>(ctx, "X@GRAD", x.dims());
  T* dscale = GradOut<T>(ctx, "Scale@GRAD", DDim{v.channels});
  T* dbias = GradOut<T>(ctx, "Bias@GRAD", DDim{v.channels});
  NormBackward<T>(v, x.data<T>(), ctx.Input("Y@GRAD").data<T>(), scale, mean, inv.data(), dx, dscale, dbias);
}

// ------------------------------------------------------------------ group_norm / instance_norm

bool IsNHWC(const std::string& layout) { return layout == "NHWC"; }

// [N, C, inner] of X (NCHW), or of its per-sample transpose (NHWC: X is [N, inner..., C]).
void ChannelDims(const DDim& x, bool nhwc, int64_t& N, int64_t& C, int64_t& inner) {
  const int r = x.size();
  N = x[0];
  C = nhwc ? x[r - 1] : x[1];
  inner = nhwc ? x.Product(1, r - 1) : x.Product(2, r);
}

void InferGroupNorm(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const std::string& layout = ctx.Attr<std::string>("data_layout");
  const int groups = ctx.Attr<int32_t>("groups");
  FL_ENFORCE(x.size() >= 2 && x.size() <= 5, "group_norm: ", ctx.Describe("X"), " must have rank 2 to 5, got ",
             x.size());
  const int64_t C = IsNHWC(layout) ? x[x.size() - 1] : x[1];
  FL_ENFORCE(C < 0 || (groups <= C && C % groups == 0), "group_norm: groups ", groups,
             " must divide the channel count ", C, " of ", ctx.Describe("X"), " (data_layout ", layout, ")");
  CheckParam(ctx, "group_norm", "Scale", C, "the channel count");
  CheckParam(ctx, "group_norm", "Bias", C, "the channel count");
  const DType dt = ctx.InputDType("X");
  ctx.SetOutput("Y", x, dt);
  ctx.ShareLoD("X", "Y");
  for (const char* slot : {"Mean", "Variance"})
    if (ctx.HasOutput(slot)) ctx.SetOutput(slot, DDim{x[0], groups}, dt);
}

void InferInstanceNorm(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() >= 2 && x.size() <= 5, "instance_norm: ", ctx.Describe("X"), " must have rank 2 to 5, got ",
             x.size());
  const int64_t C = x[1];
  CheckParam(ctx, "instance_norm", "Scale", C, "the channel count");
  CheckParam(ctx, "instance_norm", "Bias", C, "the channel count");
  const DType dt = ctx.InputDType("X");
  ctx.SetOutput("Y", x, dt);
  ctx.ShareLoD("X", "Y");
  const int64_t nc = x[0] < 0 || C < 0 ? -1 : x[0] * C;
  for (const char* slot : {"SavedMean", "SavedVariance"})
    if (ctx.HasOutput(slot)) ctx.SetOutput(slot, DDim{nc}, dt);
}

// Per-sample [inner, C] <-> [C, inner] (NHWC <-> NCHW); `to_nchw` picks the direction.
template <typename T>
void SampleTranspose(const T* src, T* dst, int64_t N, int64_t C, int64_t inner, bool to_nchw) {
  ParallelFor(N, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* s = src + n * C * inner;
      T* d = dst + n * C * inner;
      if (to_nchw) detail::Transpose2D(s, C, d, inner, C, inner);  // d[c * inner + i] = s[i * C + c]
      else detail::Transpose2D(s, inner, d, C, inner, C);          // d[i * C + c] = s[c * inner + i]
    }
  });
}

// X (or a gradient of its shape) as NCHW: the tensor itself, or its per-sample transpose in `buf`.
template <typename T>
const T* AsNCHW(const T* p, bool nhwc, int64_t N, int64_t C, int64_t inner, std::vector<T>& buf) {
  if (!nhwc) return p;
  buf.resize(N * C * inner);
  SampleTranspose(p, buf.data(), N, C, inner, true);
  return buf.data();
}

template <typename T>
void GroupNormForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const bool nhwc = IsNHWC(ctx.Attr<std::string>("data_layout"));
  const int64_t G = ctx.Attr<int32_t>("groups");
  int64_t N, C, inner;
  ChannelDims(x.dims(), nhwc, N, C, inner);
  FL_ENFORCE(C % G == 0 && G <= C, "group_norm: groups ", G, " must divide the channel count ", C, " of X '",
             ctx.InputName("X"), "' ", x.dims());
  const RowView v{N * G, C / G, inner, C, G};
  const T* scale = ParamData<T>(ctx, "group_norm", "Scale", C);
  const T* bias = ParamData<T>(ctx, "group_norm", "Bias", C);
  std::vector<T> mean_buf(v.rows), var_buf(v.rows), xbuf, ybuf;
  T* mean = mean_buf.data();
  T* var = var_buf.data();
  if (Tensor* t = ctx.OutputOrNull("Mean")) mean = t->mutable_data<T>(DDim{N, G}, ctx.place());
  if (Tensor* t = ctx.OutputOrNull("Variance")) var = t->mutable_data<T>(DDim{N, G}, ctx.place());
  const T* xp = AsNCHW(x.data<T>(), nhwc, N, C, inner, xbuf);
  T* y = ctx.Output("Y")->mutable_data<T>(x.dims(), ctx.place());
  if (nhwc) ybuf.resize(x.numel());
  NormForward<T>(v, xp, scale, bias, static_cast<T>(ctx.Attr<float>("epsilon")), nhwc ? ybuf.data() : y, mean, var);
  if (nhwc) SampleTranspose(ybuf.data(), y, N, C, inner, false);
}

template <typename T>
void GroupNormBackward(const ExecutionContext& ctx) {
  CheckGradInput<T>(ctx, "group_norm_grad");
  const Tensor& x = ctx.Input("X");
  const bool nhwc = IsNHWC(ctx.Attr<std::string>("data_layout"));
  const int64_t G = ctx.Attr<int32_t>("groups");
  int64_t N, C, inner;
  ChannelDims(x.dims(), nhwc, N, C, inner);
  const RowView v{N * G, C / G, inner, C, G};
  const T* scale = ParamData<T>(ctx, "group_norm_grad", "Scale", C);
  const T* mean = RowStats<T>(ctx, "group_norm_grad", "Mean", v.rows);
  const std::vector<T> inv = InvStd<T>(ctx, "group_norm_grad", v.rows);
  std::vector<T> xbuf, gbuf, dxbuf;
  const T* xp = AsNCHW(x.data<T>(), nhwc, N, C, inner, xbuf);
  const T* gp = AsNCHW(ctx.Input("Y@GRAD").data<T>(), nhwc, N, C, inner, gbuf);
  T* dx = GradOut<T>(ctx, "X@GRAD", x.dims());
  if (dx && nhwc) dxbuf.resize(x.numel());
  NormBackward<T>(v, xp, gp, scale, mean, inv.data(), dx && nhwc ? dxbuf.data() : dx,
                  GradOut<T>(ctx, "Scale@GRAD", DDim{C}), GradOut<T>(ctx, "Bias@GRAD", DDim{C}));
  if (dx && nhwc) SampleTranspose(dxbuf.data(), dx, N, C, inner, false);
}

template <typename T>
void InstanceNormForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  int64_t N, C, inner;
  ChannelDims(x.dims(), false, N, C, inner);
  const RowView v{N * C, 1, inner, C, C};
  const T* scale = ParamData<T>(ctx, "instance_norm", "Scale", C);
  const T* bias = ParamData<T>(ctx, "instance_norm", "Bias", C);
  FL_ENFORCE(inner > 0 || x.numel() == 0, "instance_norm: X '", ctx.InputName("X"), "' ", x.dims(),
             " has no elements per instance to normalise");
  std::vector<T> mean_buf(v.rows), var(v.rows);
  T* mean = mean_buf.data();
  if (Tensor* t = ctx.OutputOrNull("SavedMean")) mean = t->mutable_data<T>(DDim{v.rows}, ctx.place());
  T* y = ctx.Output("Y")->mutable_data<T>(x.dims(), ctx.place());
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  NormForward<T>(v, x.data<T>(), scale, bias, eps, y, mean, var.data());
  if (Tensor* t = ctx.OutputOrNull("SavedVariance")) {
    T* p = t->mutable_data<T>(DDim{v.rows}, ctx.place());
    for (int64_t r = 0; r < v.rows; ++r) p[r] = T(1) / std::sqrt(var[r] + eps);
  }
}

template <typename T>
void InstanceNormBackward(const ExecutionContext& ctx) {
  CheckGradInput<T>(ctx, "instance_norm_grad");
  const Tensor& x = ctx.Input("X");
  int64_t N, C, inner;
  ChannelDims(x.dims(), false, N, C, inner);
  const RowView v{N * C, 1, inner, C, C};
  const T* scale = ParamData<T>(ctx, "instance_norm_grad", "Scale", C);
  const T* mean = RowStats<T>(ctx, "instance_norm_grad", "SavedMean", v.rows);
  const T* inv = RowStats<T>(ctx, "instance_norm_grad", "SavedVariance", v.rows);
  NormBackward<T>(v, x.data<T>(), ctx.Input("Y@GRAD").data<T>(), scale, mean, inv, GradOut<T>(ctx, "X@GRAD", x.dims()),
                  GradOut<T>(ctx, "Scale@GRAD", DDim{C}), GradOut<T>(ctx, "Bias@GRAD", DDim{C}));
}

// ------------------------------------------------------------------ affine_channel

// X as [outer, C, inner]: NCHW (and AnyLayout) has the channel at axis 1, NHWC last.
void AffineView(const DDim& x, bool nhwc, int64_t& outer, int64_t& C, int64_t& inner) {
  const int r = x.size();
  if (nhwc) outer = x.Product(0, r - 1), C = x[r - 1], inner = 1;
  else outer = x[0], C = x[1], inner = x.Product(2, r);
}

void InferAffineChannel(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const std::string& layout = ctx.Attr<std::string>("data_layout");
  FL_ENFORCE(x.size() >= 2, "affine_channel: ", ctx.Describe("X"), " must have at least 2 dims, got ", x.size());
  const int64_t C = IsNHWC(layout) ? x[x.size() - 1] : x[1];
  for (const char* slot : {"Scale", "Bias"}) {
    const DDim d = ctx.InputDim(slot);
    FL_ENFORCE(d.size() == 1 && (C < 0 || d[0] < 0 || d[0] == C), "affine_channel: ", ctx.Describe(slot),
               " must be [C] = [", C, "] for ", ctx.Describe("X"), " (data_layout ", layout, ")");
    FL_ENFORCE(ctx.InputDType(slot) == ctx.InputDType("X"), "affine_channel: ", ctx.Describe(slot), " has dtype ",
               DTypeName(ctx.InputDType(slot)), " but X has ", DTypeName(ctx.InputDType("X")));
  }
  ctx.SetOutput("Out", x, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

// out = in * a[c] (+ b[c] when b is given) over the [outer, C, inner] view.
template <typename T>
void ChannelScale(const T* in, const T* a, const T* b, int64_t outer, int64_t C, int64_t inner, T* out) {
  ParallelFor(outer, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, C * inner)),
              [&](int64_t o0, int64_t o1) {
                for (int64_t o = o0; o < o1; ++o)
                  for (int64_t c = 0; c < C; ++c) {
                    const int64_t off = (o * C + c) * inner;
                    const T ac = a[c], bc = b ? b[c] : T(0);
                    for (int64_t i = 0; i < inner; ++i) out[off + i] = in[off + i] * ac + bc;
                  }
              });
}

template <typename T>
void AffineChannelForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  int64_t outer, C, inner;
  AffineView(x.dims(), IsNHWC(ctx.Attr<std::string>("data_layout")), outer, C, inner);
  const T* scale = ParamData<T>(ctx, "affine_channel", "Scale", C);
  const T* bias = ParamData<T>(ctx, "affine_channel", "Bias", C);
  ChannelScale<T>(x.data<T>(), scale, bias, outer, C, inner, ctx.Output("Out")->mutable_data<T>(x.dims(), ctx.place()));
}

template <typename T>
void AffineChannelBackward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  FL_ENFORCE(dout.dims() == x.dims(), "affine_channel_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " must match X ", x.dims());
  int64_t outer, C, inner;
  AffineView(x.dims(), IsNHWC(ctx.Attr<std::string>("data_layout")), outer, C, inner);
  const T* scale = ParamData<T>(ctx, "affine_channel_grad", "Scale", C);
  const T* xp = x.data<T>();
  const T* gp = dout.data<T>();
  if (T* dx = GradOut<T>(ctx, "X@GRAD", x.dims())) ChannelScale<T>(gp, scale, nullptr, outer, C, inner, dx);
  T* dscale = GradOut<T>(ctx, "Scale@GRAD", DDim{C});
  T* dbias = GradOut<T>(ctx, "Bias@GRAD", DDim{C});
  if (!dscale && !dbias) return;
  std::vector<double> s1(C, 0.0), s2(C, 0.0);  // sum dy, sum dy * x per channel
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t off = (o * C + c) * inner;
      RunSums<true, T>(xp + off, gp + off, inner, T(0), s1[c], s2[c]);
    }
  for (int64_t c = 0; c < C; ++c) {
    if (dscale) dscale[c] = static_cast<T>(s2[c]);
    if (dbias) dbias[c] = static_cast<T>(s1[c]);
  }
}

}  // namespace

FL_REGISTER_OP(layer_norm, op) {
  op.Doc("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias over the dims from begin_norm_axis, per leading index.")
      .Input("X", "input; dims [begin_norm_axis:] are normalised together")
      .DispensableInput("Scale", "scale [prod(dims[begin_norm_axis:])] (absent: 1)")
      .DispensableInput("Bias", "bias [prod(dims[begin_norm_axis:])] (absent: 0)")
      .Output("Y", "normalised output, X's shape")
      .DispensableOutput("Mean", "mean of each normalised row [prod(dims[:begin_norm_axis])]")
      .DispensableOutput("Variance", "biased variance of each normalised row [prod(dims[:begin_norm_axis])]")
      .Attr<float>("epsilon", 1e-5f, "added to the variance before the square root")
      .Range(0.0, static_cast<double>(0.001f))  // Fluid checks the float value
      .Attr<int32_t>("begin_norm_axis", 1, "the first normalised axis; must be in [1, rank)")
      .Min(1)
      .SetInferShape(InferLayerNorm)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { LayerNormForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Scale", "Bias", "Mean", "Variance", "Y@GRAD"})
      .Optional({"Scale", "Bias"})
      .Doc("Gradients of layer_norm for X, Scale and Bias from the saved Mean / Variance.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { LayerNormBackward<typename decltype(tag)::type>(ctx); });
}

FL_REGISTER_OP(group_norm, op) {
  op.Doc("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias with statistics per sample and group of channels.")
      .Input("X", "input [N, C, ...] (NCHW) or [N, ..., C] (NHWC)")
      .DispensableInput("Scale", "per-channel scale [C] (absent: 1)")
      .DispensableInput("Bias", "per-channel bias [C] (absent: 0)")
      .Output("Y", "normalised output, X's shape")
      .DispensableOutput("Mean", "mean of each group [N, groups]")
      .DispensableOutput("Variance", "biased variance of each group [N, groups]")
      .Attr<float>("epsilon", 1e-5f, "added to the variance before the square root")
      .Range(0.0, 1.0)
      .RequiredAttr<int32_t>("groups", 1, "number of channel groups; must divide C")
      .Min(1)
      .Attr("data_layout", "NCHW", "NCHW (channel axis 1) or NHWC (channel axis last)")
      .OneOf({"NCHW", "NHWC"})
      .SetInferShape(InferGroupNorm)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { GroupNormForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Scale", "Bias", "Mean", "Variance", "Y@GRAD"})
      .Optional({"Scale", "Bias"})
      .Doc("Gradients of group_norm for X, Scale and Bias from the saved Mean / Variance.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { GroupNormBackward<typename decltype(tag)::type>(ctx); });
}

FL_REGISTER_OP(instance_norm, op) {
  op.Doc("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias with statistics per sample and channel.")
      .Input("X", "input [N, C, ...] (rank 2 to 5)")
      .DispensableInput("Scale", "per-channel scale [C] (absent: 1)")
      .DispensableInput("Bias", "per-channel bias [C] (absent: 0)")
      .Output("Y", "normalised output, X's shape")
      .DispensableOutput("SavedMean", "mean of each instance [N * C]")
      .DispensableOutput("SavedVariance", "1 / sqrt(var + epsilon) of each instance [N * C]")
      .Attr<float>("epsilon", 1e-5f, "added to the variance before the square root")
      .Range(0.0, static_cast<double>(0.001f))  // Fluid checks the float value
      .SetInferShape(InferInstanceNorm)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { InstanceNormForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Scale", "Bias", "SavedMean", "SavedVariance", "Y@GRAD"})
      .Optional({"Scale", "Bias"})
      .Doc("Gradients of instance_norm for X, Scale and Bias from SavedMean / SavedVariance.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { InstanceNormBackward<typename decltype(tag)::type>(ctx); });
}

FL_REGISTER_OP(affine_channel, op) {
  op.Doc("Out = X * Scale + Bias per channel (a frozen batch_norm).")
      .Input("X", "input [N, C, ...] (NCHW, AnyLayout) or [N, ..., C] (NHWC)")
      .Input("Scale", "per-channel scale [C]")
      .Input("Bias", "per-channel bias [C]")
      .Output("Out", "X's shape")
      .Attr("data_layout", "AnyLayout", "NCHW / AnyLayout (channel axis 1) or NHWC (channel axis last)")
      .OneOf({"NCHW", "NHWC", "AnyLayout"})
      .SetInferShape(InferAffineChannel)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { AffineChannelForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Scale", "Out@GRAD"})
      .Doc("Gradients of affine_channel: X@GRAD = Out@GRAD * Scale; Scale@GRAD and Bias@GRAD sum per channel.")
      .ShapeLike("Bias", "Scale")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { AffineChannelBackward<typename decltype(tag)::type>(ctx); });
}

}  // namespace fl
