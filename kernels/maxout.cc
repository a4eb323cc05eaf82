// maxout: Out[.., c, ..] = max over k < groups of X[.., c * groups + k, ..] along `axis` (Fluid 1.8: channels,
// axis 1 for NCHW or -1/3 for NHWC; any axis of any rank here). The grad routes Out@GRAD to the first
// element of each group that equals the max (Fluid's tie rule).
#include <algorithm>

#include "grad_op_maker.h"
#include "helpers/reduce.h"
#include "helpers/zeroed_output.h"

namespace fl {

namespace {

struct MaxoutView {
  int64_t outer, channels, inner, groups;
};

MaxoutView MakeView(const DDim& x, int axis, int groups) {
  if (axis < 0) axis += x.size();
  return MaxoutView{x.Product(0, axis), x[axis], x.Product(axis + 1, x.size()), groups};
}

void MaxoutInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() >= 2, "maxout: ", ctx.Describe("X"), " must have rank >= 2");
  const int axis = NormalizeAxis(ctx, "X", ctx.Attr<int32_t>("axis"));
  const int groups = ctx.Attr<int32_t>("groups");
  FL_ENFORCE(x[axis] < 0 || x[axis] % groups == 0, "maxout: the size of axis ", axis, " of ", ctx.Describe("X"), " (",
             x[axis], ") must be divisible by groups (", groups, ")");
  DDim out = x;
  if (x[axis] >= 0) out[axis] = x[axis] / groups;
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
}

}  // namespace

FL_REGISTER_OP(maxout, op) {
  op.Doc("Out = the max of each group of `groups` consecutive entries of X along axis.")
      .Input("X", "input tensor (NCHW: axis 1; NHWC: axis -1)")
      .Output("Out", "X's shape with dims[axis] divided by groups")
      .Attr<int32_t>("groups", 1, "entries per group; dims[axis] must be divisible by it")
      .Min(1)
      .Attr<int32_t>("axis", 1, "the axis grouped (1 for NCHW, -1 or 3 for NHWC)")
      .Axis()
      .SetInferShape(MaxoutInferShape)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const MaxoutView v = MakeView(x.dims(), ctx.Attr<int32_t>("axis"), ctx.Attr<int32_t>("groups"));
        Tensor* out = ctx.Output("Out");
        const int64_t oc = v.channels / v.groups;
        const T* xp = x.data<T>();
        T* op = out->mutable_data<T>(ctx.place());
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t c = 0; c < oc; ++c) {
            const T* src = xp + (o * v.channels + c * v.groups) * v.inner;
            T* dst = op + (o * oc + c) * v.inner;
            std::copy(src, src + v.inner, dst);
            for (int64_t k = 1; k < v.groups; ++k)
              for (int64_t i = 0; i < v.inner; ++i) dst[i] = std::max(dst[i], src[k * v.inner + i]);
          }
      });
  op.GradOp({"X", "Out", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD at the first entry of each group equal to its max, 0 elsewhere.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Out");
        const Tensor& dy = ctx.Input("Out@GRAD");
        const MaxoutView v = MakeView(x.dims(), ctx.Attr<int32_t>("axis"), ctx.Attr<int32_t>("groups"));
        const int64_t oc = v.channels / v.groups;
        FL_ENFORCE(dy.numel() == y.numel() && y.numel() == v.outer * oc * v.inner, "maxout_grad: Out@GRAD '",
                   ctx.InputName("Out@GRAD"), "' ", dy.dims(), " and Out ", y.dims(), " do not match X ", x.dims(),
                   " with groups ", v.groups);
        T* g = ZeroedOutput<T>(dx, x.dims(), ctx.place());
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        const T* dp = dy.data<T>();
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t c = 0; c < oc; ++c) {
            const int64_t in_base = (o * v.channels + c * v.groups) * v.inner, out_base = (o * oc + c) * v.inner;
            for (int64_t i = 0; i < v.inner; ++i)
              for (int64_t k = 0; k < v.groups; ++k) {
                const int64_t xi = in_base + k * v.inner + i;
                if (xp[xi] == yp[out_base + i]) {
                  g[xi] = dp[out_base + i];
                  break;
                }
              }
          }
      });
}

}  // namespace fl
