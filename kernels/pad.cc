// Padding ops.
//   pad: X padded with pad_value by paddings [before_0, after_0, before_1, after_1, ...] (one pair per axis).
//   pad2d: NCHW images padded by [top, bottom, left, right] (the attribute, or the int32 Paddings input) in
//     mode constant (pad_value), reflect (mirrored without repeating the edge) or edge (the edge repeated).
//   pad_constant_like: Y padded at the end of every axis with pad_value up to X's shape.
// Gradients: the padded region is dropped (reflect and edge add each mirrored/repeated position back).
#include <algorithm>
#include <string>
#include <vector>

#include "helpers/box.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

template <typename T>
void FillValue(Tensor* t, const Place& place, T value) {
  T* p = t->mutable_data<T>(place);
  std::fill(p, p + t->numel(), value);
}

std::vector<int64_t> PadOffsets(const std::vector<int32_t>& paddings, int rank) {
  std::vector<int64_t> off(rank);
  for (int i = 0; i < rank; ++i) off[i] = paddings[2 * i];
  return off;
}

// ---- pad2d

struct Pad2dArgs {
  int64_t top, bottom, left, right;
  std::string mode;
};

// Paddings from the Paddings input (run time; int32 [4]) or the attribute.
Pad2dArgs ReadPad2d(const ExecutionContext& ctx) {
  Pad2dArgs a;
  a.mode = ctx.Attr<std::string>("mode");
  std::vector<int64_t> p;
  if (ctx.HasInput("Paddings")) {
    const Tensor& t = ctx.Input("Paddings");
    FL_ENFORCE(t.dtype() == DType::INT32 && t.numel() == 4, "pad2d: Paddings '", ctx.InputName("Paddings"),
               "' must be an int32 tensor of 4 values [top, bottom, left, right], got ", DTypeName(t.dtype()), " ",
               t.dims());
    const int32_t* d = t.data<int32_t>();
    p.assign(d, d + 4);
    for (int i = 0; i < 4; ++i)
      FL_ENFORCE(p[i] >= 0, "pad2d: Paddings '", ctx.InputName("Paddings"), "' holds ", p[i], " at ", i,
                 "; paddings must be >= 0");
  } else {
    const auto& attr = ctx.Attr<std::vector<int32_t>>("paddings");
    p.assign(attr.begin(), attr.end());
  }
  a.top = p[0];
  a.bottom = p[1];
  a.left = p[2];
  a.right = p[3];
  return a;
}

void CheckPad2dFits(const std::string& mode, int64_t h, int64_t w, const Pad2dArgs& a, const std::string& what) {
  if (mode == "reflect") {
    FL_ENFORCE(h < 0 || (a.top < h && a.bottom < h), "pad2d: reflect padding top ", a.top, " / bottom ", a.bottom,
               " must be less than the height ", h, " of ", what);
    FL_ENFORCE(w < 0 || (a.left < w && a.right < w), "pad2d: reflect padding left ", a.left, " / right ", a.right,
               " must be less than the width ", w, " of ", what);
  } else if (mode == "edge") {
    FL_ENFORCE((h != 0 && w != 0), "pad2d: edge padding needs a non-empty image, got ", what);
  }
}

// Source index along one axis of output position o (in [0, size + before + after)), or -1 (constant pad).
inline int64_t SourceIndex(int64_t o, int64_t before, int64_t size, int mode) {
  int64_t i = o - before;
  if (i >= 0 && i < size) return i;
  if (mode == 0) return -1;
  if (mode == 1) return i < 0 ? -i : 2 * (size - 1) - i;  // reflect
  return i < 0 ? 0 : size - 1;                            // edge
}

int ModeCode(const std::string& m) { return m == "constant" ? 0 : (m == "reflect" ? 1 : 2); }

