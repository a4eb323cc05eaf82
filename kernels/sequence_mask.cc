// sequence_mask: Y[..., j] = (j < X[...]) as out_dtype, Y = X.dims + [maxlen]; maxlen from the MaxLenTensor input,
// else the maxlen attribute, else (-1) max(X). No gradient: Y is a step function of X.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "helpers/int_scalar_input.h"
#include "op_context.h"

namespace fl {

namespace {

// The mask width: MaxLenTensor's value (> 0), else the attribute when > 0, else the largest value of X (at least
// 0: lengths below 0 mask nothing).
template <typename T>
int64_t MaskWidth(const ExecutionContext& ctx, const T* x, int64_t n) {
  int64_t maxlen = ctx.Attr<int32_t>("maxlen");
  if (ctx.HasInput("MaxLenTensor")) {
    maxlen = ReadIntScalarInput(ctx, "MaxLenTensor");
    FL_ENFORCE(maxlen > 0, ctx.Type(), ": MaxLenTensor '", ctx.InputName("MaxLenTensor"), "' holds ", maxlen,
               "; the mask width must be > 0");
  }
  if (maxlen > 0) return maxlen;
  const T largest = n ? *std::max_element(x, x + n) : T(0);
  FL_ENFORCE(static_cast<double>(largest) <= std::numeric_limits<int32_t>::max(), ctx.Type(), ": the largest value ",
             static_cast<double>(largest), " of X '", ctx.InputName("X"), "' is not a valid mask width (maxlen = -1 ",
             "takes max(X)); give maxlen");
  return std::max<int64_t>(0, static_cast<int64_t>(largest));
}

}  // namespace

FL_REGISTER_OP(sequence_mask, op) {
  op.Doc(
        "Y[i..., j] = j < X[i...] (1 or 0 as out_dtype), Y = X.dims + [maxlen]; maxlen = MaxLenTensor's value, "
        "else the maxlen attribute, else max(X).")
      .Input("X", "the lengths: int32, int64, float32 or float64")
      .DispensableInput("MaxLenTensor", "int32 (or int64) 1-element tensor: the mask width, before the attribute")
      .Output("Y", "the mask, X.dims + [maxlen], of out_dtype")
      .Attr<int32_t>("maxlen", -1, "the mask width; < 0: max(X)")
      .Constrain("< 0 or >= 1",
                 [](const Attribute& v) -> std::string {
                   const int32_t m = std::get<int32_t>(v);
                   return m < 0 || m >= 1 ? "" : "must be < 0 (max(X)) or >= 1";
                 })
      .RequiredAttr<int32_t>("out_dtype", static_cast<int32_t>(DType::INT64), "dtype of Y (VarType value)")
      .DTypeValue()
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) {
        const DType out = static_cast<DType>(ctx.Attr<int32_t>("out_dtype"));
        FL_ENFORCE(IsPlainDType(out), ctx.Type(), ": out_dtype ", DTypeName(out), " (", static_cast<int>(out),
                   ") of Y '", ctx.OutputName("Y"), "' is not supported");
        if (ctx.HasInput("MaxLenTensor")) CheckIntScalarInputDType(ctx, "MaxLenTensor");
        const int32_t maxlen = ctx.Attr<int32_t>("maxlen");
        if (ctx.IsRuntime() && (ctx.HasInput("MaxLenTensor") || maxlen < 0)) return;  // the kernel sets the width
        DDim dims = ctx.InputDim("X");
        dims.push_back(ctx.HasInput("MaxLenTensor") || maxlen < 0 ? -1 : maxlen);
        ctx.SetOutput("Y", dims, out);
      })
      .KernelDTypeFrom("X")
      .CPUKernel<int32_t, int64_t, float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const T* xp = x.data<T>();
        const int64_t n = x.numel(), width = MaskWidth(ctx, xp, n);
        Tensor* y = ctx.Output("Y");
        DDim dims = x.dims();
        dims.push_back(width);
        y->Resize(dims);
        y->set_lod({});
        VisitDType(static_cast<DType>(ctx.Attr<int32_t>("out_dtype")), [&](auto out_tag) {
          using O = typename decltype(out_tag)::type;
          O* yp = y->mutable_data<O>(ctx.place());
          for (int64_t i = 0; i < n; ++i) {
            // Y[i, j] = j < X[i]: a prefix of ones, then zeros.
            const double v = static_cast<double>(xp[i]);
            const int64_t ones = !(v > 0)                          ? 0
                                 : v >= static_cast<double>(width) ? width
                                                                   : static_cast<int64_t>(std::ceil(v));
            O* row = yp + i * width;
            for (int64_t j = 0; j < width; ++j) row[j] = j < ones ? O(1) : O(0);
          }
        });
      });
}

}  // namespace fl
