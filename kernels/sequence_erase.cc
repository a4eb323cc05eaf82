// sequence_erase: removes every id listed in `tokens` from int ids X [N, 1] and shrinks the last LoD level to match
// (the upper levels, which count sequences, stay as they are). No gradient (ids).
#include <algorithm>

#include "helpers/lod.h"

namespace fl {

FL_REGISTER_OP(sequence_erase, op) {
  op.Doc("Out = X without the ids in tokens, each sequence shrunk accordingly (the last LoD level rebuilt).")
      .Input("X", "int32/int64 ids [N, 1], a LoDTensor")
      .Output("Out", "the ids kept, [M, 1], with the rebuilt LoD")
      .RequiredAttr("tokens", std::vector<int32_t>{}, "the ids to erase")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 2 && (x[1] == 1 || x[1] < 0), ctx.Type(), ": ", ctx.Describe("X"),
                   " must be [N, 1] (one id per row)");
        // The row count depends on the ids: the kernel sets it (and the LoD) at run time.
        if (!ctx.IsRuntime()) {
          ctx.SetOutput("Out", DDim{-1, 1}, ctx.InputDType("X"));
          ctx.ShareLoD("X", "Out");
        }
      })
      .KernelDTypeFrom("X")
      .CPUKernel<int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const LoD& lod = CheckedLoD(ctx, "X");
        const std::vector<size_t>& offsets = lod.back();
        std::vector<int64_t> tokens(ctx.Attr<std::vector<int32_t>>("tokens").begin(),
                                    ctx.Attr<std::vector<int32_t>>("tokens").end());
        std::sort(tokens.begin(), tokens.end());
        const T* x = xt.data<T>();
        auto erased = [&](T id) { return std::binary_search(tokens.begin(), tokens.end(), static_cast<int64_t>(id)); };
        LoD out_lod = DropLastLevel(lod);
        std::vector<size_t> kept{0};
        kept.reserve(offsets.size());
        ForEachSequence(offsets, [&](int64_t, int64_t b, int64_t e) {
          size_t n = 0;
          for (int64_t i = b; i < e; ++i) n += !erased(x[i]);
          kept.push_back(kept.back() + n);
        });
        Tensor* outt = ctx.Output("Out");
        outt->Resize(DDim{static_cast<int64_t>(kept.back()), 1});
        T* out = outt->mutable_data<T>(ctx.place());
        for (int64_t i = 0, n = xt.dims()[0], j = 0; i < n; ++i)
          if (!erased(x[i])) out[j++] = x[i];
        out_lod.push_back(std::move(kept));
        outt->set_lod(out_lod);
      })
      .NoGradient();
}

}  // namespace fl
