// expand: Out = X tiled expand_times[i] times along each dim i (numpy's tile with one count per dim). The counts
// come from attr expand_times, or at run time from the 1-D int32 tensor ExpandTimes, or from the list of 1-element
// int32 tensors expand_times_tensor (Fluid's three ways; the layer picks one). expand_as: the counts are
// target_tensor.dims / X.dims. The gradients sum Out@GRAD over the copies.
#include <algorithm>
#include <cstring>
#include <vector>

#include "op_context.h"

namespace fl {

namespace {

// Calls f(out_row, x_row) for each row (last dim) of the tiled Out, in memory order: the offsets of the row in
// Out (out_dims) and of the X row it copies (x_dims, Out dims[i] = x_dims[i] * times).
template <typename F>
void ForEachTiledRow(const DDim& x_dims, const DDim& out_dims, F f) {
  const int r = x_dims.size();
  const int64_t rows = out_dims.Product(0, r - 1);
  std::vector<int64_t> pos(r, 0), xstride(r, 1);
  for (int j = r - 2; j >= 0; --j) xstride[j] = xstride[j + 1] * x_dims[j + 1];
  const int64_t orow = out_dims[r - 1];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t xoff = 0;
    for (int j = 0; j + 1 < r; ++j) xoff += (pos[j] % x_dims[j]) * xstride[j];
    f(row * orow, xoff);
    for (int j = r - 2; j >= 0; --j) {  // odometer over Out's leading dims
      if (++pos[j] < out_dims[j]) break;
      pos[j] = 0;
    }
  }
}

template <typename T>
void Tile(const Tensor& x, Tensor* out, const Place& place) {
  const DDim xd = x.dims(), od = out->dims();
  const T* src = x.data<T>();
  T* dst = out->mutable_data<T>(place);
  const int64_t xw = xd[xd.size() - 1], ow = od[od.size() - 1];
  if (out->numel() == 0) return;
  ForEachTiledRow(xd, od, [&](int64_t o, int64_t xi) {
    for (int64_t c = 0; c < ow; c += xw) std::memcpy(dst + o + c, src + xi, static_cast<size_t>(xw) * sizeof(T));
  });
}

// dx = Out@GRAD summed over the copies of each X element.
template <typename T>
void Untile(const Tensor& dout, const DDim& xd, Tensor* dx, const Place& place, const std::string& op) {
  const DDim od = dout.dims();
  FL_ENFORCE(od.size() == xd.size(), op, ": Out@GRAD ", od, " must have the rank of X ", xd);
  for (int i = 0; i < xd.size(); ++i)
    FL_ENFORCE(xd[i] > 0 ? od[i] % xd[i] == 0 : od[i] == 0, op, ": Out@GRAD ", od, " is not a tiling of X ", xd);
  dx->Resize(xd);
  T* d = dx->mutable_data<T>(place);
  std::fill(d, d + dx->numel(), T(0));
  if (dout.numel() == 0) return;
  const T* g = dout.data<T>();
  const int64_t xw = xd[xd.size() - 1], ow = od[od.size() - 1];
  ForEachTiledRow(xd, od, [&](int64_t o, int64_t xi) {
    for (int64_t c = 0; c < ow; c += xw)
      for (int64_t k = 0; k < xw; ++k) d[xi + k] += g[o + c + k];
  });
}

void CheckRank(InferShapeContext& ctx, const DDim& x) {
  FL_ENFORCE(x.size() >= 1 && x.size() <= 6, ctx.Type(), ": ", ctx.Describe("X"), " must have rank 1 to 6");
}

// The counts of this run: ExpandTimes's values, else expand_times_tensor's, else attr expand_times.
std::vector<int64_t> ExpandTimes(const ExecutionContext& ctx) {
  const int rank = ctx.Input("X").rank();
  std::vector<int64_t> times;
  auto read = [&](const Tensor& t, const std::string& what) {
    FL_ENFORCE(t.dtype() == DType::INT32 || t.dtype() == DType::INT64, "expand: ", what,
               " must be int32 or int64, got ", DTypeName(t.dtype()));
    for (int64_t i = 0; i < t.numel(); ++i)
      times.push_back(t.dtype() == DType::INT32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]);
  };
  std::string source;
  if (ctx.HasInput("ExpandTimes")) {
    source = Str("ExpandTimes '", ctx.InputName("ExpandTimes"), "'");
    read(ctx.Input("ExpandTimes"), source);
  } else if (ctx.HasInput("expand_times_tensor")) {
    source = "expand_times_tensor";
    for (int i = 0; i < ctx.InputSize("expand_times_tensor"); ++i) {
      const Tensor& t = ctx.Input("expand_times_tensor", i);
      FL_ENFORCE(t.numel() == 1, "expand: expand_times_tensor '", ctx.InputName("expand_times_tensor", i),
                 "' must have 1 element, got ", t.dims());
      read(t, Str("expand_times_tensor '", ctx.InputName("expand_times_tensor", i), "'"));
    }
  } else {
    source = "attribute expand_times";
    for (int v : ctx.Attr<std::vector<int32_t>>("expand_times")) times.push_back(v);
  }
  FL_ENFORCE(static_cast<int>(times.size()) == rank, "expand: ", source, " has ", times.size(), " values, X '",
             ctx.InputName("X"), "' ", ctx.Input("X").dims(), " has rank ", rank);
  for (int64_t t : times)
    FL_ENFORCE(t >= 1, "expand: ", source, " value ", t, " must be >= 1 (for X '", ctx.InputName("X"), "')");
  return times;
}

}  // namespace