template <typename T>
void Pad2dForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Pad2dArgs a = ReadPad2d(ctx);
  const DDim& d = x.dims();
  CheckPad2dFits(a.mode, d[2], d[3], a, "X '" + ctx.InputName("X") + "' " + d.ToString());
  const int64_t h = d[2], w = d[3], oh = h + a.top + a.bottom, ow = w + a.left + a.right;
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{d[0], d[1], oh, ow});
  T* o = out->mutable_data<T>(ctx.place());
  const T* in = x.data<T>();
  const int mode = ModeCode(a.mode);
  const T value = static_cast<T>(ctx.Attr<float>("pad_value"));
  ParallelFor(d[0] * d[1], 16, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* src = in + plane * h * w;
      T* dst = o + plane * oh * ow;
      for (int64_t r = 0; r < oh; ++r) {
        const int64_t sr = SourceIndex(r, a.top, h, mode);
        for (int64_t c = 0; c < ow; ++c) {
          const int64_t sc = SourceIndex(c, a.left, w, mode);
          dst[r * ow + c] = (sr < 0 || sc < 0) ? value : src[sr * w + sc];
        }
      }
    }
  });
}

template <typename T>
void Pad2dBackward(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const Pad2dArgs a = ReadPad2d(ctx);
  const DDim& d = x.dims();
  const int64_t h = d[2], w = d[3], oh = h + a.top + a.bottom, ow = w + a.left + a.right;
  FL_ENFORCE(dout.dims() == (DDim{d[0], d[1], oh, ow}), "pad2d_grad: Out@GRAD ", dout.dims(),
             " does not match the padded shape of X ", d);
  dx->Resize(d);
  T* g = dx->mutable_data<T>(ctx.place());
  const T* go = dout.data<T>();
  const int mode = ModeCode(a.mode);
  ParallelFor(d[0] * d[1], 16, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      T* dst = g + plane * h * w;
      const T* src = go + plane * oh * ow;
      std::fill(dst, dst + h * w, T(0));
      for (int64_t r = 0; r < oh; ++r) {
        const int64_t sr = SourceIndex(r, a.top, h, mode);
        if (sr < 0) continue;
        for (int64_t c = 0; c < ow; ++c) {
          const int64_t sc = SourceIndex(c, a.left, w, mode);
          if (sc >= 0) dst[sr * w + sc] += src[r * ow + c];
        }
      }
    }
  });
}

}  // namespace

FL_REGISTER_OP(pad, op) {
  op.Doc("Out = X padded with pad_value: paddings [before_0, after_0, before_1, after_1, ...], one pair per axis.")
      .Input("X", "the input tensor")
      .Output("Out", "the padded tensor: dims[i] + before_i + after_i")
      .Attr<std::vector<int32_t>>("paddings", {}, "2 * rank values >= 0: [before_0, after_0, ...]")
      .Min(0)
      .Attr<float>("pad_value", 0.0f, "the value of the padded elements")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const auto& p = ctx.Attr<std::vector<int32_t>>("paddings");
        FL_ENFORCE(p.size() == 2 * static_cast<size_t>(x.size()), "pad: paddings has ", p.size(), " values but ",
                   ctx.Describe("X"), " of rank ", x.size(), " needs 2 * rank = ", 2 * x.size());
        DDim out = x;
        for (int i = 0; i < x.size(); ++i)
          if (x[i] >= 0) out[i] = x[i] + p[2 * i] + p[2 * i + 1];
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        Tensor* out = ctx.Output("Out");
        FillValue<T>(out, ctx.place(), static_cast<T>(ctx.Attr<float>("pad_value")));
        BoxCopy<true>(x.dims(), out->dims(), PadOffsets(ctx.Attr<std::vector<int32_t>>("paddings"), x.dims().size()),
                      const_cast<T*>(x.data<T>()), out->mutable_data<T>(ctx.place()));
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD without the padding.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& dout = ctx.Input("Out@GRAD");
        const DDim& xd = ctx.Input("X").dims();
        dx->Resize(xd);
        BoxCopy<false>(xd, dout.dims(), PadOffsets(ctx.Attr<std::vector<int32_t>>("paddings"), xd.size()),
                       dx->mutable_data<T>(ctx.place()), const_cast<T*>(dout.data<T>()));
      });
}

