// reduce_sum, reduce_mean, reduce_max: Out = X reduced over `dim` (or every axis with reduce_all).
// All three share the signature, shape rule and the [outer, reduce, inner] loops of helpers/reduce.h.
#include "helpers/reduce.h"

namespace fl {

namespace {

void ReduceInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const std::vector<bool> mask = ReducedAxes(ctx);
  const bool keep_dim = ctx.Attr<bool>("keep_dim");
  DDim out;
  for (int i = 0; i < x.size(); ++i) {
    if (!mask[i]) out.push_back(x[i]);
    else if (keep_dim) out.push_back(1);
  }
  if (out.size() == 0) out.push_back(1);  // Fluid: reducing everything without keep_dim gives [1]
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  if (x.size() > 0 && !mask[0]) ctx.ShareLoD("X", "Out");
}

std::vector<bool> KernelMask(const ExecutionContext& ctx) {
  return ReduceMask(ctx.Input("X").rank(), ctx.Attr<std::vector<int32_t>>("dim"), ctx.Attr<bool>("reduce_all"));
}

void DeclareReduce(OpBuilder& op, const char* doc) {
  op.Doc(doc)
      .Input("X", "input tensor")
      .Output("Out", "the reduced tensor")
      .Attr<std::vector<int32_t>>("dim", {0}, "axes to reduce; negative values count from the end")
      .Attr<bool>("keep_dim", false, "keep reduced axes as size 1")
      .Attr<bool>("reduce_all", false, "reduce every axis (ignores dim)")
      .SetInferShape(ReduceInferShape);
}

template <typename Rd, bool kMean>
struct ReduceKernel {
  template <typename Tag>
  void operator()(const ExecutionContext& ctx, Tag) const {
    ReduceTensor<Rd, typename Tag::type>(ctx, KernelMask(ctx), kMean);
  }
};

// Grad ops: X@GRAD[i] = f(i, o) where o is the Out position element i was reduced into.
void ReduceGradInferShape(InferShapeContext& ctx) {
  if (!ctx.HasOutput("X@GRAD")) return;
  ctx.SetOutput("X@GRAD", ctx.InputDim("X"), ctx.InputDType("X"));
  ctx.ShareLoD("X", "X@GRAD");
}

template <typename T, typename F>
void ReduceGradMap(const ExecutionContext& ctx, F f) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dy = ctx.Input("Out@GRAD");
  const ReduceLayout l = MakeReduceLayout(x.dims(), KernelMask(ctx));
  FL_ENFORCE(dy.numel() == l.out_numel, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dy.dims(),
             " does not match the reduction of X ", x.dims());
  dx->Resize(x.dims());
  T* g = dx->mutable_data<T>(ctx.place());
  const T* d = dy.data<T>();
  f(l, g, d);
}

void DeclareReduceGrad(OpBuilder& op, bool needs_out) {
  op.Input("X", "forward input (its shape; its values for reduce_max)");
  if (needs_out) op.Input("Out", "forward output");
  op.Input("Out@GRAD", "gradient of Out")
      .Output("X@GRAD", "gradient of X")
      .Attr<std::vector<int32_t>>("dim", {0}, "as in the forward op")
      .Attr<bool>("keep_dim", false, "as in the forward op")
      .Attr<bool>("reduce_all", false, "as in the forward op")
      .KernelDTypeFrom("X")
      .SetInferShape(ReduceGradInferShape);
}

// Sum and mean grads only need X's shape and Out@GRAD; max also needs X and Out to find the maxima.
template <bool kNeedsOut>
void ReduceGradMaker(GradOpMaker& g) {
  OpDesc& op = g.NewOp(g.Forward().type() + "_grad");
  op.SetInput("X", g.Input("X"));
  if (kNeedsOut) op.SetInput("Out", g.Output("Out"));
  op.SetInput("Out@GRAD", g.OutputGrad("Out"));
  op.SetOutput("X@GRAD", g.InputGrad("X"));
}

}  // namespace

FL_REGISTER_OP(reduce_sum, op) {
  DeclareReduce(op, "Out = sum of X over dim.");
  op.CPUKernel<float, double, int32_t, int64_t>(ReduceKernel<SumReducer, false>{}).SetGradMaker(ReduceGradMaker<false>);
}

FL_REGISTER_OP(reduce_mean, op) {
  DeclareReduce(op, "Out = mean of X over dim.");
  op.CPUKernel<float, double>(ReduceKernel<SumReducer, true>{}).SetGradMaker(ReduceGradMaker<false>);
}

FL_REGISTER_OP(reduce_max, op) {
  DeclareReduce(op, "Out = max of X over dim.");
  op.CPUKernel<float, double, int32_t, int64_t>(ReduceKernel<MaxReducer, false>{}).SetGradMaker(ReduceGradMaker<true>);
}

FL_REGISTER_OP(reduce_sum_grad, op) {
  DeclareReduceGrad(op, false);
  op.Doc("X@GRAD = Out@GRAD broadcast back over the reduced axes.")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        ReduceGradMap<T>(ctx, [](const ReduceLayout& l, T* g, const T* d) {
          ForEachReduced(l, [g, d](int64_t i, int64_t o) { g[i] = d[o]; });
        });
      });
}

FL_REGISTER_OP(reduce_mean_grad, op) {
  DeclareReduceGrad(op, false);
  op.Doc("X@GRAD = Out@GRAD / count broadcast back over the reduced axes.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        ReduceGradMap<T>(ctx, [](const ReduceLayout& l, T* g, const T* d) {
          const T scale = T(1) / static_cast<T>(l.reduce_count);
          ForEachReduced(l, [g, d, scale](int64_t i, int64_t o) { g[i] = d[o] * scale; });
        });
      });
}

FL_REGISTER_OP(reduce_max_grad, op) {
  DeclareReduceGrad(op, true);
  op.Doc("X@GRAD = Out@GRAD at the positions where X equals the max, 0 elsewhere.")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = ctx.Input("X").data<T>();
        const T* y = ctx.Input("Out").data<T>();
        ReduceGradMap<T>(ctx, [x, y](const ReduceLayout& l, T* g, const T* d) {
          ForEachReduced(l, [x, y, g, d](int64_t i, int64_t o) { g[i] = x[i] == y[o] ? d[o] : T(0); });
        });
      });
}

}  // namespace fl
