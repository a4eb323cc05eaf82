// sampling_id (Fluid 1.8 sampling_id_op): one id per row of X drawn from the row taken as a distribution over
// its columns: r uniform in [min, max), then the first column j where r - X[0] - ... - X[j] < 0 (the last column
// when the row sums to no more than r). SampleEmbeddingHelper samples its next tokens with it. The engine follows
// the `seed` rule of the other random ops (helpers/random.h).
#include "helpers/random.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(sampling_id, op) {
  op.Doc("Out[i] = an id drawn from row i of X (probabilities over X's columns), as Fluid's sampling_id.")
      .Input("X", "[batch, classes] probabilities per row (softmax output)")
      .Output("Out", "int64 [batch]: the sampled column of each row")
      .Attr<float>("min", 0.0f, "lower bound of the uniform draw")
      .Attr<float>("max", 1.0f, "upper bound of the uniform draw (exclusive)")
      .Attr<int32_t>("seed", 0, "random seed; 0 draws from a process-wide engine seeded by std::random_device")
      .NoGradient()
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 2, ctx.Type(), ": ", ctx.Describe("X"), " must be 2-D [batch, classes]");
        FL_ENFORCE(ctx.Attr<float>("min") < ctx.Attr<float>("max"), ctx.Type(), ": min ", ctx.Attr<float>("min"),
                   " must be less than max ", ctx.Attr<float>("max"));
        ctx.SetOutput("Out", DDim{x[0]}, DType::INT64);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const int64_t rows = x.dims()[0], width = x.dims()[1];
        FL_ENFORCE(width > 0 || rows == 0, ctx.Type(), ": X '", ctx.InputName("X"), "' ", x.dims(),
                   " has no columns to sample from");
        const T* p = x.data<T>();
        int64_t* out = ctx.Alloc<int64_t>("Out");
        const T lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
        WithRandomEngine(ctx.Attr<int32_t>("seed"), [&](std::mt19937& e) {
          for (int64_t i = 0; i < rows; ++i) {
            T r = lo + Uniform01<T>(e) * (hi - lo);
            const T* row = p + i * width;
            int64_t id = width - 1;
            for (int64_t j = 0; j < width; ++j) {
              if ((r -= row[j]) < T(0)) {
                id = j;
                break;
              }
            }
            out[i] = id;
          }
        });
      });
}

}  // namespace fl
