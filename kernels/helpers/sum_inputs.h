// The dense inputs of `sum` as its CPU and CUDA kernels (kernels/sum.cc, kernels/cuda/elementwise.cu) both read them:
// the non-empty ones' data in order, checked to have the first one's element count and dtype.
#pragma once
#include <vector>

#include "op_context.h"

namespace fl {

template <typename T>
struct SumInputs {
  explicit SumInputs(const ExecutionContext& ctx) {
    const Variable* out_var = ctx.OutputVar("Out");
    const int n = ctx.InputSize("X");
    ptrs.reserve(n);
    int first_i = -1;
    for (int i = 0; i < n; ++i) {
      const Tensor* t = ctx.InputOrNull("X", i);
      if (!t) continue;
      if (t->numel() == 0) {
        empty = t;
        continue;
      }
      if (!first) {
        first = t;
        first_i = i;
      } else {
        FL_ENFORCE(t->numel() == first->numel(), "sum: inputs must have the same number of elements; X[", first_i,
                   "] '", ctx.InputName("X", first_i), "' ", first->dims(), " vs X[", i, "] '", ctx.InputName("X", i),
                   "' ", t->dims());
        FL_ENFORCE(t->dtype() == first->dtype(), "sum: inputs must have the same dtype; X[", first_i, "] '",
                   ctx.InputName("X", first_i), "' is ", DTypeName(first->dtype()), " but X[", i, "] '",
                   ctx.InputName("X", i), "' is ", DTypeName(t->dtype()));
      }
      out_is_input |= ctx.InputVar("X", i) == out_var;
      ptrs.push_back(t->data<T>());
    }
  }
  // No non-empty input (the kernel dtype came from an empty one): Out is empty too. Returns whether that was so.
  bool WriteEmptyOut(const ExecutionContext& ctx, Tensor* out) const {
    if (first) return false;
    FL_ENFORCE(empty != nullptr, "sum: no input of X is initialized");
    out->Resize(empty->dims());
    out->mutable_data<T>(ctx.place());
    return true;
  }

  std::vector<const T*> ptrs;     // the non-empty inputs' data
  const Tensor* first = nullptr;  // the first non-empty input
  const Tensor* empty = nullptr;  // some initialized but empty input
  bool out_is_input = false;      // Out is one of X (in place)
};

}  // namespace fl
