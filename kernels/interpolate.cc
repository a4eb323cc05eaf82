// bilinear_interp and nearest_interp (Fluid 1.8's image resize ops) over NCHW images.
// The output size is, in order of precedence: the SizeTensor inputs (one int32 each for H, W), else the OutSize
// input (int32 [2]), else in * scale (the Scale input or the scale attribute, when > 0), else out_h / out_w.
// Source coordinates, per axis with ratio = align_corners ? (in - 1) / (out - 1) : in / out (0 when out == 1):
//   nearest: src = int(ratio * k + 0.5) with align_corners, else int(ratio * k);
//   bilinear: with align_mode 0 and not align_corners, src = max(ratio * (k + 0.5) - 0.5, 0) (half-pixel
//   centers), else src = ratio * k; lo = int(src) (of the unclamped value, then clamped at 0), hi = min(lo + 1,
//   in - 1), weight of hi = src - lo.
// Gradients scatter Out@GRAD back with the same weights.
#include <algorithm>
#include <string>
#include <vector>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// Per output position along one axis: the two source indices and the weight of the second.
struct AxisMap {
  std::vector<int64_t> lo, hi;
  std::vector<float> frac;
};

float Ratio(int64_t in, int64_t out, bool align_corners) {
  if (out <= 1) return 0.f;
  return align_corners ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                       : static_cast<float>(in) / static_cast<float>(out);
}

AxisMap MakeAxis(int64_t in, int64_t out, bool bilinear, bool align_corners, int align_mode) {
  AxisMap m;
  m.lo.resize(out);
  m.hi.resize(out);
  m.frac.resize(out);
  const float ratio = Ratio(in, out, align_corners);
  const bool half_pixel = align_mode == 0 && !align_corners;
  for (int64_t k = 0; k < out; ++k) {
    if (!bilinear) {
      const int64_t src = align_corners ? static_cast<int64_t>(ratio * k + 0.5f) : static_cast<int64_t>(ratio * k);
      m.lo[k] = m.hi[k] = std::min(src, in - 1);
      m.frac[k] = 0.f;
      continue;
    }
    int64_t lo = half_pixel ? static_cast<int64_t>(ratio * (k + 0.5f) - 0.5f) : static_cast<int64_t>(ratio * k);
    lo = std::max<int64_t>(lo, 0);
    float src = ratio * (k + 0.5f) - 0.5f;
    src = src > 0.f ? src : 0.f;
    m.lo[k] = lo;
    m.hi[k] = lo + 1 < in - 1 ? lo + 1 : in - 1;
    m.frac[k] = half_pixel ? src - static_cast<float>(lo) : ratio * k - static_cast<float>(lo);
  }
  return m;
}

bool IsBilinear(const std::string& type) { return type.rfind("bilinear_interp", 0) == 0; }  // also its _grad

// The output [H, W] at run time (see the top of the file).
std::pair<int64_t, int64_t> OutSize(const ExecutionContext& ctx, int64_t in_h, int64_t in_w) {
  const std::string& op = ctx.Type();
  if (ctx.HasInput("SizeTensor")) {
    FL_ENFORCE(ctx.InputSize("SizeTensor") == 2, op, ": SizeTensor must hold 2 tensors (H, W), got ",
               ctx.InputSize("SizeTensor"));
    int64_t v[2];
    for (int i = 0; i < 2; ++i) {
      const Tensor& t = ctx.Input("SizeTensor", i);
      FL_ENFORCE(t.dtype() == DType::INT32 && t.numel() == 1, op, ": SizeTensor[", i, "] '",
                 ctx.InputName("SizeTensor", i), "' must be one int32 value, got ", DTypeName(t.dtype()), " ",
                 t.dims());
      v[i] = t.data<int32_t>()[0];
    }
    return {v[0], v[1]};
  }
  int64_t h = ctx.Attr<int32_t>("out_h"), w = ctx.Attr<int32_t>("out_w");
  float scale = ctx.Attr<float>("scale");
  if (ctx.HasInput("Scale")) {
    const Tensor& t = ctx.Input("Scale");
    FL_ENFORCE(t.dtype() == DType::FP32 && t.numel() == 1, op, ": Scale '", ctx.InputName("Scale"),
               "' must be one float32 value, got ", DTypeName(t.dtype()), " ", t.dims());
    scale = t.data<float>()[0];
    FL_ENFORCE(scale > 0, op, ": Scale '", ctx.InputName("Scale"), "' holds ", scale, "; it must be > 0");
  }
  if (scale > 0) {
    h = static_cast<int64_t>(in_h * scale);
    w = static_cast<int64_t>(in_w * scale);
  }
  if (ctx.HasInput("OutSize")) {
    const Tensor& t = ctx.Input("OutSize");
    FL_ENFORCE(t.dtype() == DType::INT32 && t.numel() == 2, op, ": OutSize '", ctx.InputName("OutSize"),
               "' must be an int32 tensor of 2 values [H, W], got ", DTypeName(t.dtype()), " ", t.dims());
    h = t.data<int32_t>()[0];
    w = t.data<int32_t>()[1];
  }
  return {h, w};
}

