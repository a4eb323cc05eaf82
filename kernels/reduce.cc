// reduce_sum, reduce_mean, reduce_max, reduce_prod and the bool reduce_all / reduce_any: Out = X reduced over
// `dim` (or every axis with reduce_all), and mean (Out = the mean of every element, shape [1]: the usual last step
// of a loss). They share the signature, shape rule and the [outer, reduce, inner] loops of helpers/reduce.h.
#include "helpers/reduce.h"
#include "grad_op_maker.h"
#include "helpers/reduce_shape.h"

namespace fl {

namespace {

void ReduceInferShape(InferShapeContext& ctx) { SetReducedOutput(ctx, ReducedAxes(ctx)); }

std::vector<bool> KernelMask(const ExecutionContext& ctx) {
  return ReduceMask(ctx.Input("X").rank(), ctx.Attr<std::vector<int32_t>>("dim"), ctx.Attr<bool>("reduce_all"));
}

void DeclareReduce(OpBuilder& op, const char* doc) {
  op.Doc(doc)
      .Input("X", "input tensor")
      .Output("Out", "the reduced tensor")
      .Attr<std::vector<int32_t>>("dim", {0}, "axes to reduce; negative values count from the end")
      .Axis()
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

// Grad kernels: X@GRAD[i] = f(i, o) where o is the Out position element i was reduced into.
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

// reduce_max_grad(X, Out, dOut) routes dOut to the maxima: linear in dOut with the mask (X == Out), which
// does not depend on X differentiably. So d(dOut) = reduce_sum(ddX * mask), the mask being
// reduce_max_grad(X, Out, ones).
void ReduceMaxGradGrad(GradOpMaker& g) {
  const std::string ddx = FirstArg(g.OutputGrad("X@GRAD")), d_dout = FirstArg(g.InputGrad("Out@GRAD"));
  if (ddx.empty() || d_dout.empty()) return;
  const std::string ones = g.Temp("ones"), mask = g.Temp("mask"), masked = g.Temp("masked");
  OpDesc& fill = g.NewOp("fill_any_like", false);
  fill.SetInput("X", g.Input("Out"));
  fill.SetOutput("Out", {ones});
  fill.SetAttr("value", 1.0f);
  OpDesc& sel = g.NewOp(g.Forward().type());
  sel.SetInput("X", g.Input("X"));
  sel.SetInput("Out", g.Input("Out"));
  sel.SetInput("Out@GRAD", {ones});
  sel.SetOutput("X@GRAD", {mask});
  OpDesc& mul = g.NewOp("elementwise_mul", false);
  mul.SetInput("X", {ddx});
  mul.SetInput("Y", {mask});
  mul.SetOutput("Out", {masked});
  OpDesc& sum = g.NewOp("reduce_sum");
  sum.SetInput("X", {masked});
  sum.SetOutput("Out", {d_dout});
}

}  // namespace

// Sum and mean grads only need X's shape and Out@GRAD; max also needs X and Out to find the maxima.
FL_REGISTER_OP(reduce_sum, op) {
  DeclareReduce(op, "Out = sum of X over dim.");
  op.CPUKernel<float, double, int32_t, int64_t>(ReduceKernel<SumReducer, false>{});
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD broadcast back over the reduced axes.")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        ReduceGradMap<T>(ctx, [](const ReduceLayout& l, T* g, const T* d) {
          ForEachReduced(l, [g, d](int64_t i, int64_t o) { g[i] = d[o]; });
        });
      });
}

FL_REGISTER_OP(reduce_mean, op) {
  DeclareReduce(op, "Out = mean of X over dim.");
  op.CPUKernel<float, double>(ReduceKernel<SumReducer, true>{});
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD / count broadcast back over the reduced axes.")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        ReduceGradMap<T>(ctx, [](const ReduceLayout& l, T* g, const T* d) {
          const T scale = T(1) / static_cast<T>(l.reduce_count);
          ForEachReduced(l, [g, d, scale](int64_t i, int64_t o) { g[i] = d[o] * scale; });
        });
      });
}

