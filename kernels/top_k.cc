// top_k: the k largest values of each row (last axis), sorted descending, and their int64 indices.
// Ties keep the lower index first; NaN counts as larger than any number. The gradient routes Out@GRAD
// back to the selected positions (zero elsewhere). As in Fluid, an optional 1-element int tensor K
// overrides attr k at run time (layers.topk(x, k) with k a Variable): the last dim of Out is then unknown
// (-1) at build time and the kernel sizes Out and Indices.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "helpers/int_scalar_input.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

// The k of this run: K's value when the K input is given, else attr k; checked against the row length d.
int64_t TopK(const ExecutionContext& ctx, int64_t d) {
  int64_t k = ctx.Attr<int32_t>("k");
  if (ctx.HasInput("K")) k = ReadIntScalarInput(ctx, "K");
  FL_ENFORCE(k >= 1 && k <= d, "top_k: k=", k,
             ctx.HasInput("K") ? " (the value of K '" + ctx.InputName("K") + "')" : "", " must be in [1, ", d,
             "] for X '", ctx.InputName("X"), "' ", ctx.Input("X").dims());
  return k;
}

}  // namespace

FL_REGISTER_OP(top_k, op) {
  op.Doc("Out, Indices = the k largest entries of X along the last axis, sorted descending.")
      .Input("X", "input tensor [.., D]")
      .DispensableInput("K", "1-element int32/int64 tensor: k at run time, overriding attr k")
      .Output("Out", "the k largest values [.., k]")
      .Output("Indices", "their positions along the last axis, int64 [.., k]")
      .Attr<int32_t>("k", 1, "how many entries to keep per row")
      .Min(1)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int k = ctx.Attr<int32_t>("k");
        FL_ENFORCE(x.size() >= 1, "top_k: ", ctx.Describe("X"), " must have at least one dim");
        const int64_t d = x[x.size() - 1];
        DDim out = x;
        if (ctx.HasInput("K")) {
          CheckIntScalarInputDType(ctx, "K");
          if (ctx.IsRuntime()) {  // the kernel reads K and sizes Out and Indices
            ctx.ShareLoD("X", "Out");
            ctx.ShareLoD("X", "Indices");
            return;
          }
          out[x.size() - 1] = -1;
        } else {
          FL_ENFORCE(k >= 1 && (d < 0 || k <= d), "top_k: k=", k, " must be in [1, ", d, "] for ", ctx.Describe("X"));
          out[x.size() - 1] = k;
        }
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
        ctx.SetOutput("Indices", out, DType::INT64);
        ctx.ShareLoD("X", "Out");
        ctx.ShareLoD("X", "Indices");
      })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const int64_t d = xt.dims()[xt.rank() - 1];
        const int64_t k = TopK(ctx, d);
        const int64_t rows = d ? xt.numel() / d : 0;
        DDim out_dims = xt.dims();
        out_dims[xt.rank() - 1] = k;
        ctx.Output("Out")->Resize(out_dims);
        ctx.Output("Indices")->Resize(out_dims);
        const T* x = xt.data<T>();
        T* out = ctx.Alloc<T>("Out");
        int64_t* indices = ctx.Alloc<int64_t>("Indices");
        std::vector<int64_t> order(d);
        for (int64_t n = 0; n < rows; ++n) {
          const T* row = x + n * d;
          auto before = [row](int64_t a, int64_t b) {
            if constexpr (std::is_floating_point_v<T>) {
              const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
              if (na || nb) return na && (!nb || a < b);
            }
            return row[a] > row[b] || (row[a] == row[b] && a < b);
          };
          std::iota(order.begin(), order.end(), int64_t{0});
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          for (int64_t j = 0; j < k; ++j) {
            indices[n * k + j] = order[j];
            out[n * k + j] = row[order[j]];
          }
        }
      });
  op.GradOp({"X", "K", "Indices", "Out@GRAD"})
      .Optional({"K"})  // read so that the forward shape check sees the same k as the forward op
      .Doc("Gradient of top_k: X@GRAD = zeros, then X@GRAD[row, Indices[row, j]] = Out@GRAD[row, j].")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const Tensor& it = ctx.Input("Indices");
        const Tensor& gt = ctx.Input("Out@GRAD");
        FL_ENFORCE(it.dims() == gt.dims(), "top_k_grad: Indices '", ctx.InputName("Indices"), "' ", it.dims(),
                   " and Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", gt.dims(), " must match");
        T* dx = ZeroedOutput<T>(dxt, xt.dims(), ctx.place());
        const int64_t d = xt.dims()[xt.rank() - 1], k = gt.dims()[gt.rank() - 1];
        const int64_t rows = k ? gt.numel() / k : 0;
        const int64_t* idx = it.data<int64_t>();
        const T* g = gt.data<T>();
        for (int64_t n = 0; n < rows; ++n)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t i = idx[n * k + j];
            FL_ENFORCE(i >= 0 && i < d, "top_k_grad: index ", i, " at row ", n, " is outside [0, ", d, ")");
            dx[n * d + i] += g[n * k + j];
          }
      });
}

}  // namespace fl
