// sum: Out = X[0] + X[1] + ... + X[n-1]. Backward aggregates gradients with it, so it is one pass
// over memory: each output block is accumulated in a small stack buffer that stays in L1, reading
// every input once and writing Out once. Empty or uninitialized inputs are skipped (a gradient nobody
// produced is zero). When Out is X[0] the result lands in X[0]'s buffer with no extra copy. SelectedRows
// inputs (sparse gradients): all sparse gives SelectedRows (rows concatenated), sparse + dense gives dense.
// LoDTensorArray inputs (gradients of arrays) add up entry by entry.
#include <algorithm>
#include <cstring>
#include <vector>

#include "grad_op_maker.h"
#include "helpers/selected_rows.h"
#include "helpers/sum_inputs.h"
#include "helpers/tensor_array.h"
#include "op_context.h"
#include "sum_into.h"

namespace fl {

namespace {

void InferSum(InferShapeContext& ctx) {
  // At run time the kernel shapes Out from the inputs that are actually there (some may be unset).
  if (ctx.IsRuntime()) return;
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n > 0, "sum: input X is empty (Out '", ctx.OutputName("Out"), "')");
  int first = -1;  // first input with known dims: Out takes its dims and dtype
  // Arrays hold entries of any shape (their desc has the dims of the last write): their entries are checked at run
  // time, one by one.
  const bool arrays = ctx.InputKind("X", 0) == VarKind::LOD_TENSOR_ARRAY;
  for (int i = 0; i < n && !arrays; ++i) {
    DDim d = ctx.InputDim("X", i);
    // Rank 0 is a shape not set at build time; unknown or empty inputs are not checked (empty ones are
    // skipped at run time).
    if (d.size() == 0 || d.numel() <= 0) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    DDim f = ctx.InputDim("X", first);
    FL_ENFORCE(d.numel() == f.numel(), "sum: inputs must have the same number of elements; X[", first, "] '",
               ctx.InputName("X", first), "' ", f, " vs X[", i, "] '", ctx.InputName("X", i), "' ", d);
  }
  int src = first < 0 ? 0 : first;
  ctx.SetOutput("Out", ctx.InputDim("X", src), ctx.InputDType("X", src));
  ctx.ShareLoD("X", "Out", src);
}

// Some input is SelectedRows. All of them sparse: Out is SelectedRows with their rows and values
// concatenated (repeats kept, as Fluid). Any dense: Out is dense, the dense inputs added, then every
// sparse row added into its row.
template <typename T>
void SumWithSelectedRows(const ExecutionContext& ctx) {
  const int n = ctx.InputSize("X");
  std::vector<std::pair<int, const SelectedRows*>> sparse;
  std::vector<std::pair<int, const Tensor*>> dense;
  for (int i = 0; i < n; ++i) {
    if (const SelectedRows* sr = ctx.InputRowsOrNull("X", i)) sparse.emplace_back(i, sr);
    else if (const Tensor* t = ctx.InputOrNull("X", i)) dense.emplace_back(i, t);
  }
  const SelectedRows& s0 = *sparse[0].second;
  const DDim full = s0.CompleteDims();
  auto describe = [&](int i) { return Str("X[", i, "] '", ctx.InputName("X", i), "'"); };
  for (auto& [i, sr] : sparse) {
    FL_ENFORCE(sr->CompleteDims() == full && sr->value.dtype() == s0.value.dtype(), "sum: SelectedRows ", describe(i),
               " (height ", sr->height, ", value ", sr->value.dims(), ", ", DTypeName(sr->value.dtype()),
               ") does not match ", describe(sparse[0].first), " (height ", s0.height, ", value ", s0.value.dims(),
               ", ", DTypeName(s0.value.dtype()), ")");
    for (size_t k = 0; k < sr->rows.size(); ++k)
      FL_ENFORCE(sr->rows[k] >= 0 && sr->rows[k] < sr->height, "sum: SelectedRows ", describe(i), " has row ",
                 sr->rows[k], ", out of range [0, ", sr->height, ")");
  }
  Variable* out_var = ctx.OutputVar("Out");
  if (dense.empty()) {
    SelectedRows r;  // built aside: Out may be one of the inputs
    r.height = s0.height;
    size_t total = 0;
    for (auto& p : sparse) total += p.second->rows.size();
    r.rows.reserve(total);
    DDim vd = s0.value.dims();
    vd[0] = static_cast<int64_t>(total);
    T* v = r.value.mutable_data<T>(vd, ctx.place());
    const int64_t w = RowWidth(s0);
    for (auto& p : sparse) {
      const SelectedRows& sr = *p.second;
      r.rows.insert(r.rows.end(), sr.rows.begin(), sr.rows.end());
      if (!sr.rows.empty()) std::memcpy(v, sr.value.data<T>(), sr.rows.size() * w * sizeof(T));
      v += sr.rows.size() * w;
    }
    *out_var->GetMutableSelectedRows() = std::move(r);
    return;
  }
  const Tensor& d0 = *dense[0].second;
  for (auto& [i, t] : dense) {
    FL_ENFORCE(t->numel() == full.numel() && t->dtype() == s0.value.dtype(), "sum: ", describe(i), " ", t->dims(), " (",
               DTypeName(t->dtype()), ") does not match the dense dims ", full, " (", DTypeName(s0.value.dtype()),
               ") of SelectedRows ", describe(sparse[0].first));
  }
  Tensor acc;  // built aside: Out may be one of the inputs
  T* a = acc.mutable_data<T>(d0.dims(), ctx.place());
  if (dense.size() == 1) {
    std::memcpy(a, d0.data<T>(), d0.numel() * sizeof(T));
  } else {
    std::vector<const T*> ptrs;
    for (auto& p : dense) ptrs.push_back(p.second->data<T>());
    SumInto<T>(ptrs, a, d0.numel());
  }
  for (auto& p : sparse) AddRowsTo<T>(*p.second, T(1), a);
  acc.set_lod(d0.lod());
  *out_var->ResetToTensor() = acc;
}

// LoDTensorArray inputs (the gradient of an array read at several indices, added up by backward): entry by entry,
// as Fluid's sum of arrays. Out keeps its entries and gets every non-empty input entry added (copied where Out's
// entry is missing or empty), so a gradient array shared by the iterations of a While loop only grows; Out may be
// X[0] (then X[0] is not added to itself).
template <typename T>
void SumArrays(const ExecutionContext& ctx) {
  const int n = ctx.InputSize("X");
  const Variable* out_var = ctx.OutputVar("Out");
  for (int i = 0; i < n; ++i)
    FL_ENFORCE(ctx.InputVar("X", i)->IsTensorList() || !ctx.InputVar("X", i)->IsInitialized(), "sum: X[", i, "] '",
               ctx.InputName("X", i), "' holds a ", ctx.InputVar("X", i)->KindName(),
               ", but the other inputs or Out are LoDTensorArrays: sum adds arrays to arrays only");
  TensorList& out = OutputArray(ctx, "Out");
  for (int i = ctx.InputVar("X", 0) == out_var ? 1 : 0; i < n; ++i) {
    const TensorList& in = InputArray(ctx, "X", i);
    for (size_t k = 0; k < in.size(); ++k) {
      const Tensor& e = in[k];
      if (!e.IsInitialized() || e.numel() == 0) continue;
      if (out.size() <= k) out.resize(k + 1);
      Tensor& o = out[k];
      if (!o.IsInitialized() || o.numel() == 0) {
        o = Tensor();  // a buffer of its own
        TensorCopy(e, ctx.place(), &o);
        continue;
      }
      FL_ENFORCE(o.dims() == e.dims() && o.dtype() == e.dtype(), "sum: entry ", k, " of array X[", i, "] '",
                 ctx.InputName("X", i), "' is ", DTypeName(e.dtype()), " ", e.dims(), ", but the sum's entry ", k,
                 " is ", DTypeName(o.dtype()), " ", o.dims());
      FL_ENFORCE(o.lod() == e.lod(), "sum: entry ", k, " of array X[", i, "] '", ctx.InputName("X", i), "' has LoD ",
                 e.LoDString(), ", but the sum's entry ", k, " has ", o.LoDString());
      T* acc = static_cast<T*>(o.raw_mutable());
      const T* add = e.data<T>();
      for (int64_t j = 0; j < e.numel(); ++j) acc[j] += add[j];
    }
  }
}

bool SumOfArrays(const ExecutionContext& ctx) {
  if (ctx.OutputVar("Out")->IsTensorList()) return true;
  for (int i = 0; i < ctx.InputSize("X"); ++i)
    if (ctx.InputVar("X", i)->IsTensorList()) return true;
  return false;
}

// The default rule (the first input holding a tensor or SelectedRows), looking into arrays for their first entry.
DType SumKernelDType(const ExecutionContext& ctx) {
  const bool arrays = SumOfArrays(ctx);
  for (int i = 0; i < ctx.InputSize("X"); ++i) {
    if (arrays) {
      for (const Tensor& e : InputArray(ctx, "X", i))
        if (e.IsInitialized()) return e.dtype();
      continue;
    }
    if (const SelectedRows* sr = ctx.InputRowsOrNull("X", i)) return sr->value.dtype();
    if (const Tensor* t = ctx.InputOrNull("X", i)) return t->dtype();
  }
  // Arrays with no entries: any kernel adds nothing. Otherwise the executor's words for no input at all.
  FL_ENFORCE(arrays, "op sum has no initialized input tensor to choose a kernel dtype from");
  return DType::FP32;
}

}  // namespace