FL_REGISTER_OP(reduce_max, op) {
  DeclareReduce(op, "Out = max of X over dim.");
  op.CPUKernel<float, double, int32_t, int64_t>(ReduceKernel<MaxReducer, false>{});
  op.GradOp({"X", "Out", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD at the positions where X equals the max, 0 elsewhere.")
      .Grad(ReduceMaxGradGrad)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = ctx.Input("X").data<T>();
        const T* y = ctx.Input("Out").data<T>();
        ReduceGradMap<T>(ctx, [x, y](const ReduceLayout& l, T* g, const T* d) {
          ForEachReduced(l, [x, y, g, d](int64_t i, int64_t o) { g[i] = x[i] == y[o] ? d[o] : T(0); });
        });
      });
}

// reduce_prod_grad: X@GRAD[i] = Out@GRAD * (product of the other elements of X[i]'s group), computed without
// dividing by zero: per group, the count of zeros and the product of the non-zero elements.
FL_REGISTER_OP(reduce_prod, op) {
  DeclareReduce(op, "Out = product of X over dim.");
  op.CPUKernel<float, double, int32_t, int64_t>(ReduceKernel<ProdReducer, false>{});
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD * the product of the other elements reduced with X (exact with zeros in X).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = ctx.Input("X").data<T>();
        ReduceGradMap<T>(ctx, [x](const ReduceLayout& l, T* g, const T* d) {
          std::vector<T> nonzero(l.out_numel, T(1));
          std::vector<int64_t> zeros(l.out_numel, 0);
          ForEachReduced(l, [&](int64_t i, int64_t o) {
            if (x[i] == T(0)) ++zeros[o];
            else nonzero[o] *= x[i];
          });
          ForEachReduced(l, [&](int64_t i, int64_t o) {
            if (zeros[o] == 0) g[i] = d[o] * nonzero[o] / x[i];
            else if (zeros[o] == 1 && x[i] == T(0)) g[i] = d[o] * nonzero[o];
            else g[i] = T(0);
          });
        });
      });
}

namespace {

void DeclareBoolReduce(OpBuilder& op, const char* doc) {
  DeclareReduce(op, doc);
  op.NoGradient().SetInferShape([](InferShapeContext& ctx) {
    FL_ENFORCE(ctx.InputDType("X") == DType::BOOL, ctx.Type(), ": ", ctx.Describe("X"), " must be bool, got ",
               DTypeName(ctx.InputDType("X")));
    ReduceInferShape(ctx);
  });
}

}  // namespace

FL_REGISTER_OP(reduce_all, op) {
  DeclareBoolReduce(op, "Out = logical AND of X (bool) over dim.");
  op.CPUKernel<bool>(ReduceKernel<AndReducer, false>{});
}

FL_REGISTER_OP(reduce_any, op) {
  DeclareBoolReduce(op, "Out = logical OR of X (bool) over dim.");
  op.CPUKernel<bool>(ReduceKernel<OrReducer, false>{});
}

FL_REGISTER_OP(mean, op) {
  op.Doc("Out = mean(X) over all elements, shape [1].")
      .Input("X", "input tensor")
      .Output("Out", "the mean, shape [1]")
      .SetInferShape([](InferShapeContext& ctx) { ctx.SetOutput("Out", DDim{1}, ctx.InputDType("X")); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        const Tensor& x = ctx.Input("X");
        ReduceTensor<SumReducer, typename decltype(tag)::type>(ctx, std::vector<bool>(x.rank(), true), true);
      })
      .Grad([](GradOpMaker& g) {  // reduce_mean's gradient over every axis
        OpDesc& op = g.NewOp("reduce_mean_grad", false);
        op.SetInput("X", g.Input("X"));
        op.SetInput("Out@GRAD", g.OutputGrad("Out"));
        op.SetOutput("X@GRAD", g.InputGrad("X"));
        op.SetAttr("dim", std::vector<int32_t>{0});
        op.SetAttr("keep_dim", false);
        op.SetAttr("reduce_all", true);
      });
}

}  // namespace fl
