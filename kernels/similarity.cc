// Norms and similarities of rows:
//   cos_sim: Out[n] = <X[n], Y[n]> / (|X[n]| |Y[n]|), each row flattened; Y may be one row broadcast to every
//            row of X (then Y@GRAD sums over X's rows). XNorm and YNorm keep the row norms for the gradient.
//   norm:    (layers.l2_normalize) Norm = sqrt(sum(X^2 along axis) + epsilon); Out = X / Norm.
#include <cmath>

#include "helpers/reduce.h"
#include "helpers/same_dims.h"
#include "op_context.h"

namespace fl {

namespace {

template <typename T>
T Dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

struct CosSimRows {
  int64_t rows, y_rows, width;
};

CosSimRows CosRows(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const int64_t rows = x.dims()[0], y_rows = y.dims()[0];
  return CosSimRows{rows, y_rows, rows ? x.numel() / rows : 0};
}

}  // namespace

FL_REGISTER_OP(cos_sim, op) {
  op.Doc("Out[n] = <X[n], Y[n]> / (|X[n]| * |Y[n]|) over each flattened row; Y may have one row for all.")
      .Input("X", "[N, ...], rank >= 2")
      .Input("Y", "[N, ...] or [1, ...], X's trailing dims")
      .Output("Out", "cosine similarity per row [N, 1]")
      .Output("XNorm", "|X[n]| [N, 1], kept for the gradient")
      .Output("YNorm", "|Y[m]| [N or 1, 1], kept for the gradient")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
        FL_ENFORCE(x.size() >= 2 && x.size() == y.size(), "cos_sim: ", ctx.Describe("X"), " and ", ctx.Describe("Y"),
                   " must have the same rank, at least 2");
        for (int i = 1; i < x.size(); ++i)
          FL_ENFORCE(x[i] < 0 || y[i] < 0 || x[i] == y[i], "cos_sim: ", ctx.Describe("X"), " and ", ctx.Describe("Y"),
                     " must have the same dims after the first (dim ", i, ")");
        FL_ENFORCE(x[0] < 0 || y[0] < 0 || y[0] == x[0] || y[0] == 1, "cos_sim: ", ctx.Describe("Y"),
                   " must have as many rows as ", ctx.Describe("X"), " or one row");
        ctx.EnforceSameDType("X", "Y");
        ctx.SetOutput("Out", DDim{x[0], 1}, ctx.InputDType("X"));
        ctx.SetOutput("XNorm", DDim{x[0], 1}, ctx.InputDType("X"));
        ctx.SetOutput("YNorm", DDim{y[0], 1}, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const CosSimRows r = CosRows(ctx);
        const T* x = ctx.Input("X").data<T>();
        const T* y = ctx.Input("Y").data<T>();
        T* out = ctx.Alloc<T>("Out");
        T* xn = ctx.Alloc<T>("XNorm");
        T* yn = ctx.Alloc<T>("YNorm");
        for (int64_t m = 0; m < r.y_rows; ++m) yn[m] = std::sqrt(Dot(y + m * r.width, y + m * r.width, r.width));
        for (int64_t n = 0; n < r.rows; ++n) {
          const T* xr = x + n * r.width;
          const int64_t m = r.y_rows == 1 ? 0 : n;
          xn[n] = std::sqrt(Dot(xr, xr, r.width));
          out[n] = Dot(xr, y + m * r.width, r.width) / (xn[n] * yn[m]);
        }
      });
  op.GradOp({"X", "Y", "Out", "XNorm", "YNorm", "Out@GRAD"})
      .Doc(
          "X@GRAD[n] = Out@GRAD[n] * (Y[n] / (|X[n]| |Y[n]|) - Out[n] * X[n] / |X[n]|^2), and Y@GRAD alike "
          "(summed over X's rows when Y has one row).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const CosSimRows r = CosRows(ctx);
        const T* x = ctx.Input("X").data<T>();
        const T* y = ctx.Input("Y").data<T>();
        const T* out = ctx.Input("Out").data<T>();
        const T* xn = ctx.Input("XNorm").data<T>();
        const T* yn = ctx.Input("YNorm").data<T>();
        const T* g = ctx.Input("Out@GRAD").data<T>();
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        Tensor* dyt = ctx.OutputOrNull("Y@GRAD");
        T* dx = dxt ? dxt->mutable_data<T>(ctx.place()) : nullptr;
        T* dy = dyt ? dyt->mutable_data<T>(ctx.place()) : nullptr;
        if (dy) std::fill(dy, dy + r.y_rows * r.width, T(0));
        for (int64_t n = 0; n < r.rows; ++n) {
          const int64_t m = r.y_rows == 1 ? 0 : n;
          const T* xr = x + n * r.width;
          const T* yr = y + m * r.width;
          const T inv = T(1) / (xn[n] * yn[m]);
          if (dx) {
            const T cx = out[n] / (xn[n] * xn[n]);
            for (int64_t k = 0; k < r.width; ++k) dx[n * r.width + k] = g[n] * (yr[k] * inv - cx * xr[k]);
          }
          if (dy) {
            const T cy = out[n] / (yn[m] * yn[m]);
            for (int64_t k = 0; k < r.width; ++k) dy[m * r.width + k] += g[n] * (xr[k] * inv - cy * yr[k]);
          }
        }
      });
}