FL_REGISTER_OP(pad2d, op) {
  op.Doc("Pads NCHW images by [top, bottom, left, right] in mode constant (pad_value), reflect or edge.")
      .Input("X", "images [N, C, H, W]")
      .DispensableInput("Paddings", "int32 [4]: [top, bottom, left, right] at run time (overrides paddings)")
      .Output("Out", "[N, C, H + top + bottom, W + left + right]")
      .NonDifferentiable({"Paddings"})
      .Attr<std::vector<int32_t>>("paddings", {0, 0, 0, 0}, "[top, bottom, left, right]")
      .Min(0)
      .Size(4)
      .Attr("mode", "constant", "constant, reflect or edge")
      .OneOf({"constant", "reflect", "edge"})
      .Attr<float>("pad_value", 0.0f, "the value of the padded elements (mode constant)")
      .Attr("data_format", "NCHW", "NCHW only")
      .OneOf({"NCHW"})
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() == 4, "pad2d: ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
        DDim out = x;
        if (ctx.HasInput("Paddings")) {
          out[2] = out[3] = -1;  // known at run time
        } else {
          const auto& p = ctx.Attr<std::vector<int32_t>>("paddings");
          const Pad2dArgs a{p[0], p[1], p[2], p[3], ctx.Attr<std::string>("mode")};
          CheckPad2dFits(a.mode, x[2], x[3], a, ctx.Describe("X"));
          if (x[2] >= 0) out[2] = x[2] + p[0] + p[1];
          if (x[3] >= 0) out[3] = x[3] + p[2] + p[3];
        }
        if (ctx.IsRuntime() && ctx.HasInput("Paddings")) out = x;  // the kernel resizes
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
      })
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { Pad2dForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Paddings", "Out@GRAD"})
      .Optional({"Paddings"})
      .Doc("X@GRAD: Out@GRAD without the padding; reflect and edge add each copied position back to its source.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { Pad2dBackward<typename decltype(tag)::type>(ctx); });
}

FL_REGISTER_OP(pad_constant_like, op) {
  op.Doc("Out = Y padded at the end of every axis with pad_value to X's shape.")
      .Input("X", "the tensor whose shape Out takes")
      .Input("Y", "the tensor padded: same rank, dims <= X's")
      .Output("Out", "X's shape, Y in its leading corner")
      .NonDifferentiable({"X"})
      .Attr<float>("pad_value", 0.0f, "the value of the padded elements")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
        FL_ENFORCE(x.size() == y.size(), "pad_constant_like: ", ctx.Describe("Y"), " must have the rank of ",
                   ctx.Describe("X"));
        for (int i = 0; i < x.size(); ++i)
          FL_ENFORCE(x[i] < 0 || y[i] < 0 || y[i] <= x[i], "pad_constant_like: ", ctx.Describe("Y"), " is larger than ",
                     ctx.Describe("X"), " at dim ", i);
        ctx.SetOutput("Out", x, ctx.InputDType("Y"));
        ctx.ShareLoD("X", "Out");  // Fluid: Out takes X's shape and LoD
      })
      .KernelDTypeFrom("Y")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& y = ctx.Input("Y");
        Tensor* out = ctx.Output("Out");
        FillValue<T>(out, ctx.place(), static_cast<T>(ctx.Attr<float>("pad_value")));
        BoxCopy<true>(y.dims(), out->dims(), std::vector<int64_t>(y.dims().size(), 0), const_cast<T*>(y.data<T>()),
                      out->mutable_data<T>(ctx.place()));
      });
  op.GradOp({"Y", "Out@GRAD"})
      .Doc("Y@GRAD = the leading corner of Out@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dy = ctx.OutputOrNull("Y@GRAD");
        if (!dy) return;
        const Tensor& dout = ctx.Input("Out@GRAD");
        const DDim& yd = ctx.Input("Y").dims();
        dy->Resize(yd);
        BoxCopy<false>(yd, dout.dims(), std::vector<int64_t>(yd.size(), 0), dy->mutable_data<T>(ctx.place()),
                       const_cast<T*>(dout.data<T>()));
      });
}

}  // namespace fl
