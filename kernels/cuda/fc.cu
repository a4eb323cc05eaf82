// fc (the inference pass fuse_fc's op) on the GPU: Out = act(flatten(Input, in_num_col_dims) @ W + Bias), one cuBLAS
// GEMM then one elementwise pass for the bias and the activation (kernels/fc.cc does both per block of rows).
#include "../helpers/bias_act.h"
#include "nn_common.cuh"

namespace fl {
namespace {

const auto kFc = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("Input");
  const Tensor& w = ctx.Input("W");
  const Tensor* bias = ctx.InputOrNull("Bias");
  const int n_col = ctx.Attr<int32_t>("in_num_col_dims");
  const int64_t m = x.dims().Product(0, n_col), k = x.dims().Product(n_col, x.dims().size()), n = w.dims()[1];
  const EpilogueAct act = EpilogueActByName(ctx.Attr<std::string>("activation_type"));
  T* out = ctx.Alloc<T>("Out");
  cuda::nn::Gemm<T>(ctx, false, false, m, n, k, T(1), x.data<T>(), w.data<T>(), T(0), out);
  if (bias || act != EpilogueAct::kIdentity)
    cuda::Launch(ctx, m * n, cuda::nn::BiasActResidual<T>, out, bias ? bias->data<T>() : nullptr, n, int64_t(1),
                 static_cast<const T*>(nullptr), int(act), T(6));
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(fc) { ops.Kernel<float, double>(kFc); }

}  // namespace fl