FL_REGISTER_OP(norm, op) {
  op.Doc("Norm = sqrt(sum(X^2 along axis) + epsilon); Out = X / Norm (layers.l2_normalize).")
      .Input("X", "input tensor")
      .Output("Norm", "X's dims with 1 at axis")
      .Output("Out", "X normalised along axis, X's shape")
      .RequiredAttr<int32_t>("axis", -1, "the axis to normalise along; negative counts from the end")
      .Axis()
      .Attr<float>("epsilon", 1e-10f, "added to the sum of squares before the square root")
      .Min(0)
      .Attr<bool>("is_test", false, "accepted for Fluid compatibility; the kernel is the same")
      .SetInferShape([](InferShapeContext& ctx) {
        const int axis = NormalizeAxis(ctx, "X", ctx.Attr<int32_t>("axis"));
        DDim norm = ctx.InputDim("X");
        norm[axis] = 1;
        ctx.SetOutput("Norm", norm, ctx.InputDType("X"));
        ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));  // without X's LoD, as Fluid's norm
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const AxisView v = ViewAroundAxis(xt.dims(), ctx.Attr<int32_t>("axis"));
        const T eps = ctx.Attr<float>("epsilon");
        const T* x = xt.data<T>();
        T* norm = ctx.Alloc<T>("Norm");
        T* out = ctx.Alloc<T>("Out");
        ReduceRuns<SumReducer, T>(v.outer, v.axis, v.inner, [x](int64_t k) { return x[k] * x[k]; }, norm);
        const int64_t positions = v.outer * v.inner;
        for (int64_t p = 0; p < positions; ++p) norm[p] = std::sqrt(norm[p] + eps);
        ForEachReduced(AxisLayout(v), [x, out, norm](int64_t i, int64_t p) { out[i] = x[i] / norm[p]; });
      });
  op.GradOp({"X", "Norm", "Out@GRAD"})
      .Doc("X@GRAD = (Out@GRAD - X * sum(Out@GRAD * X along axis) / Norm^2) / Norm.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const AxisView v = ViewAroundAxis(xt.dims(), ctx.Attr<int32_t>("axis"));
        const T* x = xt.data<T>();
        const T* norm = ctx.Input("Norm").data<T>();
        const T* g = ctx.Input("Out@GRAD").data<T>();
        T* dx = dxt->mutable_data<T>(ctx.place());
        std::vector<T> dot(v.outer * v.inner);
        ReduceRuns<SumReducer, T>(v.outer, v.axis, v.inner, [x, g](int64_t k) { return x[k] * g[k]; }, dot.data());
        const T* d = dot.data();
        ForEachReduced(AxisLayout(v), [x, g, dx, norm, d](int64_t i, int64_t p) {
          dx[i] = (g[i] - x[i] * d[p] / (norm[p] * norm[p])) / norm[p];
        });
      });
}

}  // namespace fl
