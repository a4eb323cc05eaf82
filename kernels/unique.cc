// unique: the distinct values of a 1-D X in the order they first appear (Out), and for each entry of X the
// position of its value in Out (Index, int32 or int64 by attr dtype), so Out[Index] == X. Out's length is known
// only at run time. No gradient (Fluid's unique has none).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "op_context.h"

namespace fl {

FL_REGISTER_OP(unique, op) {
  op.Doc("Out = the distinct values of 1-D X in order of first appearance; Index[i] = the position of X[i] in Out.")
      .Input("X", "1-D tensor")
      .Output("Out", "the distinct values, [-1] until run time")
      .Output("Index", "X's shape: Out[Index] == X")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::INT32), "Index's dtype: int32 (2) or int64 (3)")
      .DTypeValue()
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int32_t dt = ctx.Attr<int32_t>("dtype");
        FL_ENFORCE(x.size() == 1, "unique: ", ctx.Describe("X"), " must be 1-D");
        FL_ENFORCE(dt == static_cast<int32_t>(DType::INT32) || dt == static_cast<int32_t>(DType::INT64),
                   "unique: attribute dtype must be int32 (2) or int64 (3), got ", dt);
        ctx.SetOutput("Index", x, static_cast<DType>(dt));
        if (ctx.IsRuntime()) return;  // the kernel sizes Out
        ctx.SetOutput("Out", DDim{-1}, ctx.InputDType("X"));
      })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const int64_t n = xt.numel();
        const T* x = xt.data<T>();
        std::unordered_map<T, int64_t> pos;
        std::vector<T> values;
        std::vector<int64_t> index(n);
        for (int64_t i = 0; i < n; ++i) {
          auto it = pos.emplace(x[i], static_cast<int64_t>(values.size()));
          if (it.second) values.push_back(x[i]);
          index[i] = it.first->second;
        }
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{static_cast<int64_t>(values.size())});
        std::copy(values.begin(), values.end(), out->mutable_data<T>(ctx.place()));
        Tensor* it = ctx.Output("Index");
        it->Resize(xt.dims());
        if (static_cast<DType>(ctx.Attr<int32_t>("dtype")) == DType::INT32) {
          int32_t* p = it->mutable_data<int32_t>(ctx.place());
          for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(index[i]);
        } else {
          std::copy(index.begin(), index.end(), it->mutable_data<int64_t>(ctx.place()));
        }
      });
}

}  // namespace fl
