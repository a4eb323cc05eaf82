// stack / unstack: stacking K tensors of dims D at `axis` is concat of the K tensors seen as D with a 1
// inserted at `axis`; unstack is the matching split (the part copies of helpers/concat_split.h). Each is the
// other's gradient.
#include "grad_op_maker.h"
#include "helpers/concat_split.h"

namespace fl {

namespace {

DDim RemoveDim(const DDim& d, int axis) {
  DDim out;
  for (int i = 0; i < d.size(); ++i)
    if (i != axis) out.push_back(d[i]);
  return out;
}

// whole = the stacked tensor; parts[i] its i-th slice along axis (null: skipped / zeros).
template <typename T>
void Unstack(const Tensor& whole, int axis, const std::vector<Tensor*>& parts, const Place& place) {
  const DDim part_dims = RemoveDim(whole.dims(), axis);
  std::vector<void*> ptrs;
  for (Tensor* p : parts) {
    if (p) p->Resize(part_dims);
    ptrs.push_back(p ? p->mutable_data<T>(place) : nullptr);
  }
  SplitParts(MakeAxisParts(whole.dims(), axis, std::vector<int64_t>(parts.size(), 1), sizeof(T)), whole.data<T>(),
             ptrs);
}

template <typename T>
void Stack(const std::vector<const Tensor*>& parts, int axis, Tensor* whole, const Place& place) {
  std::vector<const void*> ptrs;
  for (const Tensor* p : parts) ptrs.push_back(p ? p->data<T>() : nullptr);
  ConcatParts(MakeAxisParts(whole->dims(), axis, std::vector<int64_t>(parts.size(), 1), sizeof(T)), ptrs,
              whole->mutable_data<T>(place));
}

void StackInferShape(InferShapeContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n >= 1, "stack: X needs at least one tensor");
  DDim d = ctx.InputDim("X", 0);
  for (int i = 1; i < n; ++i) {
    const DDim e = ctx.InputDim("X", i);
    bool same = e.size() == d.size();
    for (int j = 0; same && j < d.size(); ++j) {
      same = d[j] < 0 || e[j] < 0 || d[j] == e[j];
      if (same && d[j] < 0) d[j] = e[j];
    }
    FL_ENFORCE(same, "stack: ", ctx.Describe("X", 0), " and ", ctx.Describe("X", i), " must have the same dims");
  }
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), d.size() + 1, "stack",
                                 Str("rank ", d.size(), " inputs ", ctx.Describe("X", 0)));
  ctx.SetOutput("Y", InsertDim(d, axis, n), ctx.InputDType("X"));
}

int UnstackAxis(InferShapeContext& ctx, const char* op, const DDim& x, const std::string& xdesc) {
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), x.size(), op, xdesc);
  const int num = ctx.Attr<int32_t>("num");
  FL_ENFORCE(x[axis] < 0 || x[axis] == num, op, ": num=", num, " but ", xdesc, " has ", x[axis], " at axis ", axis);
  return axis;
}

const auto kStack = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* y = ctx.Output("Y");
  std::vector<const Tensor*> xs;
  for (int i = 0; i < ctx.InputSize("X"); ++i) {
    xs.push_back(&ctx.Input("X", i));
    FL_ENFORCE(xs.back()->dims() == xs[0]->dims(), "stack: X[0] '", ctx.InputName("X", 0), "' ", xs[0]->dims(),
               " and X[", i, "] '", ctx.InputName("X", i), "' ", xs.back()->dims(), " must have the same dims");
  }
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), y->rank(), "stack", "Y");
  Stack<T>(xs, axis, y, ctx.place());
};

const auto kUnstack = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const int axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), x.rank(), "unstack", "X");
  const std::vector<Tensor*> ys = ctx.MultiOutput("Y");
  FL_ENFORCE(static_cast<int64_t>(ys.size()) == x.dims()[axis], "unstack: ", ys.size(), " Y outputs for X '",
             ctx.InputName("X"), "' ", x.dims(), " at axis ", axis);
  Unstack<T>(x, axis, ys, ctx.place());
};

}  // namespace

FL_REGISTER_OP(stack, op) {
  op.Doc("Y = the X tensors (same dims) stacked along a new axis `axis` of Y.")
      .DuplicableInput("X", "the tensors to stack, all of the same dims and dtype")
      .Output("Y", "X's dims with len(X) inserted at axis")
      .Attr<int32_t>("axis", 0, "the new axis, in [-(rank+1), rank+1)")
      .Axis()
      .SetInferShape(StackInferShape)
      .CPUKernelAnyDType(kStack)
      .Grad([](GradOpMaker& g) {  // the slices of Y@GRAD along the stacked axis
        OpDesc& op = g.NewOp("unstack", false);
        op.SetInput("X", g.OutputGrad("Y"));
        op.SetOutput("Y", g.InputGrad("X"));
        op.SetAttr("axis", g.Attr<int32_t>("axis"));
        op.SetAttr("num", static_cast<int32_t>(g.Input("X").size()));
      });
}

FL_REGISTER_OP(unstack, op) {
  op.Doc("Y[i] = X[..., i, ...] along `axis`: X split into num tensors with that axis removed.")
      .Input("X", "the tensor to unstack")
      .DuplicableOutput("Y", "num tensors of X's dims without axis")
      .Attr<int32_t>("axis", 0, "the axis to unstack, in [-rank, rank)")
      .Axis()
      .Attr<int32_t>("num", 0, "number of outputs, X.dims[axis]")
      .Min(0)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int axis = UnstackAxis(ctx, "unstack", x, ctx.Describe("X"));
        const int n = ctx.OutputSize("Y");
        FL_ENFORCE(n == ctx.Attr<int32_t>("num"), "unstack: num=", ctx.Attr<int32_t>("num"), " but ", n,
                   " Y variables were given");
        for (int i = 0; i < n; ++i) ctx.SetOutput("Y", RemoveDim(x, axis), ctx.InputDType("X"), i);
      })
      .CPUKernelAnyDType(kUnstack)
      .Grad([](GradOpMaker& g) {  // the Y gradients stacked back (backward fills zeros for one that got none)
        OpDesc& op = g.NewOp("stack", false);
        op.SetInput("X", g.OutputGrad("Y"));
        op.SetOutput("Y", g.InputGrad("X"));
        op.SetAttr("axis", g.Attr<int32_t>("axis"));
      });
}

}  // namespace fl
