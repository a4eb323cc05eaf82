// Whole-tensor predicates with one bool result, Out of shape [1], as in Fluid 1.8: isfinite (every element of
// every X is finite), isinf (some element is +-inf: layers.has_inf), isnan (some element is NaN:
// layers.has_nan) and is_empty (X has no elements). Integer inputs are always finite. No gradient.
#include <cmath>
#include <type_traits>

#include "op_context.h"

namespace fl {

namespace {

void InferOneBool(InferShapeContext& ctx) {
  FL_ENFORCE(ctx.InputSize("X") > 0, ctx.Type(), ": input X is empty (Out '", ctx.OutputName("Out"), "')");
  ctx.SetOutput("Out", DDim{1}, DType::BOOL);
}

// Out = combine over the elements of every X of pred(element); `any` picks OR (else AND).
template <typename Pred>
void Predicate(const ExecutionContext& ctx, bool any) {
  bool result = !any;
  for (const Tensor* t : ctx.MultiInput("X")) {
    if (!t || !t->IsInitialized() || t->numel() == 0) continue;
    VisitDType(t->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = t->data<T>();
      const int64_t n = t->numel();
      for (int64_t i = 0; i < n && result == !any; ++i)
        if (Pred{}(p[i]) == any) result = any;
    });
    if (result == any) break;
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{1});
  *out->mutable_data<bool>(ctx.place()) = result;
}

struct Finite {
  template <typename T> bool operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) return std::isfinite(v);
    else return true;
  }
};
struct Inf {
  template <typename T> bool operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) return std::isinf(v);
    else return false;
  }
};
struct NaN {
  template <typename T> bool operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
    else return false;
  }
};

template <typename Pred>
void RegisterPredicate(OpBuilder& op, const char* doc, bool any) {
  op.Doc(doc)
      .DuplicableInput("X", "the tensors to inspect")
      .Output("Out", "bool, shape [1]")
      .NoGradient()
      .SetInferShape(InferOneBool);
  op.CPUKernel<float, double, int32_t, int64_t>(
      [any](const ExecutionContext& ctx, auto) { Predicate<Pred>(ctx, any); });
}

}  // namespace

FL_REGISTER_OP(isfinite, op) {
  RegisterPredicate<Finite>(op, "Out = true if every element of every X is finite (no inf, no NaN), shape [1].", false);
}
FL_REGISTER_OP(isinf, op) {
  RegisterPredicate<Inf>(op, "Out = true if some element of some X is +inf or -inf, shape [1].", true);
}
FL_REGISTER_OP(isnan, op) {
  RegisterPredicate<NaN>(op, "Out = true if some element of some X is NaN, shape [1].", true);
}

FL_REGISTER_OP(is_empty, op) {
  op.Doc("Out = true if X has no elements, shape [1].")
      .Input("X", "the tensor to inspect")
      .Output("Out", "bool, shape [1]")
      .NoGradient()
      .SetInferShape(InferOneBool)
      .CPUKernelAnyDType([](const ExecutionContext& ctx, auto) {
        Tensor* out = ctx.Output("Out");
        out->Resize(DDim{1});
        *out->mutable_data<bool>(ctx.place()) = ctx.Input("X").numel() == 0;
      });
}

}  // namespace fl
