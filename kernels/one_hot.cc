// one_hot (layers.one_hot): Out = X's dims with the trailing 1 replaced by depth; one_hot_v2
// (fluid.one_hot, Fluid 1.6+): Out = X's dims + [depth]. Out[..., v] = 1 for each id v, 0 elsewhere, in the
// dtype of attr dtype (float32 by default). An id outside [0, depth) is an error naming the op, the value and
// depth unless allow_out_of_range, which gives an all-zero row. As in Fluid, an optional 1-element int tensor
// depth_tensor overrides attr depth at run time (Out's last dim is then unknown at build time and the kernel
// sizes Out). No gradient: the ids are integers. One definition serves both ops.
#include <cstring>

#include "helpers/int_scalar_input.h"
#include "op_context.h"

namespace fl {

namespace {

DDim OneHotDims(const DDim& x, int64_t depth, bool v2) {
  DDim out(x.data(), v2 ? x.size() : x.size() - 1);
  out.push_back(depth);
  return out;
}

void OneHotInferShape(InferShapeContext& ctx, bool v2) {
  const std::string& op = ctx.Type();
  const DDim x = ctx.InputDim("X");
  const DType xt = ctx.InputDType("X");
  FL_ENFORCE(xt == DType::INT32 || xt == DType::INT64 || xt == DType::UNDEFINED, op, ": ", ctx.Describe("X"),
             " must be int32 or int64, got ", DTypeName(xt));
  FL_ENFORCE(v2 || (x.size() >= 1 && (x[x.size() - 1] == 1 || x[x.size() - 1] < 0)), op, ": ", ctx.Describe("X"),
             " must have last dim 1 (e.g. [N, 1]); fluid.one_hot (one_hot_v2) takes ids of any shape");
  int64_t depth = ctx.Attr<int32_t>("depth");
  if (ctx.HasInput("depth_tensor")) {
    CheckIntScalarInputDType(ctx, "depth_tensor");
    if (ctx.IsRuntime()) {  // the kernel reads depth_tensor and sizes Out
      ctx.ShareLoD("X", "Out");
      return;
    }
    depth = -1;
  } else {
    FL_ENFORCE(depth >= 1, op, ": depth must be a positive integer, got ", depth, " (for ", ctx.Describe("X"), ")");
  }
  ctx.SetOutput("Out", OneHotDims(x, depth, v2), static_cast<DType>(ctx.Attr<int32_t>("dtype")));
  ctx.ShareLoD("X", "Out");
}

// The depth of this run: depth_tensor's value when it is given, else attr depth.
int64_t RunDepth(const ExecutionContext& ctx) {
  if (!ctx.HasInput("depth_tensor")) return ctx.Attr<int32_t>("depth");
  const int64_t depth = ReadIntScalarInput(ctx, "depth_tensor");
  FL_ENFORCE(depth >= 1, ctx.Type(), ": depth must be a positive integer, got ", depth, " (the value of depth_tensor '",
             ctx.InputName("depth_tensor"), "')");
  return depth;
}

template <bool v2>
void DefineOneHot(OpBuilder& op) {
  op.Doc(v2 ? "Out = one-hot rows of the ids X (any shape): Out.dims = X.dims + [depth]."
            : "Out = one-hot rows of the ids X [.., 1]: Out.dims = X.dims with the trailing 1 replaced by depth.")
      .Input("X", v2 ? "int32/int64 ids of any shape" : "int32/int64 ids, last dim 1")
      .DispensableInput("depth_tensor", "1-element int32/int64 tensor: depth at run time, overriding attr depth")
      .Output("Out", v2 ? "X.dims + [depth]" : "X.dims with the trailing 1 replaced by depth")
      .Attr<int32_t>("depth", -1, "length of each one-hot row (required unless depth_tensor is given)")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "dtype of Out (VarType value)")
      .DTypeValue()
      .Attr<bool>("allow_out_of_range", false, "ids outside [0, depth) give all-zero rows instead of an error")
      .KernelDTypeFrom("X")
      .NoGradient()
      .SetInferShape([](InferShapeContext& ctx) { OneHotInferShape(ctx, v2); })
      .template CPUKernel<int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const int64_t depth = RunDepth(ctx);
        FL_ENFORCE(v2 || (x.rank() >= 1 && x.dims()[x.rank() - 1] == 1), ctx.Type(), ": X '", ctx.InputName("X"), "' ",
                   x.dims(), " must have last dim 1");
        Tensor* out = ctx.Output("Out");
        out->Resize(OneHotDims(x.dims(), depth, v2));
        const T* ids = x.data<T>();
        const int64_t n = x.numel();
        const bool allow = ctx.Attr<bool>("allow_out_of_range");
        for (int64_t i = 0; i < n; ++i)
          FL_ENFORCE(allow || (ids[i] >= 0 && ids[i] < depth), ctx.Type(), ": X '", ctx.InputName("X"), "' holds ",
                     static_cast<int64_t>(ids[i]), " at flat index ", i, ", outside [0, depth=", depth,
                     ") (allow_out_of_range=True gives an all-zero row instead)");
        VisitDType(static_cast<DType>(ctx.Attr<int32_t>("dtype")), [&](auto out_tag) {
          using O = typename decltype(out_tag)::type;
          O* o = out->mutable_data<O>(ctx.place());
          std::memset(static_cast<void*>(o), 0, static_cast<size_t>(n * depth) * sizeof(O));
          for (int64_t i = 0; i < n; ++i)
            if (ids[i] >= 0 && ids[i] < depth) o[i * depth + ids[i]] = static_cast<O>(1);
        });
      });
}

}  // namespace

FL_REGISTER_OP(one_hot, op) { DefineOneHot<false>(op); }

FL_REGISTER_OP(one_hot_v2, op) { DefineOneHot<true>(op); }

}  // namespace fl