FL_REGISTER_OP(sum, op) {
  op.Doc(
        "Out = sum of all inputs X (equal numbers of elements); empty or unset inputs are skipped. SelectedRows "
        "inputs: all SelectedRows gives SelectedRows (rows and values concatenated); with a dense input, dense. "
        "LoDTensorArrays: added entry by entry into Out's entries (an entry missing from Out is copied).")
      .DuplicableInput("X", "tensors to add; all with the same number of elements")
      .Output("Out", "their sum, shaped like the first non-empty input; may be X[0] itself (in place)")
      .Inplace("Out", "X")  // the regularizer's sum(X=[grad, decay], Out=grad); any X[i] (blocks go via a buffer)
      .SetInferShape(InferSum)
      .SetKernelDType(SumKernelDType)
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        if (SumOfArrays(ctx)) return SumArrays<T>(ctx);
        const int n = ctx.InputSize("X");
        for (int i = 0; i < n; ++i)
          if (ctx.InputRowsOrNull("X", i)) return SumWithSelectedRows<T>(ctx);
        Tensor* out = ctx.Output("Out");
        SumInputs<T> in(ctx);
        if (in.WriteEmptyOut(ctx, out)) return;
        std::vector<const T*>& ptrs = in.ptrs;
        const Tensor* first = in.first;
        const bool out_is_input = in.out_is_input;
        // A fed (non-owned) buffer is replaced by mutable_data; keep it alive while it is read.
        std::shared_ptr<Allocation> keep = out_is_input ? out->holder() : nullptr;
        const DDim dims = first->dims();
        const LoD* lod = &first->lod();
        LoD lod_copy;
        if (out_is_input && !lod->empty()) lod = &(lod_copy = *lod);
        out->Resize(dims);
        T* o = out->mutable_data<T>(ctx.place());
        const int64_t numel = dims.numel();
        if (ptrs.size() == 1) {
          if (o != ptrs[0]) std::memcpy(o, ptrs[0], numel * sizeof(T));
        } else {  // in place (o == ptrs[0]) X[0] is read once, through Out
          SumInto<T>(ptrs, o, numel);
        }
        if (out->lod() != *lod) out->set_lod(*lod);
      })
      .Grad([](GradOpMaker& g) {
        // d(sum)/dX[i] = Out@GRAD for every i: one scale(1.0) per input, as Fluid does.
        const auto dout = g.OutputGrad("Out");
        for (const auto& dx : g.InputGrad("X")) {
          if (dx == kEmptyVarName) continue;
          OpDesc& op = g.NewOp("scale", false);
          op.SetInput("X", dout);
          op.SetOutput("Out", {dx});
          op.SetAttr("scale", 1.0f);
          op.SetAttr("bias", 0.0f);
          op.SetAttr("bias_after_scale", true);
        }
      });
}

}  // namespace fl
