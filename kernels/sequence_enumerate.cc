// sequence_enumerate: for int ids X [N, 1] with one LoD level, Out [N, win_size] holds at row t the ids t, t+1, ...,
// t+win_size-1 of t's own sequence, pad_value past the sequence's end. Out keeps X's LoD; no gradient (ids).
#include <algorithm>

#include "helpers/lod.h"

namespace fl {

FL_REGISTER_OP(sequence_enumerate, op) {
  op.Doc("Out[t] = X[t : t + win_size] within t's sequence, pad_value past its end: int ids [N, 1] -> [N, win_size].")
      .Input("X", "int32/int64 ids [N, 1], a LoDTensor with one LoD level")
      .Output("Out", "[N, win_size], X's LoD")
      .RequiredAttr<int32_t>("win_size", 0, "the window length (>= 2)")
      .Min(2)
      .Attr<int32_t>("pad_value", 0, "the id written where a window runs past its sequence's end")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 2 && (x[1] == 1 || x[1] < 0), ctx.Type(), ": ", ctx.Describe("X"),
                   " must be [N, 1] (one id per row)");
        ctx.SetOutput("Out", DDim{x[0], ctx.Attr<int32_t>("win_size")}, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .KernelDTypeFrom("X")
      .CPUKernel<int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const std::vector<size_t>& offsets = SequenceOffsets(ctx, "X");
        FL_ENFORCE(xt.lod().size() == 1, ctx.Type(), ": X '", ctx.InputName("X"), "' ", xt.dims(), " has ",
                   xt.lod().size(), " LoD levels ", xt.LoDString(), "; only one level is supported");
        const int64_t win = ctx.Attr<int32_t>("win_size");
        const T pad = static_cast<T>(ctx.Attr<int32_t>("pad_value"));
        const T* x = xt.data<T>();
        T* out = ctx.Alloc<T>("Out");
        ParallelForEachSequence(offsets, win, [&](int64_t, int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            T* row = out + t * win;
            const int64_t inside = std::min(win, e - t);
            for (int64_t w = 0; w < inside; ++w) row[w] = x[t + w];
            for (int64_t w = inside; w < win; ++w) row[w] = pad;
          }
        });
      })
      .NoGradient();
}

}  // namespace fl
