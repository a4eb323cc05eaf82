// dropout (Fluid 1.x): in training each element is kept with probability 1 - dropout_prob; Mask (X's
// dtype, like Fluid 1.x) is 1 where kept, 0 where dropped.
//   downgrade_in_infer: train Out = X * Mask,             test Out = X * (1 - dropout_prob)
//   upscale_in_train:   train Out = X * Mask / (1 - p),   test Out = X
// Randomness: fix_seed draws from a fresh engine seeded with `seed` (reproducible, also for seed 0);
// otherwise from the process-wide engine of helpers/random.h, so successive runs differ. An element is
// dropped when a raw 32-bit draw is below dropout_prob * 2^32 (one engine call per element).
#include <cstdint>
#include <random>
#include <string>

#include "grad_op_maker.h"
#include "helpers/elementwise_loop.h"
#include "helpers/random.h"
#include "op_builder.h"

namespace fl {

namespace {

bool Upscale(const std::string& impl) { return impl == "upscale_in_train"; }

template <typename T>
void FillMask(std::mt19937& e, T* mask, int64_t n, uint64_t threshold) {
  for (int64_t i = 0; i < n; ++i) mask[i] = static_cast<uint64_t>(e()) < threshold ? T(0) : T(1);
}

void InferDropout(InferShapeContext& ctx) {
  // dropout_prob and dropout_implementation are checked by the registration's rules
  SameShapeAsInput(ctx, "X", "Out");
  if (ctx.HasOutput("Mask")) ctx.SetOutput("Mask", ctx.InputDim("X"), ctx.InputDType("X"));
}

}  // namespace

FL_REGISTER_OP(dropout, op) {
  op.Doc("Out = X with elements zeroed at random (probability dropout_prob), scaled per dropout_implementation.")
      .Input("X", "input tensor")
      .Output("Out", "output, X's shape")
      .DispensableOutput("Mask", "1 where kept, 0 where dropped (X's dtype; training only)")
      .Attr<float>("dropout_prob", 0.5f, "probability of dropping an element")
      .Range(0, 1)
      .Attr<bool>("is_test", false, "inference: no mask, Out = X * (1 - p) (downgrade) or X (upscale)")
      .Attr<bool>("fix_seed", false, "draw from an engine seeded with `seed` on every run (reproducible)")
      .Attr<int32_t>("seed", 0, "the seed used when fix_seed")
      .Attr("dropout_implementation", "downgrade_in_infer", "'downgrade_in_infer' or 'upscale_in_train'")
      .OneOf({"downgrade_in_infer", "upscale_in_train"})
      .SetInferShape(InferDropout)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const float p = ctx.Attr<float>("dropout_prob");
        const bool upscale = Upscale(ctx.Attr<std::string>("dropout_implementation"));
        if (ctx.Attr<bool>("is_test")) {
          const T s = upscale ? T(1) : static_cast<T>(1.0f - p);
          UnaryMap<T>(ctx, [s](T x) { return x * s; });
          return;
        }
        const Tensor& x = ctx.Input("X");
        const int64_t n = x.numel();
        Tensor* mask_t = ctx.OutputOrNull("Mask");
        Tensor scratch;
        if (!mask_t) mask_t = &scratch;
        T* mask = mask_t->mutable_data<T>(x.dims(), ctx.place());
        const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(p) * 4294967296.0);
        if (ctx.Attr<bool>("fix_seed")) {
          std::mt19937 e(static_cast<uint32_t>(ctx.Attr<int32_t>("seed")));
          FillMask(e, mask, n, threshold);
        } else {
          WithRandomEngine(0, [&](std::mt19937& e) { FillMask(e, mask, n, threshold); });
        }
        const T s = upscale ? (p < 1.0f ? static_cast<T>(1.0 / (1.0 - p)) : T(0)) : T(1);
        const T* xp = x.data<T>();
        T* out = ctx.Output("Out")->mutable_data<T>(x.dims(), ctx.place());
        for (int64_t i = 0; i < n; ++i) out[i] = xp[i] * mask[i] * s;
      });
  op.Grad([](GradOpMaker& g) {
    // X@GRAD = Out@GRAD * Mask * s in training, Out@GRAD * s when is_test, with the forward op's scale s.
    const float p = g.Attr<float>("dropout_prob");
    const bool upscale = Upscale(g.Attr<std::string>("dropout_implementation"));
    const bool test = g.Attr<bool>("is_test");
    const float s = test ? (upscale ? 1.0f : 1.0f - p) : (upscale ? (p < 1.0f ? 1.0f / (1.0f - p) : 0.0f) : 1.0f);
    const std::string dx = FirstArg(g.InputGrad("X"));
    std::string in = FirstArg(g.OutputGrad("Out"));
    if (!test) {
      FL_ENFORCE(!g.Output("Mask").empty(), "dropout: the gradient in training needs the Mask output",
                 CreationSuffix(g.Forward()));
      const std::string masked = s == 1.0f ? dx : g.Temp("masked");
      OpDesc& mul = g.NewOp("elementwise_mul", false);
      mul.SetInput("X", {in});
      mul.SetInput("Y", g.Output("Mask"));
      mul.SetOutput("Out", {masked});
      if (s == 1.0f) return;
      in = masked;
    }
    OpDesc& scale = g.NewOp("scale", false);
    scale.SetInput("X", {in});
    scale.SetOutput("Out", {dx});
    scale.SetAttr("scale", s);
  });
}

}  // namespace fl
