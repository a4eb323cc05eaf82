// scatter: Out = X with the rows Ids name (along dim 0) replaced by the rows of Updates (overwrite=True: the
// last of repeated ids wins) or set to the sum of the Updates rows naming them (overwrite=False; X's value
// there is discarded, as in Fluid). scatter_nd_add: Out = X, then Out[Index[i]] += Updates[i] for k-tuples
// Index[i] addressing X's first k dims. Indices out of range are errors naming the op, the variable, the value
// and the bound (helpers/rows.h, shared with gather and gather_nd).
//
// Gradients. scatter: X@GRAD = Out@GRAD with the scattered rows zeroed (X does not reach them);
// Updates@GRAD[i] = Out@GRAD[Ids[i]] for each update that reaches Out (with overwrite, only the last of
// repeated ids; the others get zeros). scatter_nd_add: X@GRAD = Out@GRAD, Updates@GRAD = gather_nd(Out@GRAD,
// Index).
#include <cstring>
#include <vector>

#include "helpers/rows.h"
#include "op_context.h"

namespace fl {

namespace {

// Whether dims a and b agree where both are known (-1: unknown at build time).
bool DimsAgree(const DDim& a, const DDim& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

void CheckIndexDType(InferShapeContext& ctx, const char* slot) {
  const DType it = ctx.InputDType(slot);
  FL_ENFORCE(it == DType::INT32 || it == DType::INT64, ctx.Type(), ": ", ctx.Describe(slot),
             " must be int32 or int64, got ", DTypeName(it));
}

// ------------------------------------------------------------------ scatter

void ScatterInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X"), ids = ctx.InputDim("Ids"), upd = ctx.InputDim("Updates");
  CheckIndexDType(ctx, "Ids");
  ctx.EnforceSameDType("X", "Updates");
  FL_ENFORCE(x.size() >= 1, "scatter: ", ctx.Describe("X"), " must have rank >= 1");
  FL_ENFORCE(ids.size() == 1 || (ids.size() == 2 && (ids[1] == 1 || ids[1] < 0)), "scatter: ", ctx.Describe("Ids"),
             " must be [N] or [N, 1]");
  DDim want{ids[0]};
  for (int i = 1; i < x.size(); ++i) want.push_back(x[i]);
  FL_ENFORCE(DimsAgree(upd, want), "scatter: ", ctx.Describe("Updates"), " must be ", want, " (one row of X per id of ",
             ctx.Describe("Ids"), ", X ", x, ")");
  ctx.SetOutput("Out", x, ctx.InputDType("X"));
}

struct ScatterView {
  int64_t rows, width, n;
};
ScatterView MakeScatterView(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& upd = ctx.Input("Updates");
  const int64_t width = x.dims().Product(1, x.rank());
  FL_ENFORCE(upd.numel() == ids.numel() * width, ctx.Type(), ": Updates '", ctx.InputName("Updates"), "' ", upd.dims(),
             " must hold ", ids.numel(), " rows of X '", ctx.InputName("X"), "' ", x.dims());
  return ScatterView{x.dims()[0], width, ids.numel()};
}

// Ids checked against `rows` (the rows of `table`, named in errors), as int64.
std::vector<int64_t> CheckedIds(const ExecutionContext& ctx, int64_t rows, const std::string& table) {
  const Tensor& ids = ctx.Input("Ids");
  const int64_t n = ids.numel();
  std::vector<int64_t> out(n);
  VisitIndexDType(ids.dtype(), Str(ctx.Type(), ": Ids"), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* p = ids.data<I>();
    CheckRowIndices(p, n, rows, kNoSkip, Str(ctx.Type(), ": Ids '", ctx.InputName("Ids"), "'"), table);
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  });
  return out;
}

const auto kScatter = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const ScatterView v = MakeScatterView(ctx);
  const std::vector<int64_t> ids = CheckedIds(ctx, v.rows, Str("X '", ctx.InputName("X"), "' ", x.dims()));
  T* out = ctx.Alloc<T>("Out");
  const T* upd = ctx.Input("Updates").data<T>();
  std::memcpy(out, x.data<T>(), static_cast<size_t>(x.numel()) * sizeof(T));
  const size_t bytes = static_cast<size_t>(v.width) * sizeof(T);
  if (ctx.Attr<bool>("overwrite")) {
    for (int64_t i = 0; i < v.n; ++i) std::memcpy(out + ids[i] * v.width, upd + i * v.width, bytes);
    return;
  }
  for (int64_t i = 0; i < v.n; ++i) std::memset(out + ids[i] * v.width, 0, bytes);
  ScatterAddRows(upd, v.width, ids.data(), v.n, kNoSkip, out);
};

