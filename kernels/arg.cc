// arg_max / arg_min: the position of the largest / smallest entry along `axis` (the first one on ties; NaN
// counts as both the largest and the smallest, as in numpy), int64 or int32 (attr dtype). argsort: X sorted
// along `axis` (ascending, or descending) with the int64 positions the entries came from; equal entries keep
// their order (a stable sort) and NaN sorts as larger than any number. argsort's gradient routes Out@GRAD back
// through Indices; arg_max / arg_min have none (their outputs are integers).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "helpers/reduce.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// The output index dtype of arg_max / arg_min: attr dtype -1 (unset) or INT64 -> int64, INT32 -> int32.
DType ArgIndexDType(int32_t dtype) { return dtype == static_cast<int32_t>(DType::INT32) ? DType::INT32 : DType::INT64; }

void ArgMinMaxInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const int64_t axis_attr = ctx.Attr<int64_t>("axis");
  const int32_t dt = ctx.Attr<int32_t>("dtype");
  FL_ENFORCE(dt == -1 || dt == static_cast<int32_t>(DType::INT32) || dt == static_cast<int32_t>(DType::INT64),
             ctx.Type(), ": attribute dtype must be int32 (2) or int64 (3) or -1 (int64), got ", dt);
  FL_ENFORCE(x.size() >= 1, ctx.Type(), ": ", ctx.Describe("X"), " must have rank >= 1");
  DDim out;
  if (ctx.Attr<bool>("flatten")) {
    out.push_back(1);
  } else {
    const int axis = NormalizeAxis(ctx, "X", static_cast<int>(axis_attr));
    for (int i = 0; i < x.size(); ++i) {
      if (i != axis) out.push_back(x[i]);
      else if (ctx.Attr<bool>("keepdims")) out.push_back(1);
    }
    if (out.size() == 0) out.push_back(1);
  }
  ctx.SetOutput("Out", out, ArgIndexDType(dt));
}

template <bool kMax>
struct ArgKernel {
  template <typename Tag>
  void operator()(const ExecutionContext& ctx, Tag) const {
    using T = typename Tag::type;
    const Tensor& xt = ctx.Input("X");
    AxisView v{1, xt.numel(), 1};
    if (!ctx.Attr<bool>("flatten")) v = ViewAroundAxis(xt.dims(), static_cast<int>(ctx.Attr<int64_t>("axis")));
    FL_ENFORCE(v.axis > 0, ctx.Type(), ": X '", ctx.InputName("X"), "' ", xt.dims(), " is empty along the axis");
    const T* x = xt.data<T>();
    std::vector<int64_t> best(v.outer * v.inner);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        const T* p = x + o * v.axis * v.inner + i;
        int64_t b = 0;
        if (!IsNan(p[0]))
          for (int64_t a = 1; a < v.axis; ++a) {
            const T c = p[a * v.inner];
            if (IsNan(c)) {
              b = a;
              break;
            }
            if (kMax ? c > p[b * v.inner] : c < p[b * v.inner]) b = a;
          }
        best[o * v.inner + i] = b;
      }
    Tensor* out = ctx.Output("Out");
    if (ArgIndexDType(ctx.Attr<int32_t>("dtype")) == DType::INT32) {
      int32_t* d = out->mutable_data<int32_t>(ctx.place());
      for (size_t j = 0; j < best.size(); ++j) d[j] = static_cast<int32_t>(best[j]);
    } else {
      std::copy(best.begin(), best.end(), out->mutable_data<int64_t>(ctx.place()));
    }
  }
};

void DeclareArgMinMax(OpBuilder& op, const char* what) {
  op.Doc(Str("Out = the index of the ", what, " entry of X along axis (the first on ties; NaN wins)."))
      .Input("X", "input tensor")
      .Output("Out", "indices: X's dims without axis (kept as 1 with keepdims; [1] with flatten)")
      .Attr<int64_t>("axis", 0, "the axis to search; negative counts from the end")
      .Axis()
      .Attr<bool>("keepdims", false, "keep the searched axis as size 1")
      .Attr<bool>("flatten", false, "search all of X as one vector (Out is [1])")
      .Attr<int32_t>("dtype", -1, "index dtype: int32 (2) or int64 (3); -1 means int64")
      .NoGradient()
      .KernelDTypeFrom("X")
      .SetInferShape(ArgMinMaxInferShape);
}

}  // namespace

