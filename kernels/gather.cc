// gather: Out = X[Index] along dim 0 (Index int32 or int64, [N] or [N, 1]); the grad scatter-adds
// Out@GRAD rows into a zeroed X@GRAD, so repeated indices accumulate.
// gather_nd: Index [.., k] holds k-tuples addressing X's first k dims; Out = Index.dims[:-1] + X.dims[k:],
// each tuple's slice X[i0, .., ik-1] copied (k = 0: all of X per tuple). Its grad scatter-adds likewise.
// Indices out of range are errors naming the op, the variable, the value and the bound (helpers/rows.h).
#include "grad_op_maker.h"
#include "helpers/rows.h"

namespace fl {

namespace {

void CheckIndexDims(const DDim& idx, const std::string& desc) {
  FL_ENFORCE(idx.size() == 1 || (idx.size() == 2 && (idx[1] == 1 || idx[1] < 0)), "gather: ", desc,
             " must be [N] or [N, 1]");
}

const auto kGather = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& index = ctx.Input("Index");
  Tensor* out = ctx.Output("Out");
  const int64_t rows = x.dims()[0], width = x.dims().Product(1, x.rank()), n = index.numel();
  T* dst = out->mutable_data<T>(ctx.place());
  VisitIndexDType(index.dtype(), "gather: Index", [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* idx = index.data<I>();
    CheckRowIndices(idx, n, rows, kNoSkip, Str("gather: Index '", ctx.InputName("Index"), "'"),
                    Str("X '", ctx.InputName("X"), "' ", x.dims()));
    GatherRows(x.data<T>(), width, idx, n, kNoSkip, dst);
  });
};

const auto kGatherGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& index = ctx.Input("Index");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int64_t rows = x.dims()[0], width = x.dims().Product(1, x.rank()), n = index.numel();
  FL_ENFORCE(dout.numel() == n * width, "gather_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match ", n, " rows of X ", x.dims());
  dx->Resize(x.dims());
  T* d = dx->mutable_data<T>(ctx.place());
  std::memset(d, 0, static_cast<size_t>(x.numel()) * sizeof(T));
  VisitIndexDType(index.dtype(), "gather_grad: Index", [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* idx = index.data<I>();
    CheckRowIndices(idx, n, rows, kNoSkip, Str("gather_grad: Index '", ctx.InputName("Index"), "'"),
                    Str("X '", ctx.InputName("X"), "' ", x.dims()));
    ScatterAddRows(dout.data<T>(), width, idx, n, kNoSkip, d);
  });
};

const auto kGatherNd = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const NdIndexRows v = CheckedNdRows(ctx, "Index", x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
  GatherRows(x.data<T>(), v.width, v.rows.data(), v.n, kNoSkip, ctx.Alloc<T>("Out"));
};

const auto kGatherNdGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const NdIndexRows v = CheckedNdRows(ctx, "Index", x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
  FL_ENFORCE(dout.numel() == v.n * v.width, "gather_nd_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match ", v.n, " slices of ", v.width, " elements of X ", x.dims());
  dx->Resize(x.dims());
  T* d = dx->mutable_data<T>(ctx.place());
  std::memset(d, 0, static_cast<size_t>(x.numel()) * sizeof(T));
  ScatterAddRows(dout.data<T>(), v.width, v.rows.data(), v.n, kNoSkip, d);
};

}  // namespace

FL_REGISTER_OP(gather_nd, op) {
  op.Doc(
        "Out = X[Index]: Index [.., k] holds k-tuples of coordinates into X's first k dims; each picks the "
        "slice X[i0, .., ik-1]. Out = Index.dims[:-1] + X.dims[k:].")
      .Input("X", "the tensor to gather from")
      .Input("Index", "int32 or int64 [.., k], k <= rank(X); each coordinate j in [0, X.dims[j])")
      .Output("Out", "Index.dims[:-1] + X.dims[k:]")
      .NonDifferentiable({"Index"})
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const DDim idx = ctx.InputDim("Index");
        const DType it = ctx.InputDType("Index");
        FL_ENFORCE(it == DType::INT32 || it == DType::INT64, "gather_nd: ", ctx.Describe("Index"),
                   " must be int32 or int64, got ", DTypeName(it));
        FL_ENFORCE(idx.size() >= 1, "gather_nd: ", ctx.Describe("Index"), " must have rank >= 1");
        const int64_t k = idx[idx.size() - 1];
        FL_ENFORCE(k <= x.size(), "gather_nd: the last dim of ", ctx.Describe("Index"), " (", k,
                   ") must not exceed the rank of ", ctx.Describe("X"));
        DDim out;
        for (int i = 0; i + 1 < idx.size(); ++i) out.push_back(idx[i]);
        if (k < 0) out.push_back(-1);  // tuple length unknown at build time: the kernel sizes Out
        else
          for (int i = static_cast<int>(k); i < x.size(); ++i) out.push_back(x[i]);
        if (out.size() == 0) out.push_back(1);  // one full-rank tuple: a 1-element Out
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
      })
      .CPUKernel<float, double, int32_t, int64_t, uint8_t, bool>(kGatherNd);
  op.GradOp({"X", "Index", "Out@GRAD"})
      .Doc("Gradient of gather_nd: X@GRAD = zeros, then X@GRAD[Index[i]] += Out@GRAD[i].")
      .CPUKernel<float, double>(kGatherNdGrad);
}

FL_REGISTER_OP(gather, op) {
  op.Doc("Out = X[Index]: the rows of X (along dim 0) that Index names, in Index's order.")
      .Input("X", "the tensor to gather rows from, rank >= 1")
      .Input("Index", "int32 or int64 row indices, [N] or [N, 1], each in [0, X.dims[0])")
      .Output("Out", "[N] + X.dims[1:]")
      .Attr<bool>("overwrite", true,
                  "accepted for Fluid 1.8 programs and ignored: X@GRAD always sums Out@GRAD over repeated indices "
                  "(the derivative); Fluid's overwrite=True keeps one of them")
      .NonDifferentiable({"Index"})
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const DDim idx = ctx.InputDim("Index");
        FL_ENFORCE(x.size() >= 1, "gather: ", ctx.Describe("X"), " must have rank >= 1");
        CheckIndexDims(idx, ctx.Describe("Index"));
        const DType it = ctx.InputDType("Index");
        FL_ENFORCE(it == DType::INT32 || it == DType::INT64, "gather: ", ctx.Describe("Index"),
                   " must be int32 or int64, got ", DTypeName(it));
        DDim out{idx[0]};
        for (int i = 1; i < x.size(); ++i) out.push_back(x[i]);
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
      })
      .CPUKernel<float, double, int32_t, int64_t>(kGather);
  op.GradOp({"X", "Index", "Out@GRAD"})
      .Doc("Gradient of gather: X@GRAD = zeros, then X@GRAD[Index[i]] += Out@GRAD[i].")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double>(kGatherGrad);
}

}  // namespace fl
