// prelu: Out = X if X > 0 else Alpha * X, with a learnable Alpha shared by mode: "all" (one value),
// "channel" (one per dim-1 entry: [1, C, 1, 1] in the layer) or "element" (one per element of a sample:
// X.dims[1:]). The grad gives X@GRAD and Alpha@GRAD (summed over the positions that share an alpha).
#include <algorithm>
#include <string>

#include "grad_op_maker.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

// X as [outer, count, inner] where the `count` entries of the middle axis each have their own alpha (all: count
// 1; channel: count C, inner prod(dims[2:]); element: count prod(dims[1:]), inner 1).
struct AlphaView {
  int64_t outer = 1, count = 1, inner = 1;
  // f(x index, alpha index) over X in memory order
  template <typename F>
  void ForEach(F f) const {
    int64_t i = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < count; ++c)
        for (int64_t k = 0; k < inner; ++k, ++i) f(i, c);
  }
};

AlphaView MakeAlphaView(const std::string& mode, const DDim& x) {
  AlphaView v;
  const int64_t n = x.numel();
  if (mode == "channel" && x.size() > 1) {
    v.outer = x[0], v.count = x[1], v.inner = x.Product(2, x.size());
  } else if (mode == "element" && x.size() > 1) {
    v.outer = x[0], v.count = x.Product(1, x.size());
  } else {
    v.inner = n;
  }
  return v;
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
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        const T* xp = x.data<T>();
        T* op = out->mutable_data<T>(ctx.place());
        MakeAlphaView(ctx.Attr<std::string>("mode"), x.dims()).ForEach([&](int64_t i, int64_t c) {
          op[i] = xp[i] > T(0) ? xp[i] : a[c] * xp[i];
        });
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
        const AlphaView view = MakeAlphaView(ctx.Attr<std::string>("mode"), x.dims());
        const T* xp = x.data<T>();
        const T* a = alpha.data<T>();
        const T* d = dout.data<T>();
        if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
          dx->Resize(x.dims());
          T* g = dx->mutable_data<T>(ctx.place());
          view.ForEach([&](int64_t i, int64_t c) { g[i] = xp[i] > T(0) ? d[i] : a[c] * d[i]; });
        }
        if (Tensor* da = ctx.OutputOrNull("Alpha@GRAD")) {
          T* g = ZeroedOutput<T>(da, alpha.dims(), ctx.place());
          view.ForEach([&](int64_t i, int64_t c) {
            if (xp[i] <= T(0)) g[c] += xp[i] * d[i];
          });
        }
      });
}

}  // namespace fl
