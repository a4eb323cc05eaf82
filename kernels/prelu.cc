// prelu: Out = X if X > 0 else Alpha * X, with a learnable Alpha shared by mode: "all" (one value),
// "channel" (one per dim-1 entry: [1, C, 1, 1] in the layer) or "element" (one per element of a sample:
// X.dims[1:]). The grad gives X@GRAD and Alpha@GRAD (summed over the positions that share an alpha).
#include <algorithm>
#include <string>

#include "grad_op_maker.h"
#include "op_context.h"

namespace fl {

namespace {

// Alpha index of element i: i / inner % count (all: count 1; channel: inner = prod(dims[2:]), count = C;
// element: inner 1, count = prod(dims[1:])).
struct AlphaMap {
  int64_t inner = 1, count = 1;
  int64_t operator()(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

AlphaMap MakeAlphaMap(const std::string& mode, const DDim& x) {
  AlphaMap m;
  if (mode == "channel") {
    m.count = x.size() > 1 ? x[1] : 1;
    m.inner = x.size() > 2 ? x.Product(2, x.size()) : 1;
  } else if (mode == "element") {
    m.count = x.size() > 1 ? x.Product(1, x.size()) : 1;
  }
  return m;
}

void PreluInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X"), a = ctx.InputDim("Alpha");
  const std::string& mode = ctx.Attr<std::string>("mode");
  if (a.size() > 0 && a.numel() >= 0) {
    if (mode == "all") {
      FL_ENFORCE(a.numel() == 1, "prelu: mode 'all' takes one alpha, but ", ctx.Describe("Alpha"), " has ", a.numel(),
                 " elements");
    } else if (mode == "channel") {
      FL_ENFORCE(x.size() >= 2, "prelu: mode 'channel' needs X of rank >= 2, got ", ctx.Describe("X"));
      FL_ENFORCE(x[1] < 0 || a.numel() == x[1], "prelu: mode 'channel' takes one alpha per channel (X.dims[1] = ", x[1],
                 "), but ", ctx.Describe("Alpha"), " has ", a.numel(), " elements; X is ", ctx.Describe("X"));
    } else {
      FL_ENFORCE(x.size() >= 2, "prelu: mode 'element' needs X of rank >= 2, got ", ctx.Describe("X"));
      const int64_t per_sample = x.Product(1, x.size());
      FL_ENFORCE(per_sample < 0 || a.numel() == per_sample,
                 "prelu: mode 'element' takes one alpha per element of "
                 "a sample (",
                 per_sample, "), but ", ctx.Describe("Alpha"), " has ", a.numel(), " elements; X is ",
                 ctx.Describe("X"));
    }
  }
  FL_ENFORCE(ctx.InputDType("Alpha") == ctx.InputDType("X"), "prelu: ", ctx.Describe("Alpha"), " is ",
             DTypeName(ctx.InputDType("Alpha")), " but ", ctx.Describe("X"), " is ", DTypeName(ctx.InputDType("X")));
  ctx.SetOutput("Out", x, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

}  // namespace

FL_REGISTER_OP(prelu, op) {
  op.Doc("Out = X if X > 0 else Alpha * X, Alpha shared by mode (all, channel or element).")
      .Input("X", "input tensor")
      .Input("Alpha", "the learnable slopes: 1 (all), X.dims[1] (channel) or prod(X.dims[1:]) (element) values")
      .Output("Out", "X's shape")
      .Attr<std::string>("mode", "all", "how X shares Alpha: all, channel or element")
      .OneOf({"all", "channel", "element"})
      .SetInferShape(PreluInferShape)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const T* a = ctx.Input("Alpha").data<T>();
        const AlphaMap m = MakeAlphaMap(ctx.Attr<std::string>("mode"), x.dims());
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        const T* xp = x.data<T>();
        T* op = out->mutable_data<T>(ctx.place());
        for (int64_t i = 0; i < x.numel(); ++i) op[i] = xp[i] > T(0) ? xp[i] : a[m(i)] * xp[i];
      });
  op.GradOp({"X", "Alpha", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD * (1 if X > 0 else Alpha); Alpha@GRAD = sum of Out@GRAD * X where X <= 0.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& alpha = ctx.Input("Alpha");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(dout.numel() == x.numel(), "prelu_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
                   " does not match X ", x.dims());
        const AlphaMap m = MakeAlphaMap(ctx.Attr<std::string>("mode"), x.dims());
        const T* xp = x.data<T>();
        const T* a = alpha.data<T>();
        const T* d = dout.data<T>();
        if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
          dx->Resize(x.dims());
          T* g = dx->mutable_data<T>(ctx.place());
          for (int64_t i = 0; i < x.numel(); ++i) g[i] = xp[i] > T(0) ? d[i] : a[m(i)] * d[i];
        }
        if (Tensor* da = ctx.OutputOrNull("Alpha@GRAD")) {
          da->Resize(alpha.dims());
          T* g = da->mutable_data<T>(ctx.place());
          std::fill(g, g + alpha.numel(), T(0));
          for (int64_t i = 0; i < x.numel(); ++i)
            if (xp[i] <= T(0)) g[m(i)] += xp[i] * d[i];
        }
      });
}

}  // namespace fl
