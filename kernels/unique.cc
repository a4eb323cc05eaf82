// unique: the distinct values of a 1-D X in the order they first appear (Out), and for each entry of X the
// position of its value in Out (Index, int32 or int64 by attr dtype), so Out[Index] == X. unique_with_counts
// adds Count: how many entries of X each value of Out has (attr dtype too). Out's length is known only at run
// time. No gradient (Fluid's ops have none).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "op_context.h"

namespace fl {

namespace {

// Writes `v` (int64) into `t` as attr dtype's int32 or int64.
void WriteIndices(const ExecutionContext& ctx, const std::vector<int64_t>& v, Tensor* t) {
  if (static_cast<DType>(ctx.Attr<int32_t>("dtype")) == DType::INT32) {
    int32_t* p = t->mutable_data<int32_t>(ctx.place());
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<int32_t>(v[i]);
  } else {
    std::copy(v.begin(), v.end(), t->mutable_data<int64_t>(ctx.place()));
  }
}

void UniqueInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const int32_t dt = ctx.Attr<int32_t>("dtype");
  FL_ENFORCE(x.size() == 1, ctx.Type(), ": ", ctx.Describe("X"), " must be 1-D");
  FL_ENFORCE(dt == static_cast<int32_t>(DType::INT32) || dt == static_cast<int32_t>(DType::INT64), ctx.Type(),
             ": attribute dtype must be int32 (2) or int64 (3), got ", dt);
  ctx.SetOutput("Index", x, static_cast<DType>(dt));
  if (ctx.IsRuntime()) return;  // the kernel sizes Out (and Count)
  ctx.SetOutput("Out", DDim{-1}, ctx.InputDType("X"));
  if (ctx.HasOutput("Count")) ctx.SetOutput("Count", DDim{-1}, static_cast<DType>(dt));
}

const auto kUnique = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& xt = ctx.Input("X");
  const int64_t n = xt.numel();
  const T* x = xt.data<T>();
  std::unordered_map<T, int64_t> pos;
  std::vector<T> values;
  std::vector<int64_t> index(n), count;
  for (int64_t i = 0; i < n; ++i) {
    auto it = pos.emplace(x[i], static_cast<int64_t>(values.size()));
    if (it.second) {
      values.push_back(x[i]);
      count.push_back(0);
    }
    index[i] = it.first->second;
    ++count[index[i]];
  }
  const DDim m{static_cast<int64_t>(values.size())};
  Tensor* out = ctx.Output("Out");
  out->Resize(m);
  std::copy(values.begin(), values.end(), out->mutable_data<T>(ctx.place()));
  Tensor* it = ctx.Output("Index");
  it->Resize(xt.dims());
  WriteIndices(ctx, index, it);
  if (ctx.HasOutput("Count")) {
    Tensor* c = ctx.Output("Count");
    c->Resize(m);
    WriteIndices(ctx, count, c);
  }
};

}  // namespace

FL_REGISTER_OP(unique, op) {
  op.Doc("Out = the distinct values of 1-D X in order of first appearance; Index[i] = the position of X[i] in Out.")
      .Input("X", "1-D tensor")
      .Output("Out", "the distinct values, [-1] until run time")
      .Output("Index", "X's shape: Out[Index] == X")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::INT32), "Index's dtype: int32 (2) or int64 (3)")
      .DTypeValue()
      .KernelDTypeFrom("X")
      .SetInferShape(UniqueInferShape)
      .CPUKernel<float, double, int32_t, int64_t>(kUnique);
}

FL_REGISTER_OP(unique_with_counts, op) {
  op.Doc("unique, and Count[j] = how many entries of X equal Out[j].")
      .Input("X", "1-D tensor")
      .Output("Out", "the distinct values, [-1] until run time")
      .Output("Index", "X's shape: Out[Index] == X")
      .Output("Count", "Out's shape: the number of entries of X per value")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::INT32), "Index's and Count's dtype: int32 (2) or int64 (3)")
      .DTypeValue()
      .KernelDTypeFrom("X")
      .SetInferShape(UniqueInferShape)
      .CPUKernel<float, double, int32_t, int64_t>(kUnique);
}

}  // namespace fl