void InterpInferShape(InferShapeContext& ctx) {
  const std::string& op = ctx.Type();
  const DDim x = ctx.InputDim("X");
  FL_ENFORCE(x.size() == 4, op, ": ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
  DDim out{x[0], x[1], -1, -1};
  const bool dynamic = ctx.HasInput("SizeTensor") || ctx.HasInput("OutSize") || ctx.HasInput("Scale");
  if (!dynamic) {
    const float scale = ctx.Attr<float>("scale");
    if (scale > 0) {
      if (x[2] >= 0) out[2] = static_cast<int64_t>(x[2] * scale);
      if (x[3] >= 0) out[3] = static_cast<int64_t>(x[3] * scale);
    } else {
      out[2] = ctx.Attr<int32_t>("out_h");
      out[3] = ctx.Attr<int32_t>("out_w");
    }
    const bool ok = scale > 0 ? (x[2] < 0 || out[2] > 0) && (x[3] < 0 || out[3] > 0) : out[2] > 0 && out[3] > 0;
    FL_ENFORCE(ok, op, ": the output size [", out[2], ", ", out[3], "] of ", ctx.Describe("X"),
               " must be positive (set out_h and out_w, or scale > 0)");
  }
  if (ctx.IsRuntime() && dynamic) out = x;  // the kernel resizes from the size inputs
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
}

template <typename T>
void InterpForward(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const DDim& d = x.dims();
  const auto [oh, ow] = OutSize(ctx, d[2], d[3]);
  FL_ENFORCE(oh > 0 && ow > 0, ctx.Type(), ": the output size [", oh, ", ", ow, "] of X '", ctx.InputName("X"), "' ", d,
             " must be positive");
  FL_ENFORCE(d[2] > 0 && d[3] > 0, ctx.Type(), ": X '", ctx.InputName("X"), "' ", d, " has an empty image");
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{d[0], d[1], oh, ow});
  T* o = out->mutable_data<T>(ctx.place());
  const bool bilinear = IsBilinear(ctx.Type());
  const bool ac = ctx.Attr<bool>("align_corners");
  const int am = ctx.Attr<int32_t>("align_mode");
  const AxisMap mh = MakeAxis(d[2], oh, bilinear, ac, am), mw = MakeAxis(d[3], ow, bilinear, ac, am);
  const T* in = x.data<T>();
  const int64_t ih = d[2], iw = d[3];
  ParallelFor(d[0] * d[1], 4, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* src = in + plane * ih * iw;
      T* dst = o + plane * oh * ow;
      for (int64_t r = 0; r < oh; ++r) {
        const T fy = static_cast<T>(mh.frac[r]);
        const T* rlo = src + mh.lo[r] * iw;
        const T* rhi = src + mh.hi[r] * iw;
        for (int64_t c = 0; c < ow; ++c) {
          if (!bilinear) {
            dst[r * ow + c] = rlo[mw.lo[c]];
            continue;
          }
          const T fx = static_cast<T>(mw.frac[c]);
          const int64_t cl = mw.lo[c], ch = mw.hi[c];
          dst[r * ow + c] = rlo[cl] * (T(1) - fy) * (T(1) - fx) + rhi[cl] * fy * (T(1) - fx) +
                            rlo[ch] * (T(1) - fy) * fx + rhi[ch] * fy * fx;
        }
      }
    }
  });
}

