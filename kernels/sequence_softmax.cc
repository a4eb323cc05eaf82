// sequence_softmax: softmax over the time steps of each sequence (the last LoD level) of a one-value-per-step X,
// [N] or [N, 1]: Out[b:e] = exp(X[b:e] - max) / sum(exp(X[b:e] - max)). Fluid's CPU kernel skips the max and
// overflows past exp(88) in float32; this one subtracts it (same values wherever Fluid's are finite).
#include <algorithm>

#include "helpers/lod.h"
#include "helpers/vec_exp.h"

namespace fl {

namespace {

void CheckOneValuePerStep(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() == 1 || (x.size() == 2 && (x[1] == 1 || x[1] < 0)), ctx.Type(), ": ", ctx.Describe("X"),
             " must be [N] or [N, 1]: one value per time step");
}

// Rows per thread slice are cheap (an exp, a few flops): split only long batches.
constexpr int64_t kSoftmaxRowCost = 8;

}  // namespace

FL_REGISTER_OP(sequence_softmax, op) {
  op.Doc(
        "Softmax over the time steps of each sequence (last LoD level) of X [N] or [N, 1]; Out has X's shape and "
        "LoD.")
      .Input("X", "LoDTensor [N] or [N, 1], one value per time step")
      .Output("Out", "the softmax of each sequence, X's shape and LoD")
      .Attr<bool>("use_cudnn", false, "accepted for Fluid compatibility; the CPU kernel ignores it")
      .Attr("data_format", "AnyLayout", "accepted for Fluid compatibility (one value per step has no layout)")
      .OneOf({"AnyLayout", "NCHW", "NHWC"})
      .SetInferShape([](InferShapeContext& ctx) {
        CheckOneValuePerStep(ctx);
        SameShapeAsInput(ctx);
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
        const T* x = ctx.Input("X").data<T>();
        T* out = ctx.Alloc<T>("Out");
        ParallelForEachSequence(offsets, kSoftmaxRowCost, [&](int64_t, int64_t b, int64_t e) {
          if (b == e) return;
          const T m = *std::max_element(x + b, x + e);
          T sum = 0;
          for (int64_t i = b; i < e; ++i) {
            out[i] = VecExp(x[i] - m);
            sum += out[i];
          }
          const T inv = T(1) / sum;  // sum >= 1: the max contributes exp(0)
          for (int64_t i = b; i < e; ++i) out[i] *= inv;
        });
      });
  // Fluid's grad op reads X (for its LoD and shape), Out and Out@GRAD.
  op.GradOp({"X", "Out", "Out@GRAD"})
      .Doc("X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out)), the sum over each sequence.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
        const Tensor& out = ctx.Input("Out");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(out.numel() == static_cast<int64_t>(offsets.back()) && dout.dims() == out.dims(), ctx.Type(),
                   ": Out '", ctx.InputName("Out"), "' ", out.dims(), " and Out@GRAD '", ctx.InputName("Out@GRAD"),
                   "' ", dout.dims(), " must both hold one value per row of X '", ctx.InputName("X"), "' ",
                   ctx.Input("X").dims());
        const T* y = out.data<T>();
        const T* dy = dout.data<T>();
        T* dx = dxt->mutable_data<T>(ctx.place());
        ParallelForEachSequence(offsets, kSoftmaxRowCost, [&](int64_t, int64_t b, int64_t e) {
          T dot = 0;
          for (int64_t i = b; i < e; ++i) dot += y[i] * dy[i];
          for (int64_t i = b; i < e; ++i) dx[i] = y[i] * (dy[i] - dot);
        });
      });
}

}  // namespace fl
