// lookup_table (fluid.layers.embedding): Out[..., :] = W[Ids[..., 0], :]; rows whose id is padding_idx
// are zeros and get no gradient. The grad is a dense W@GRAD (zeroed once, then the Out@GRAD rows are
// added into the rows their ids name), or with is_sparse a SelectedRows of the ids' rows. lookup_table_v2
// (fluid.embedding, Fluid 1.6+) is the same op on ids of any shape: Out = Ids.dims + [width] (no trailing 1). One
// definition serves both.
#include "grad_op_maker.h"
#include "helpers/rows.h"

namespace fl {

namespace {

// Out dims: lookup_table replaces Ids' trailing 1 by W's width (Fluid's rule: Ids' last dim is 1);
// lookup_table_v2 appends the width to Ids' dims.
DDim LookupDims(InferShapeContext& ctx, bool v2) {
  const std::string& op = ctx.Type();
  const DDim w = ctx.InputDim("W");
  const DDim ids = ctx.InputDim("Ids");
  FL_ENFORCE(w.size() == 2, op, ": ", ctx.Describe("W"), " must have rank 2 [vocab, width]");
  FL_ENFORCE(v2 || (ids.size() >= 1 && (ids[ids.size() - 1] == 1 || ids[ids.size() - 1] < 0)), op, ": ",
             ctx.Describe("Ids"), " must have last dim 1 (e.g. [N, 1] or [seq, batch, 1])");
  FL_ENFORCE(ctx.InputDType("Ids") == DType::INT64, op, ": ", ctx.Describe("Ids"), " must be int64, got ",
             DTypeName(ctx.InputDType("Ids")));
  const int64_t pad = ctx.Attr<int64_t>("padding_idx");
  FL_ENFORCE(pad == -1 || (pad >= 0 && (w[0] < 0 || pad < w[0])), op, ": padding_idx ", pad, " is out of range [0, ",
             w[0], ") of ", ctx.Describe("W"), " (-1: no padding)");
  DDim out(ids.data(), v2 ? ids.size() : ids.size() - 1);
  out.push_back(w[1]);
  return out;
}

int64_t SkipId(int64_t padding_idx) { return padding_idx == -1 ? kNoSkip : padding_idx; }

std::string IdsWhat(const ExecutionContext& ctx) { return Str(ctx.Type(), ": Ids '", ctx.InputName("Ids"), "'"); }

const auto kLookup = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  Tensor* out = ctx.Output("Out");
  const int64_t n = ids.numel(), rows = w.dims()[0], width = w.dims()[1];
  const int64_t skip = SkipId(ctx.Attr<int64_t>("padding_idx"));
  const int64_t* id = ids.data<int64_t>();
  CheckRowIndices(id, n, rows, skip, IdsWhat(ctx), Str("W '", ctx.InputName("W"), "' ", w.dims()));
  GatherRows(w.data<T>(), width, id, n, skip, out->mutable_data<T>(ctx.place()));
};

// is_sparse: W@GRAD is SelectedRows {rows = the ids as seen (repeats kept, as Fluid), height = vocab,
// value = Out@GRAD's rows}; rows of padding ids are zeros. Touches len(ids) rows instead of the whole table.
template <typename T>
void SparseLookupGrad(const ExecutionContext& ctx, const Tensor& w, const Tensor& ids, const Tensor& dout,
                      int64_t skip) {
  const int64_t n = ids.numel(), width = w.dims()[1];
  const int64_t* id = ids.data<int64_t>();
  SelectedRows* sr = ctx.OutputVar("W@GRAD")->GetMutableSelectedRows();
  sr->height = w.dims()[0];
  sr->rows.assign(id, id + n);
  T* v = sr->value.mutable_data<T>(DDim{n, width}, ctx.place());
  const T* g = dout.data<T>();
  const size_t bytes = static_cast<size_t>(width) * sizeof(T);
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] == skip) std::memset(v + i * width, 0, bytes);
    else std::memcpy(v + i * width, g + i * width, bytes);
  }
}

const auto kLookupGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  if (!ctx.HasOutput("W@GRAD")) return;
  const bool sparse = ctx.Attr<bool>("is_sparse");
  Tensor* dw = sparse ? nullptr : ctx.OutputOrNull("W@GRAD");
  const Tensor& w = ctx.Input("W");
  const Tensor& ids = ctx.Input("Ids");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const int64_t n = ids.numel(), rows = w.dims()[0], width = w.dims()[1];
  FL_ENFORCE(dout.numel() == n * width, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match Ids ", ids.dims(), " x width ", width);
  const int64_t skip = SkipId(ctx.Attr<int64_t>("padding_idx"));
  const int64_t* id = ids.data<int64_t>();
  CheckRowIndices(id, n, rows, skip, IdsWhat(ctx), Str("W '", ctx.InputName("W"), "' ", w.dims()));
  if (sparse) return SparseLookupGrad<T>(ctx, w, ids, dout, skip);
  dw->Resize(w.dims());
  T* d = dw->mutable_data<T>(ctx.place());
  std::memset(d, 0, static_cast<size_t>(w.numel()) * sizeof(T));
  ScatterAddRows(dout.data<T>(), width, id, n, skip, d);
};

// The registration of both ops; v2 differs only in the Ids rule (LookupDims).
template <bool v2>
void DefineLookup(OpBuilder& op) {
  const std::string name = v2 ? "lookup_table_v2" : "lookup_table";
  op.Doc(v2 ? "Embedding lookup: Out[..., :] = W[Ids[...], :] for ids of any shape; ids equal to padding_idx give "
              "zero rows."
            : "Embedding lookup: Out[..., :] = W[Ids[..., 0], :]; ids equal to padding_idx give zero rows.")
      .Input("W", "the table [vocab, width]")
      .Input("Ids", v2 ? "int64 ids of any shape, each in [0, vocab)" : "int64 ids, last dim 1, each in [0, vocab)")
      .Output("Out", v2 ? "Ids' dims + [width]" : "Ids' dims with the trailing 1 replaced by width")
      .NonDifferentiable({"Ids"})
      .Attr<bool>("is_sparse", false, "W@GRAD is SelectedRows (the rows of the ids seen) instead of a dense table")
      .Attr<bool>("is_distributed", false, "distributed table (accepted for compatibility; no effect)")
      .Attr<int64_t>("padding_idx", -1, "id whose rows output zeros and get no gradient (-1: none)")
      .Attr<bool>("remote_prefetch", false, "prefetch from a parameter server (accepted; no effect)")
      .KernelDTypeFrom("W")
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.SetOutput("Out", LookupDims(ctx, v2), ctx.InputDType("W"));
        ctx.ShareLoD("Ids", "Out");
      })
      .template CPUKernel<float, double>(kLookup);
  op.GradOp({"W", "Ids", "Out@GRAD"})
      .Doc("Gradient of " + name +
           ": W@GRAD (dense) = zeros, then W@GRAD[Ids[i]] += Out@GRAD[i] except padding ids; with is_sparse a "
           "SelectedRows {rows: Ids, value: Out@GRAD rows (padding ids' zeroed)}.")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double>(kLookupGrad);
}

}  // namespace

FL_REGISTER_OP(lookup_table, op) { DefineLookup<false>(op); }

FL_REGISTER_OP(lookup_table_v2, op) { DefineLookup<true>(op); }

}  // namespace fl