template <typename T>
void InterpBackward(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const DDim& d = x.dims();
  const DDim& od = dout.dims();
  FL_ENFORCE(od.size() == 4 && od[0] == d[0] && od[1] == d[1], ctx.Type(), "_grad: Out@GRAD ", od, " does not match X ",
             d);
  const int64_t oh = od[2], ow = od[3], ih = d[2], iw = d[3];
  dx->Resize(d);
  T* g = dx->mutable_data<T>(ctx.place());
  const bool bilinear = IsBilinear(ctx.Type());
  const bool ac = ctx.Attr<bool>("align_corners");
  const int am = ctx.Attr<int32_t>("align_mode");
  const AxisMap mh = MakeAxis(ih, oh, bilinear, ac, am), mw = MakeAxis(iw, ow, bilinear, ac, am);
  const T* go = dout.data<T>();
  ParallelFor(d[0] * d[1], 4, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      T* dst = g + plane * ih * iw;
      const T* src = go + plane * oh * ow;
      std::fill(dst, dst + ih * iw, T(0));
      for (int64_t r = 0; r < oh; ++r) {
        const T fy = static_cast<T>(mh.frac[r]);
        T* rlo = dst + mh.lo[r] * iw;
        T* rhi = dst + mh.hi[r] * iw;
        for (int64_t c = 0; c < ow; ++c) {
          const T v = src[r * ow + c];
          if (!bilinear) {
            rlo[mw.lo[c]] += v;
            continue;
          }
          const T fx = static_cast<T>(mw.frac[c]);
          const int64_t cl = mw.lo[c], ch = mw.hi[c];
          rlo[cl] += v * (T(1) - fy) * (T(1) - fx);
          rhi[cl] += v * fy * (T(1) - fx);
          rlo[ch] += v * (T(1) - fy) * fx;
          rhi[ch] += v * fy * fx;
        }
      }
    }
  });
}

void RegisterInterp(OpBuilder& op, const std::string& type) {
  op.Doc(type + ": resizes NCHW images to [out_h, out_w] (or by scale, or from the size inputs).")
      .Input("X", "images [N, C, H, W]")
      .DispensableInput("OutSize", "int32 [2]: [out_h, out_w] at run time")
      .OptionalDuplicableInput("SizeTensor", "two int32 [1] tensors: out_h and out_w at run time")
      .DispensableInput("Scale", "float32 [1]: the scale at run time")
      .Output("Out", "resized images [N, C, out_h, out_w]")
      .NonDifferentiable({"OutSize", "SizeTensor", "Scale"})
      .Attr<int32_t>("out_d", -1, "accepted for Fluid compatibility (3-D resize); unused by these 2-D ops")
      .Attr<int32_t>("out_h", -1, "output height (when no size input and scale <= 0)")
      .Attr<int32_t>("out_w", -1, "output width (when no size input and scale <= 0)")
      .Attr<float>("scale", 0.0f, "output = int(input * scale) when > 0")
      .Attr("interp_method", type == "bilinear_interp" ? "bilinear" : "nearest",
            "accepted for Fluid compatibility; the op type decides the method")
      .Attr<bool>("align_corners", true, "corner pixels of input and output aligned")
      .Attr<int32_t>("align_mode", 1, "bilinear without align_corners: 0 = half-pixel centers, 1 = ratio * k")
      .Range(0, 1)
      .Attr("data_layout", "NCHW", "NCHW only")
      .OneOf({"NCHW", "AnyLayout"})
      .SetInferShape(InterpInferShape)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { InterpForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "OutSize", "SizeTensor", "Scale", "Out@GRAD"})
      .Optional({"OutSize", "SizeTensor", "Scale"})
      .Doc(type + "_grad: Out@GRAD scattered back to X with the forward's weights.")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { InterpBackward<typename decltype(tag)::type>(ctx); });
}

}  // namespace

FL_REGISTER_OP(bilinear_interp, op) { RegisterInterp(op, "bilinear_interp"); }
FL_REGISTER_OP(nearest_interp, op) { RegisterInterp(op, "nearest_interp"); }

}  // namespace fl