FL_REGISTER_OP(arg_max, op) {
  DeclareArgMinMax(op, "largest");
  op.CPUKernel<float, double, int32_t, int64_t>(ArgKernel<true>{});
}

FL_REGISTER_OP(arg_min, op) {
  DeclareArgMinMax(op, "smallest");
  op.CPUKernel<float, double, int32_t, int64_t>(ArgKernel<false>{});
}

FL_REGISTER_OP(argsort, op) {
  op.Doc("Out = X sorted along axis (stable; NaN after every number), Indices = where each entry of Out was in X.")
      .Input("X", "input tensor")
      .Output("Out", "X sorted along axis")
      .Output("Indices", "int64 positions along axis, X's shape")
      .Attr<int32_t>("axis", -1, "the axis to sort along; negative counts from the end")
      .Axis()
      .Attr<bool>("descending", false, "sort largest first (equal entries still keep their order)")
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        NormalizeAxis(ctx, "X", ctx.Attr<int32_t>("axis"));
        const DDim x = ctx.InputDim("X");
        ctx.SetOutput("Out", x, ctx.InputDType("X"));
        ctx.SetOutput("Indices", x, DType::INT64);
        ctx.ShareLoD("X", "Out");
        ctx.ShareLoD("X", "Indices");
      })
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const AxisView v = ViewAroundAxis(xt.dims(), ctx.Attr<int32_t>("axis"));
        const bool desc = ctx.Attr<bool>("descending");
        const T* x = xt.data<T>();
        T* out = ctx.Alloc<T>("Out");
        int64_t* idx = ctx.Alloc<int64_t>("Indices");
        std::vector<int64_t> order(v.axis);
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t i = 0; i < v.inner; ++i) {
            const int64_t base = o * v.axis * v.inner + i;
            const T* p = x + base;
            const int64_t s = v.inner;
            // a before b: ascending puts NaN last, descending first (it is the largest).
            auto less = [p, s](int64_t a, int64_t b) {
              const T pa = p[a * s], pb = p[b * s];
              if (IsNan(pa) || IsNan(pb)) return !IsNan(pa) && IsNan(pb);
              return pa < pb;
            };
            std::iota(order.begin(), order.end(), int64_t{0});
            if (desc) std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return less(b, a); });
            else std::stable_sort(order.begin(), order.end(), less);
            for (int64_t a = 0; a < v.axis; ++a) {
              out[base + a * s] = p[order[a] * s];
              idx[base + a * s] = order[a];
            }
          }
      });
  op.GradOp({"X", "Indices", "Out@GRAD"})
      .Doc("Gradient of argsort: X@GRAD[.., Indices[.., j, ..], ..] = Out@GRAD[.., j, ..] along axis.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const Tensor& it = ctx.Input("Indices");
        const Tensor& gt = ctx.Input("Out@GRAD");
        FL_ENFORCE(it.dims() == xt.dims() && gt.dims() == xt.dims(), "argsort_grad: Indices '",
                   ctx.InputName("Indices"), "' ", it.dims(), " and Out@GRAD '", ctx.InputName("Out@GRAD"), "' ",
                   gt.dims(), " must match X ", xt.dims());
        const AxisView v = ViewAroundAxis(xt.dims(), ctx.Attr<int32_t>("axis"));
        T* dx = ZeroedOutput<T>(dxt, xt.dims(), ctx.place());
        const int64_t* idx = it.data<int64_t>();
        const T* g = gt.data<T>();
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t i = 0; i < v.inner; ++i) {
            const int64_t base = o * v.axis * v.inner + i;
            for (int64_t a = 0; a < v.axis; ++a) {
              const int64_t j = idx[base + a * v.inner];
              FL_ENFORCE(j >= 0 && j < v.axis, "argsort_grad: Indices '", ctx.InputName("Indices"), "' has value ", j,
                         ", out of range [0, ", v.axis, ")");
              dx[base + j * v.inner] += g[base + a * v.inner];
            }
          }
      });
}

}  // namespace fl
