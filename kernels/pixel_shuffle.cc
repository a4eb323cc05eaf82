// Channel <-> space rearrangements of NCHW images, each a permutation of the elements (the gradient is the
// inverse permutation of Out@GRAD).
//   pixel_shuffle: [N, C*r*r, H, W] -> [N, C, H*r, W*r], Out[n, c, h*r + i, w*r + j] = X[n, c*r*r + i*r + j, h, w].
//   space_to_depth: [N, C, H, W] -> [N, C*b*b, H/b, W/b] in Fluid's (Darknet reorg) element order: the element
//     at X's flat index of (n, k, j, i) goes to flat index w2 + W*b*(h2 + H*b*(c2 + (C/(b*b))*n)) with
//     c2 = k % (C/(b*b)), o = k / (C/(b*b)), w2 = i*b + o % b, h2 = j*b + o / b (C, H, W of X; C % (b*b) == 0).
#include <string>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// kForward: dst[to(i)] = src[i]; otherwise dst[i] = src[to(i)] (the inverse, for the gradient).
template <bool kForward, typename T, typename F>
void Permute(int64_t n, const T* src, T* dst, F to) {
  ParallelFor(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (kForward) dst[to(i)] = src[i];
      else dst[i] = src[to(i)];
    }
  });
}

// X's flat index -> Out's, for pixel_shuffle with factor r over X dims [N, C*r*r, H, W].
struct ShuffleIndex {
  int64_t c, h, w, r;  // c: output channels
  int64_t operator()(int64_t i) const {
    const int64_t x_w = i % w, x_h = i / w % h, ch = i / (w * h) % (c * r * r), n = i / (w * h * c * r * r);
    const int64_t oc = ch / (r * r), di = ch % (r * r) / r, dj = ch % r;
    return ((n * c + oc) * h * r + x_h * r + di) * w * r + x_w * r + dj;
  }
};

// X's flat index -> Out's, for space_to_depth (Fluid's order, see the top).
struct SpaceToDepthIndex {
  int64_t c, h, w, b;  // X's C, H, W
  int64_t operator()(int64_t idx) const {
    const int64_t out_c = c / (b * b), n = idx / (c * h * w), k = idx % (c * h * w) / (h * w), j = idx % (h * w) / w,
                  i = idx % w;
    const int64_t c2 = k % out_c, o = k / out_c, w2 = i * b + o % b, h2 = j * b + o / b;
    return w2 + w * b * (h2 + h * b * (c2 + out_c * n));
  }
};

template <typename Index>
void RegisterPermutation(OpBuilder& op, Index (*make)(const DDim& x, const ExecutionContext& ctx)) {
  op.CPUKernel<float, double, int32_t, int64_t>([make](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor& x = ctx.Input("X");
    Permute<true>(x.numel(), x.data<T>(), ctx.Alloc<T>("Out"), make(x.dims(), ctx));
  });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD: Out@GRAD through the inverse permutation.")
      .CPUKernel<float, double>([make](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(dout.numel() == x.numel(), ctx.Type(), ": Out@GRAD ", dout.dims(), " does not match X ", x.dims());
        dx->Resize(x.dims());
        Permute<false>(x.numel(), dout.data<T>(), dx->mutable_data<T>(ctx.place()), make(x.dims(), ctx));
      });
}

}  // namespace

FL_REGISTER_OP(pixel_shuffle, op) {
  op.Doc("[N, C*r*r, H, W] -> [N, C, H*r, W*r]: Out[n, c, h*r + i, w*r + j] = X[n, c*r*r + i*r + j, h, w].")
      .Input("X", "images [N, C*r*r, H, W]")
      .Output("Out", "images [N, C, H*r, W*r]")
      .Attr<int32_t>("upscale_factor", 1, "r")
      .Min(1)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int64_t r = ctx.Attr<int32_t>("upscale_factor");
        FL_ENFORCE(x.size() == 4, "pixel_shuffle: ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
        FL_ENFORCE(x[1] < 0 || x[1] % (r * r) == 0, "pixel_shuffle: the ", x[1], " channels of ", ctx.Describe("X"),
                   " are not divisible by upscale_factor^2 = ", r * r);
        ctx.SetOutput("Out",
                      DDim{x[0], x[1] < 0 ? -1 : x[1] / (r * r), x[2] < 0 ? -1 : x[2] * r, x[3] < 0 ? -1 : x[3] * r},
                      ctx.InputDType("X"));
      });
  RegisterPermutation<ShuffleIndex>(op, [](const DDim& x, const ExecutionContext& ctx) {
    const int64_t r = ctx.Attr<int32_t>("upscale_factor");
    return ShuffleIndex{x[1] / (r * r), x[2], x[3], r};
  });
}

FL_REGISTER_OP(space_to_depth, op) {
  op.Doc("[N, C, H, W] -> [N, C*b*b, H/b, W/b], elements in Fluid's (Darknet reorg) order.")
      .Input("X", "images [N, C, H, W]")
      .Output("Out", "[N, C*b*b, H/b, W/b]")
      .Attr<int64_t>("blocksize", 1, "b: H and W divisible by it, C by b*b")
      .Min(1)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int64_t b = ctx.Attr<int64_t>("blocksize");
        FL_ENFORCE(x.size() == 4, "space_to_depth: ", ctx.Describe("X"), " must be 4-D [N, C, H, W]");
        FL_ENFORCE(x[1] < 0 || x[1] % (b * b) == 0, "space_to_depth: the ", x[1], " channels of ", ctx.Describe("X"),
                   " are not divisible by blocksize^2 = ", b * b);
        FL_ENFORCE((x[2] < 0 || x[2] % b == 0) && (x[3] < 0 || x[3] % b == 0), "space_to_depth: height and width of ",
                   ctx.Describe("X"), " must be divisible by blocksize = ", b);
        ctx.SetOutput("Out",
                      DDim{x[0], x[1] < 0 ? -1 : x[1] * b * b, x[2] < 0 ? -1 : x[2] / b, x[3] < 0 ? -1 : x[3] / b},
                      ctx.InputDType("X"));
      });
  RegisterPermutation<SpaceToDepthIndex>(op, [](const DDim& x, const ExecutionContext& ctx) {
    return SpaceToDepthIndex{x[1], x[2], x[3], ctx.Attr<int64_t>("blocksize")};
  });
}

}  // namespace fl
