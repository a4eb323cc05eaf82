// transpose2: Out = X with its dims permuted by `axis` (Out.dims[k] = X.dims[axis[k]]); XShape records
// [0] + X.dims. The grad applies the inverse permutation to Out@GRAD.
#include "helpers/transpose.h"
#include "helpers/xshape.h"
#include "op_context.h"

namespace fl {

namespace {

DDim Permuted(const DDim& d, const std::vector<int32_t>& perm) {
  DDim out;
  for (int32_t a : perm) out.push_back(d[a]);
  return out;
}

std::vector<int32_t> Inverse(const std::vector<int32_t>& perm) {
  std::vector<int32_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[perm[k]] = static_cast<int32_t>(k);
  return inv;
}

// Transposes `in_slot` into `out_slot` by `perm` (Out already shaped by InferShape or the caller).
template <typename T>
void RunTranspose(const ExecutionContext& ctx, const char* in_slot, Tensor* out, const std::vector<int32_t>& perm) {
  const Tensor& x = ctx.Input(in_slot);
  CheckPermutation(perm, x.rank(), Str(ctx.Type(), ": ", in_slot, " '", ctx.InputName(in_slot), "' ", x.dims()));
  out->Resize(Permuted(x.dims(), perm));
  Transpose<T>(x.data<T>(), x.dims(), perm, out->mutable_data<T>(ctx.place()));
}

const auto kTranspose = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  RunTranspose<T>(ctx, "X", ctx.Output("Out"), ctx.Attr<std::vector<int32_t>>("axis"));
};

const auto kTransposeGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD"))
    RunTranspose<T>(ctx, "Out@GRAD", dx, Inverse(ctx.Attr<std::vector<int32_t>>("axis")));
};

}  // namespace

FL_REGISTER_OP(transpose2, op) {
  op.Doc("Permutes X's dims: Out.dims[k] = X.dims[axis[k]].")
      .Input("X", "input tensor")
      .Output("Out", "the transposed tensor")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<std::vector<int32_t>>("axis", {}, "a permutation of [0, rank)")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const auto& perm = ctx.Attr<std::vector<int32_t>>("axis");
        CheckPermutation(perm, x.size(), Str("transpose2: ", ctx.Describe("X")));
        SetOutAndXShape(ctx, x, Permuted(x, perm));
      })
      .CPUKernel<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>(kTranspose)
      .SetGradMaker(XShapeGradMaker);
}

FL_REGISTER_OP(transpose2_grad, op) {
  op.Doc("Gradient of transpose2: X@GRAD = Out@GRAD permuted by the inverse of `axis`.");
  XShapeGradOp(op, "transpose2")
      .Attr<std::vector<int32_t>>("axis", {}, "as in transpose2")
      .CPUKernel<float, double, int32_t, int64_t>(kTransposeGrad);
}

}  // namespace fl