const auto kScatterGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  Tensor* dupd = ctx.OutputOrNull("Updates@GRAD");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const Tensor& ids_t = ctx.Input("Ids");
  const int64_t rows = dout.dims()[0], width = dout.dims().Product(1, dout.rank()), n = ids_t.numel();
  const std::vector<int64_t> ids =
      CheckedIds(ctx, rows, Str("Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims()));
  const T* g = dout.data<T>();
  const size_t bytes = static_cast<size_t>(width) * sizeof(T);
  if (dx) {
    dx->Resize(dout.dims());
    T* d = dx->mutable_data<T>(ctx.place());
    std::memcpy(d, g, static_cast<size_t>(dout.numel()) * sizeof(T));
    for (int64_t i = 0; i < n; ++i) std::memset(d + ids[i] * width, 0, bytes);
  }
  if (dupd) {
    const Tensor& upd = ctx.Input("Updates");
    FL_ENFORCE(upd.numel() == n * width, "scatter_grad: Updates '", ctx.InputName("Updates"), "' ", upd.dims(),
               " must hold ", n, " rows of Out@GRAD ", dout.dims());
    dupd->Resize(upd.dims());
    T* d = dupd->mutable_data<T>(ctx.place());
    GatherRows(g, width, ids.data(), n, kNoSkip, d);
    if (ctx.Attr<bool>("overwrite")) {  // an update a later one with the same id overwrote does not reach Out
      std::vector<char> seen(rows, 0);
      for (int64_t i = n - 1; i >= 0; --i) {
        if (seen[ids[i]]) std::memset(d + i * width, 0, bytes);
        seen[ids[i]] = 1;
      }
    }
  }
};

// ------------------------------------------------------------------ scatter_nd_add

void ScatterNdAddInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X"), idx = ctx.InputDim("Index"), upd = ctx.InputDim("Updates");
  CheckIndexDType(ctx, "Index");
  ctx.EnforceSameDType("X", "Updates");
  FL_ENFORCE(idx.size() >= 1, "scatter_nd_add: ", ctx.Describe("Index"), " must have rank >= 1");
  const int64_t k = idx[idx.size() - 1];
  FL_ENFORCE(k <= x.size(), "scatter_nd_add: the last dim of ", ctx.Describe("Index"), " (", k,
             ") must not exceed the rank of ", ctx.Describe("X"));
  if (k >= 0) {
    DDim want;
    for (int i = 0; i + 1 < idx.size(); ++i) want.push_back(idx[i]);
    for (int i = static_cast<int>(k); i < x.size(); ++i) want.push_back(x[i]);
    if (want.size() == 0) want.push_back(1);
    FL_ENFORCE(DimsAgree(upd, want), "scatter_nd_add: ", ctx.Describe("Updates"), " must be ", want,
               " (Index.dims[:-1] + X.dims[k:] for ", ctx.Describe("Index"), " and ", ctx.Describe("X"), ")");
  }
  ctx.SetOutput("Out", x, ctx.InputDType("X"));
}

