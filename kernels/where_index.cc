// where_index: the coordinates of the true (non-zero) entries of Condition, int64 [N, rank], in memory order
// (numpy's argwhere). N is known only at run time. layers.where builds it; gather_nd over its output is the
// masked_select idiom of Fluid 1.x.
#include <vector>

#include "op_context.h"

namespace fl {

FL_REGISTER_OP(where_index, op) {
  op.Doc("Out = the coordinates of the non-zero entries of Condition, int64 [N, rank(Condition)], in memory order.")
      .Input("Condition", "bool (or int / float: non-zero is true) tensor")
      .Output("Out", "int64 [N, rank(Condition)]")
      .NoGradient()
      .KernelDTypeFrom("Condition")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim c = ctx.InputDim("Condition");
        FL_ENFORCE(c.size() >= 1, "where_index: ", ctx.Describe("Condition"), " must have rank >= 1");
        if (ctx.IsRuntime()) return;  // the kernel sizes Out
        ctx.SetOutput("Out", DDim{-1, static_cast<int64_t>(c.size())}, DType::INT64);
      })
      .CPUKernel<bool, int32_t, int64_t, float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& ct = ctx.Input("Condition");
        const DDim d = ct.dims();
        const int r = d.size();
        const T* c = ct.data<T>();
        const int64_t n = ct.numel();
        int64_t count = 0;
        for (int64_t i = 0; i < n; ++i) count += c[i] != T(0);
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{count, static_cast<int64_t>(r)});
        int64_t* p = out->mutable_data<int64_t>(ctx.place());
        std::vector<int64_t> pos(r, 0);
        for (int64_t i = 0; i < n; ++i) {
          if (c[i] != T(0)) {
            for (int j = 0; j < r; ++j) *p++ = pos[j];
          }
          for (int j = r - 1; j >= 0; --j) {
            if (++pos[j] < d[j]) break;
            pos[j] = 0;
          }
        }
      });
}

}  // namespace fl
