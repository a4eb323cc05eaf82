// The view ops reshape2, squeeze2, unsqueeze2 and flatten2: Out = X with new dims, sharing X's buffer (no
// copy). XShape records [0] + X.dims (dims only, no data) so the grad can restore X's shape without keeping
// X alive (Fluid's convention). They differ only in how Out's dims follow from X's and the attributes; the
// signature, kernels and gradient are shared (RegisterView).
#include "grad_op_maker.h"
#include "helpers/concat_split.h"
#include "helpers/xshape.h"

namespace fl {

namespace {

// Resolves the shape attr against X's dims: 0 copies X's dim at that index, one -1 takes what is left.
// At compile time X may have unknown (-1) dims: the result is exact when X's unknown dims are all
// copied through 0s, else the inferred dim stays unknown.
DDim ReshapeDims(const DDim& x, const std::vector<int32_t>& shape, const std::string& xdesc) {
  const std::string sdesc = DDim(std::vector<int64_t>(shape.begin(), shape.end())).ToString();
  DDim out;
  int infer = -1;
  int64_t out_known = 1, x_known = 1;
  int out_unknown = 0, x_unknown = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == -1) {
      FL_ENFORCE(infer < 0, "reshape2: shape ", sdesc, " has more than one -1");
      infer = static_cast<int>(i);
    } else if (d == 0) {
      FL_ENFORCE(static_cast<int>(i) < x.size(), "reshape2: shape ", sdesc, " copies dim ", i, " (0) but ", xdesc,
                 " has rank ", x.size());
      d = x[i];
    } else {
      FL_ENFORCE(d > 0, "reshape2: shape ", sdesc, " has an invalid dim ", d, " (only -1, 0 or positive)");
    }
    out.push_back(d);
    if (static_cast<int>(i) == infer) continue;
    if (d < 0) ++out_unknown;
    else out_known *= d;
  }
  for (int64_t d : x) {
    if (d < 0) ++x_unknown;
    else x_known *= d;
  }
  // Unknown dims cancel only when X's are all passed through by 0s (one-to-one, e.g. the batch dim).
  const bool comparable = out_unknown == x_unknown;
  if (infer >= 0) {
    if (!comparable) {
      out[infer] = -1;
    } else {
      FL_ENFORCE(out_known > 0 && x_known % out_known == 0, "reshape2: cannot reshape ", xdesc, " to ", sdesc, ": ",
                 x_known, " elements are not divisible by ", out_known);
      out[infer] = x_known / out_known;
    }
  } else if (comparable) {
    FL_ENFORCE(x_known == out_known, "reshape2: cannot reshape ", xdesc, " (", x_known, " elements) to ", sdesc, " (",
               out_known, " elements)");
  }
  return out;
}

// Fluid's rule: every listed axis (negative counts from the end) must have size 1; unknown (-1) dims
// listed in axes are taken to be 1 and checked at run time. With no axes, the known 1s are dropped.
DDim SqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& xdesc) {
  std::vector<bool> drop(x.size(), false);
  for (int32_t a : axes) {
    const int ax = NormalizeAxis(a, x.size(), "squeeze2",
                                 Str(xdesc, " (axes ", DDim(std::vector<int64_t>(axes.begin(), axes.end())), ")"));
    FL_ENFORCE(x[ax] == 1 || x[ax] < 0, "squeeze2: axis ", a, " of ", xdesc, " has size ", x[ax],
               "; only size-1 dims can be squeezed");
    drop[ax] = true;
  }
  if (axes.empty())
    for (int i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  DDim out;
  for (int i = 0; i < x.size(); ++i)
    if (!drop[i]) out.push_back(x[i]);
  return out;
}

// Fluid's algorithm: axes are applied in order, each against the rank reached so far (a negative axis
// counts from the end of that rank + 1), and earlier inserted 1s move right past a later insertion.
DDim UnsqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& xdesc) {
  const int out_rank = x.size() + static_cast<int>(axes.size());
  FL_ENFORCE(out_rank <= DDim::kMaxRank, "unsqueeze2: ", xdesc, " with ", axes.size(), " new axes exceeds rank ",
             DDim::kMaxRank);
  std::vector<int> mark(out_rank + 1, 0);  // 1: an inserted axis
  int cur_rank = x.size();
  for (int32_t a : axes) {
    const int cur = a < 0 ? a + cur_rank + 1 : a;
    FL_ENFORCE(cur >= 0 && cur <= cur_rank, "unsqueeze2: axis ", a, " in axes ",
               DDim(std::vector<int64_t>(axes.begin(), axes.end())), " is out of range [", -cur_rank - 1, ", ",
               cur_rank, "] for ", xdesc, " (rank ", cur_rank, " at that point)");
    for (int i = cur_rank; i >= cur; --i) {
      if (mark[i] == 1) {
        mark[i + 1] = 1;
        mark[i] = 0;
      }
    }
    mark[cur] = 1;
    ++cur_rank;
  }
  DDim out;
  for (int i = 0, in = 0; i < out_rank; ++i) out.push_back(mark[i] ? 1 : x[in++]);
  return out;
}