const auto kScatterNdAdd = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& upd = ctx.Input("Updates");
  const NdIndexRows v = CheckedNdRows(ctx, "Index", x.dims(), Str("X '", ctx.InputName("X"), "' ", x.dims()));
  FL_ENFORCE(upd.numel() == v.n * v.width, "scatter_nd_add: Updates '", ctx.InputName("Updates"), "' ", upd.dims(),
             " must hold ", v.n, " slices of ", v.width, " elements of X ", x.dims());
  T* out = ctx.Alloc<T>("Out");
  std::memcpy(out, x.data<T>(), static_cast<size_t>(x.numel()) * sizeof(T));
  ScatterAddRows(upd.data<T>(), v.width, v.rows.data(), v.n, kNoSkip, out);
};

const auto kScatterNdAddGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& dout = ctx.Input("Out@GRAD");
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
    dx->Resize(dout.dims());
    std::memcpy(dx->mutable_data<T>(ctx.place()), dout.data<T>(), static_cast<size_t>(dout.numel()) * sizeof(T));
  }
  if (Tensor* dupd = ctx.OutputOrNull("Updates@GRAD")) {
    const Tensor& upd = ctx.Input("Updates");
    const NdIndexRows v =
        CheckedNdRows(ctx, "Index", dout.dims(), Str("Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims()));
    FL_ENFORCE(upd.numel() == v.n * v.width, "scatter_nd_add_grad: Updates '", ctx.InputName("Updates"), "' ",
               upd.dims(), " must hold ", v.n, " slices of ", v.width, " elements of Out@GRAD ", dout.dims());
    dupd->Resize(upd.dims());
    GatherRows(dout.data<T>(), v.width, v.rows.data(), v.n, kNoSkip, dupd->mutable_data<T>(ctx.place()));
  }
};

}  // namespace

FL_REGISTER_OP(scatter, op) {
  op.Doc(
        "Out = X with rows Ids[i] (along dim 0) set to Updates[i] (overwrite) or to the sum of the Updates rows "
        "naming them (overwrite=False).")
      .Input("X", "the tensor to scatter into, rank >= 1")
      .Input("Ids", "int32 or int64 row indices, [N] or [N, 1], each in [0, X.dims[0])")
      .Input("Updates", "the rows to write, [N] + X.dims[1:]")
      .Output("Out", "X's shape")
      .Attr<bool>("overwrite", true,
                  "True: the rows are replaced (the last of repeated ids wins); False: set to the sum of their "
                  "updates")
      .NonDifferentiable({"Ids"})
      .KernelDTypeFrom("X")
      .SetInferShape(ScatterInferShape)
      .CPUKernel<float, double, int32_t, int64_t>(kScatter);
  op.GradOp({"Ids", "Updates", "Out@GRAD"})
      .ShapeLike("X", "Out@GRAD")
      .Doc(
          "Gradient of scatter: X@GRAD = Out@GRAD with rows Ids zeroed; Updates@GRAD[i] = Out@GRAD[Ids[i]] for "
          "the updates that reach Out (zeros for overwritten ones).")
      .CPUKernel<float, double>(kScatterGrad);
}

FL_REGISTER_OP(scatter_nd_add, op) {
  op.Doc(
        "Out = X, then Out[Index[i]] += Updates[i]: Index [.., k] holds k-tuples of coordinates into X's first k "
        "dims; repeated tuples accumulate.")
      .Input("X", "the tensor to add into")
      .Input("Index", "int32 or int64 [.., k], k <= rank(X); each coordinate j in [0, X.dims[j])")
      .Input("Updates", "Index.dims[:-1] + X.dims[k:]")
      .Output("Out", "X's shape")
      .NonDifferentiable({"Index"})
      .KernelDTypeFrom("X")
      .SetInferShape(ScatterNdAddInferShape)
      .CPUKernel<float, double, int32_t, int64_t>(kScatterNdAdd);
  op.GradOp({"Index", "Updates", "Out@GRAD"})
      .ShapeLike("X", "Out@GRAD")
      .Doc("Gradient of scatter_nd_add: X@GRAD = Out@GRAD, Updates@GRAD = gather_nd(Out@GRAD, Index).")
      .CPUKernel<float, double>(kScatterNdAddGrad);
}

}  // namespace fl