FL_REGISTER_OP(expand, op) {
  op.Doc("Out = X tiled expand_times[i] times along each dim i (Out.dims[i] = X.dims[i] * expand_times[i]).")
      .Input("X", "input tensor, rank 1 to 6")
      .DispensableInput("ExpandTimes", "1-D int32 tensor of rank(X) counts, read at run time (overrides the attr)")
      .OptionalDuplicableInput("expand_times_tensor",
                               "rank(X) 1-element int32 tensors, one count each, read at run time (overrides the attr)")
      .Output("Out", "the tiled tensor")
      .Attr<std::vector<int32_t>>("expand_times", {}, "the count per dim (-1: given by expand_times_tensor)")
      .NonDifferentiable({"ExpandTimes", "expand_times_tensor"})
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        CheckRank(ctx, x);
        const auto& attr = ctx.Attr<std::vector<int32_t>>("expand_times");
        DDim out = x;
        if (ctx.HasInput("ExpandTimes")) {
          const DDim t = ctx.InputDim("ExpandTimes");
          FL_ENFORCE(t.size() == 1 && (t[0] < 0 || t[0] == x.size()), "expand: ", ctx.Describe("ExpandTimes"),
                     " must be 1-D with rank(X) = ", x.size(), " values");
          if (ctx.IsRuntime()) return;  // the kernel reads the counts and sizes Out
          for (int i = 0; i < x.size(); ++i) out[i] = -1;
        } else if (ctx.HasInput("expand_times_tensor")) {
          FL_ENFORCE(ctx.InputSize("expand_times_tensor") == x.size(), "expand: expand_times_tensor has ",
                     ctx.InputSize("expand_times_tensor"), " tensors, ", ctx.Describe("X"), " has rank ", x.size());
          if (ctx.IsRuntime()) return;
          for (int i = 0; i < x.size(); ++i)
            out[i] = i < static_cast<int>(attr.size()) && attr[i] > 0 && x[i] >= 0 ? x[i] * attr[i] : -1;
        } else {
          FL_ENFORCE(static_cast<int>(attr.size()) == x.size(), "expand: attribute expand_times has ", attr.size(),
                     " values, ", ctx.Describe("X"), " has rank ", x.size());
          for (int i = 0; i < x.size(); ++i) {
            FL_ENFORCE(attr[i] >= 1, "expand: attribute expand_times value ", attr[i], " (dim ", i,
                       ") must be >= 1 for ", ctx.Describe("X"));
            out[i] = x[i] < 0 ? -1 : x[i] * attr[i];
          }
        }
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
        if (out[0] == x[0]) ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const std::vector<int64_t> times = ExpandTimes(ctx);
        DDim od = x.dims();
        for (int i = 0; i < od.size(); ++i) od[i] *= times[i];
        Tensor* out = ctx.Output("Out");
        out->Resize(od);
        Tile<T>(x, out, ctx.place());
      });
  op.GradOp({"X", "ExpandTimes", "expand_times_tensor", "Out@GRAD"})
      .Optional({"ExpandTimes", "expand_times_tensor"})
      .Doc("Gradient of expand: X@GRAD = Out@GRAD summed over the copies of each element of X.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        Untile<T>(ctx.Input("Out@GRAD"), ctx.Input("X").dims(), dx, ctx.place(), "expand_grad");
      });
}

FL_REGISTER_OP(expand_as, op) {
  op.Doc("Out = X tiled to target_tensor's shape: target_tensor.dims[i] / X.dims[i] copies along each dim i.")
      .Input("X", "input tensor, rank 1 to 6")
      .Input("target_tensor", "the tensor whose shape Out takes (each dim a multiple of X's)")
      .Output("Out", "the tiled tensor, target_tensor's shape")
      .NonDifferentiable({"target_tensor"})
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X"), t = ctx.InputDim("target_tensor");
        CheckRank(ctx, x);
        FL_ENFORCE(t.size() == x.size(), "expand_as: ", ctx.Describe("target_tensor"), " must have the rank of ",
                   ctx.Describe("X"));
        for (int i = 0; i < x.size(); ++i)
          FL_ENFORCE(x[i] < 0 || t[i] < 0 || (x[i] == 0 ? t[i] == 0 : t[i] % x[i] == 0), "expand_as: dim ", i, " of ",
                     ctx.Describe("target_tensor"), " must be a multiple of that of ", ctx.Describe("X"));
        ctx.SetOutput("Out", t, ctx.InputDType("X"));
      })
      .CPUKernel<float, double, int32_t, int64_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* out = ctx.Output("Out");
        out->Resize(ctx.Input("target_tensor").dims());
        Tile<T>(ctx.Input("X"), out, ctx.place());
      });
  op.GradOp({"X", "target_tensor", "Out@GRAD"})
      .Doc("Gradient of expand_as: X@GRAD = Out@GRAD summed over the copies of each element of X.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        Untile<T>(ctx.Input("Out@GRAD"), ctx.Input("X").dims(), dx, ctx.place(), "expand_as_grad");
      });
}

}  // namespace fl