// Product of dims [b, e), -1 if any is unknown.
int64_t KnownProduct(const DDim& d, int b, int e) {
  int64_t n = 1;
  for (int i = b; i < e; ++i) {
    if (d[i] < 0) return -1;
    n *= d[i];
  }
  return n;
}

// Out = X's buffer with the dims the runtime InferShape gave Out. Any dtype, any place.
const auto kShareXAsOut = [](const ExecutionContext& ctx, auto) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const DDim dims = out->dims();
  out->ShareDataWith(x);
  out->Resize(dims);
};

// X@GRAD = Out@GRAD's buffer with X's dims read from XShape.
const auto kShareOutGradAsXGrad = [](const ExecutionContext& ctx, auto) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& dout = ctx.Input("Out@GRAD");
  const Tensor* xshape = ctx.InputVar("XShape")->GetTensor();
  FL_ENFORCE(xshape && xshape->dims().size() >= 1, ctx.Type(), ": XShape '", ctx.InputName("XShape"),
             "' holds no shape (did the forward op run?)");
  const DDim dims = DimsFromXShape(xshape->dims());
  FL_ENFORCE(dims.numel() == dout.numel(), ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not have the ", dims.numel(), " elements of X ", dims);
  dx->ShareDataWith(dout);
  dx->Resize(dims);
};

// X@GRAD's compile-time shape from XShape (XShape has no data at run time: the kernel sets the dims).
void InferXGradFromXShape(InferShapeContext& ctx) {
  if (ctx.IsRuntime() || !ctx.HasOutput("X@GRAD")) return;
  ctx.SetOutput("X@GRAD", DimsFromXShape(ctx.InputDim("XShape")), ctx.InputDType("Out@GRAD"));
}

// Signature, kernels (every dtype; CPU and CUDA: only the tensor metadata changes) and gradient of a view op
// whose Out dims are given by `infer` (which also sets XShape). The gradient <op>_grad is the same view the
// other way; its own gradient is the op itself (LinearGradGrad).
OpBuilder& RegisterView(OpBuilder& op, const char* doc, InferShapeFn infer) {
  op.Doc(doc)
      .Input("X", "input tensor")
      .Output("Out", "X's data with the new dims")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .SetInferShape(infer)
      .CPUKernelAnyDType(kShareXAsOut)
      .KernelAnyDType(PlaceKind::CUDA, kShareXAsOut);
  op.GradOp({"XShape", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD with X's dims (from XShape), sharing the buffer.")
      .SetInferShape(InferXGradFromXShape)
      .Grad(LinearGradGrad)
      .CPUKernelAnyDType(kShareOutGradAsXGrad)
      .KernelAnyDType(PlaceKind::CUDA, kShareOutGradAsXGrad);
  return op;
}

}  // namespace

FL_REGISTER_OP(reshape2, op) {
  RegisterView(op, "Out = X reshaped to `shape` without copying: a 0 copies X's dim at that index, one -1 is inferred.",
               [](InferShapeContext& ctx) {
                 const DDim x = ctx.InputDim("X");
                 SetViewOutputs(ctx, x, ReshapeDims(x, ctx.Attr<std::vector<int32_t>>("shape"), ctx.Describe("X")));
               })
      .Attr<std::vector<int32_t>>("shape", {}, "the new shape (0: copy X's dim, -1: infer)");
}

FL_REGISTER_OP(squeeze2, op) {
  RegisterView(op,
               "Out = X with the size-1 dims in `axes` removed (all size-1 dims if axes is empty), sharing X's buffer.",
               [](InferShapeContext& ctx) {
                 const DDim x = ctx.InputDim("X");
                 SetViewOutputs(ctx, x, SqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), ctx.Describe("X")));
               })
      .Attr<std::vector<int32_t>>("axes", {}, "the size-1 axes to remove; negative counts from the end")
      .Axis();
}

FL_REGISTER_OP(unsqueeze2, op) {
  RegisterView(op, "Out = X with a size-1 dim inserted at each of `axes` (applied in order), sharing X's buffer.",
               [](InferShapeContext& ctx) {
                 const DDim x = ctx.InputDim("X");
                 SetViewOutputs(ctx, x, UnsqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), ctx.Describe("X")));
               })
      .Attr<std::vector<int32_t>>("axes", {}, "where to insert size-1 dims; negative counts from the end")
      .Axis();
}

FL_REGISTER_OP(flatten2, op) {
  RegisterView(op, "Out = X reshaped to [prod(X.dims[:axis]), prod(X.dims[axis:])] without copying.",
               [](InferShapeContext& ctx) {
                 const DDim x = ctx.InputDim("X");
                 const int axis = ctx.Attr<int32_t>("axis");
                 FL_ENFORCE(axis >= 0 && axis <= x.size(), "flatten2: axis ", axis, " is out of range [0, ", x.size(),
                            "] for ", ctx.Describe("X"));
                 SetViewOutputs(ctx, x, DDim{KnownProduct(x, 0, axis), KnownProduct(x, axis, x.size())});
               })
      .Attr<int32_t>("axis", 1, "dims before axis form the rows, the rest the columns (0 <= axis <= rank)")
      .Range(0, DDim::kMaxRank);
}

}  // namespace fl
