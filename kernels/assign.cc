// assign: Out = X (a copy, any dtype; a LoDTensorArray is copied entry by entry). assign_value: Out = a constant
// given inline as attributes (what layers.assign(numpy_array) and NumpyArrayInitializer emit).
#include <cstring>

#include "grad_op_maker.h"
#include "helpers/shape_attr.h"
#include "helpers/tensor_array.h"
#include "op_context.h"

namespace fl {

namespace {

bool AssignsArray(const ExecutionContext& ctx) { return ctx.InputVar("X")->IsTensorList(); }

// A LoDTensorArray X (Fluid's assign copies arrays too: while_loop's loop variables): Out becomes a copy of every
// entry, each in a buffer of its own.
void AssignArray(const ExecutionContext& ctx) {
  const TensorList& x = InputArray(ctx, "X");
  TensorList& out = OutputArray(ctx, "Out");
  if (&x == &out) return;
  TensorList copy(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].IsInitialized()) TensorCopy(x[i], ctx.place(), &copy[i]);
    else copy[i].set_lod(x[i].lod());
  }
  out = std::move(copy);
}

}  // namespace

FL_REGISTER_OP(assign, op) {
  op.Doc("Out = X, copied (any dtype; LoD is kept). A LoDTensorArray X is copied entry by entry into the array Out.")
      .Input("X", "tensor (or LoDTensorArray) to copy")
      .Output("Out", "the copy")
      .Inplace("Out", "X")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.IsRuntime() && ctx.InputKind("X") == VarKind::LOD_TENSOR_ARRAY) return;  // the kernel copies
        InferSameShapeAsX(ctx);
      })
      .SetKernelDType([](const ExecutionContext& ctx) {
        if (AssignsArray(ctx)) return DType::FP32;  // any: an array is copied whole, whatever its dtype
        const Tensor* x = ctx.InputOrNull("X");
        FL_ENFORCE(x != nullptr, "op assign has no initialized input tensor to choose a kernel dtype from");
        return x->dtype();
      });
  // TensorCopy goes through MemCopy, so the same kernel copies on the device (a device-to-device copy on its stream).
  const auto copy = [](const ExecutionContext& ctx, auto) {
    if (AssignsArray(ctx)) return AssignArray(ctx);
    TensorCopy(ctx.Input("X"), ctx.place(), ctx.Output("Out"));  // a no-op when Out is X
  };
  op.CPUKernelAnyDType(copy).KernelAnyDType(PlaceKind::CUDA, copy).Grad([](GradOpMaker& g) {
    OpDesc& op = g.NewOp("assign", false);
    op.SetInput("X", g.OutputGrad("Out"));
    op.SetOutput("Out", g.InputGrad("X"));
  });
}

namespace {

// The attribute that carries the values for `dtype` (float64 travels as fp32_values, as in Fluid).
const char* ValuesAttr(DType dtype) {
  switch (dtype) {
    case DType::FP32:
    case DType::FP64: return "fp32_values";
    case DType::INT32: return "int32_values";
    case DType::INT64: return "int64_values";
    case DType::BOOL: return "bool_values";
    default: return nullptr;
  }
}

template <typename V>
size_t ValuesCount(const InferShapeContext& ctx, const char* name) {
  return ctx.Attr<std::vector<V>>(name).size();
}

void InferAssignValue(InferShapeContext& ctx) {
  const DDim dims = DimsFromShapeAttr(ctx.Attr<std::vector<int32_t>>("shape"), "assign_value");
  const DType dtype = static_cast<DType>(ctx.Attr<int32_t>("dtype"));
  const char* attr = ValuesAttr(dtype);
  FL_ENFORCE(attr != nullptr, "assign_value: dtype ", DTypeName(dtype), " of Out '", ctx.OutputName("Out"),
             "' is not supported (float32, float64, int32, int64, bool)");
  size_t count = dtype == DType::INT32   ? ValuesCount<int32_t>(ctx, attr)
                 : dtype == DType::INT64 ? ValuesCount<int64_t>(ctx, attr)
                 : dtype == DType::BOOL  ? ValuesCount<bool>(ctx, attr)
                                         : ValuesCount<float>(ctx, attr);
  FL_ENFORCE(static_cast<int64_t>(count) == dims.numel(), "assign_value: Out '", ctx.OutputName("Out"), "' shape ",
             dims, " has ", dims.numel(), " elements but ", attr, " holds ", count, " values");
  ctx.SetOutput("Out", dims, dtype);
}

// Copies the attribute values (of C++ type V) into an Out of type T.
template <typename T, typename V>
void FillFromValues(const ExecutionContext& ctx, const char* attr) {
  const std::vector<V>& v = ctx.Attr<std::vector<V>>(attr);
  Tensor* out = ctx.Output("Out");
  T* p = out->mutable_data<T>(ctx.place());
  const int64_t n = out->numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(v[i]);
}

}  // namespace

FL_REGISTER_OP(assign_value, op) {
  op.Doc("Out = the constant tensor given by shape, dtype and the matching *_values attribute.")
      .Output("Out", "the constant")
      .Attr<std::vector<int32_t>>("shape", {}, "shape of Out")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out (VarType value)")
      .DTypeValue()
      .Attr<std::vector<float>>("fp32_values", {}, "values for float32 and float64 outputs, row-major")
      .Attr<std::vector<int32_t>>("int32_values", {}, "values for int32 outputs, row-major")
      .Attr<std::vector<int64_t>>("int64_values", {}, "values for int64 outputs, row-major")
      .Attr<std::vector<bool>>("bool_values", {}, "values for bool outputs, row-major")
      .SetInferShape(InferAssignValue)
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, int32_t>) FillFromValues<T, int32_t>(ctx, "int32_values");
        else if constexpr (std::is_same_v<T, int64_t>) FillFromValues<T, int64_t>(ctx, "int64_values");
        else if constexpr (std::is_same_v<T, bool>) FillFromValues<T, bool>(ctx, "bool_values");
        else FillFromValues<T, float>(ctx, "fp32_values");
      });
}

}  // namespace fl
