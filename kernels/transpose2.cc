// transpose2: Out = X with its dims permuted by `axis` (Out.dims[k] = X.dims[axis[k]]); XShape records
// [0] + X.dims (Fluid's convention). The gradient is transpose2 by the inverse permutation.
#include "grad_op_maker.h"
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
  CheckPermutation(perm, static_cast<int>(perm.size()), "transpose2: the gradient of axis");
  std::vector<int32_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[perm[k]] = static_cast<int32_t>(k);
  return inv;
}

const auto kTranspose = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const auto& perm = ctx.Attr<std::vector<int32_t>>("axis");
  CheckPermutation(perm, x.rank(), Str(ctx.Type(), ": X '", ctx.InputName("X"), "' ", x.dims()));
  Tensor* out = ctx.Output("Out");
  out->Resize(Permuted(x.dims(), perm));
  Transpose<T>(x.data<T>(), x.dims(), perm, out->mutable_data<T>(ctx.place()));
};

}  // namespace

FL_REGISTER_OP(transpose2, op) {
  op.Doc("Permutes X's dims: Out.dims[k] = X.dims[axis[k]].")
      .Input("X", "input tensor")
      .Output("Out", "the transposed tensor")
      .DispensableOutput("XShape", "[0] + X.dims, dims only (used by the grad)")
      .Attr<std::vector<int32_t>>("axis", {}, "a permutation of [0, rank)")
      .Size(0, DDim::kMaxRank)
      .Constrain("a permutation of [0, its length)",
                 [](const Attribute& a) -> std::string {
                   const auto& perm = std::get<std::vector<int32_t>>(a);
                   std::vector<bool> seen(perm.size(), false);
                   for (size_t k = 0; k < perm.size(); ++k) {
                     const int32_t p = perm[k];
                     if (p < 0 || static_cast<size_t>(p) >= perm.size() || seen[p])
                       return Str("must be a permutation of [0, ", perm.size(), "): element ", k, " is ", p);
                     seen[p] = true;
                   }
                   return "";
                 })
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const auto& perm = ctx.Attr<std::vector<int32_t>>("axis");
        CheckPermutation(perm, x.size(), Str("transpose2: ", ctx.Describe("X")));
        SetOutAndXShape(ctx, x, Permuted(x, perm));
      })
      .CPUKernelAnyDType(kTranspose)
      .Grad([](GradOpMaker& g) {  // Out@GRAD permuted back by the inverse permutation
        OpDesc& op = g.NewOp("transpose2", false);
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("axis", Inverse(g.Attr<std::vector<int32_t>>("axis")));
      });
}

}  // namespace fl
