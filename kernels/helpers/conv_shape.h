// conv2d's and conv2d_transpose's attributes and per-call shapes (kernels/conv2d.cc and kernels/cuda/conv2d.cu).
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "im2row.h"
#include "op_context.h"

namespace fl {

// The conv attributes, read once (from an InferShapeContext or an ExecutionContext).
struct ConvAttrs {
  std::vector<int32_t> strides, paddings, dilations;
  int32_t groups;
  std::string data_format;

  template <typename Ctx>
  static ConvAttrs From(const Ctx& ctx) {
    return {ctx.template Attr<std::vector<int32_t>>("strides"), ctx.template Attr<std::vector<int32_t>>("paddings"),
            ctx.template Attr<std::vector<int32_t>>("dilations"), ctx.template Attr<int32_t>("groups"),
            ctx.template Attr<std::string>("data_format")};
  }
};

// Everything a kernel needs: per-image geometry (all C channels) plus batch, output channels, groups.
struct ConvShape {
  ConvGeometry geom;
  int64_t batch, out_channels, groups;
  // out_h/out_w are what ConvOutSize gives for the geometry (false for conv2d_transpose's asymmetric
  // padding or enlarged output_size): the direct kernel reads the padded image without bounds checks.
  bool consistent = true;

  int64_t PatchPerGroup() const { return geom.PatchSize() / groups; }
  int64_t OutPerGroup() const { return out_channels / groups; }
  // One input channel per group (Fluid's depthwise_conv2d, incl. a channel multiplier).
  bool Depthwise() const { return groups == geom.channels && groups > 1; }
};

inline ConvShape MakeShape(const ExecutionContext& ctx, const DDim& in, const DDim& filter) {
  const ConvAttrs a = ConvAttrs::From(ctx);
  ConvShape s;
  s.geom = {
      in[1],         in[2],          in[3],          filter[2], filter[3], a.strides[0], a.strides[1], a.paddings[0],
      a.paddings[1], a.dilations[0], a.dilations[1], 0,         0};
  s.geom.out_h = ConvOutSize(in[2], filter[2], a.strides[0], a.paddings[0], a.dilations[0]);
  s.geom.out_w = ConvOutSize(in[3], filter[3], a.strides[1], a.paddings[1], a.dilations[1]);
  s.batch = in[0];
  s.out_channels = filter[0];
  s.groups = a.groups;
  return s;
}

// The spatial geometry of a transposed convolution after padding_algorithm: pads [top, bottom, left, right],
// dilations, and the output size (-1 when unknown).
struct TransposeGeometry {
  int64_t pad[4];
  int64_t dilation[2];
  int64_t out[2];
  bool consistent;  // symmetric padding and no output_size enlargement
};

template <typename Ctx>
inline TransposeGeometry MakeTransposeGeometry(const Ctx& ctx, const DDim& in, const DDim& filter,
                                               const std::function<std::string(const char*)>& describe) {
  const std::string& op = ctx.Type();
  const auto& strides = ctx.template Attr<std::vector<int32_t>>("strides");
  const auto& paddings = ctx.template Attr<std::vector<int32_t>>("paddings");
  const auto& dilations = ctx.template Attr<std::vector<int32_t>>("dilations");
  const auto& output_size = ctx.template Attr<std::vector<int32_t>>("output_size");
  const std::string& algo = ctx.template Attr<std::string>("padding_algorithm");
  TransposeGeometry t;
  t.consistent = true;
  for (int i = 0; i < 2; ++i) {
    t.dilation[i] = dilations[i];
    if (paddings.size() == 4) {
      t.pad[2 * i] = paddings[2 * i];
      t.pad[2 * i + 1] = paddings[2 * i + 1];
    } else {
      t.pad[2 * i] = t.pad[2 * i + 1] = paddings[i];
    }
    const int64_t size = in[2 + i], k = filter[2 + i];
    if (algo == "VALID") {
      t.pad[2 * i] = t.pad[2 * i + 1] = 0;
    } else if (algo == "SAME") {
      // Fluid's rule, on the input's spatial size: the pads a stride-s convolution needs for ceil(size / s).
      t.dilation[i] = 1;
      if (size >= 0 && k >= 0) {
        const int64_t o = (size + strides[i] - 1) / strides[i];
        const int64_t sum = std::max<int64_t>((o - 1) * strides[i] + k - size, 0);
        t.pad[2 * i] = sum / 2;
        t.pad[2 * i + 1] = sum - sum / 2;
      }
    }
    if (t.pad[2 * i] != t.pad[2 * i + 1]) t.consistent = false;
    t.out[i] = -1;
    if (size < 0 || k < 0) {
      if (!output_size.empty()) t.out[i] = output_size[i];
      continue;
    }
    FL_ENFORCE(k >= 1, op, ": ", describe("Filter"), " has an empty kernel");
    FL_ENFORCE(size >= 1, op, ": ", describe("Input"), " has an empty ", i == 0 ? "height" : "width");
    const int64_t infer = (size - 1) * strides[i] - t.pad[2 * i] - t.pad[2 * i + 1] + t.dilation[i] * (k - 1) + 1;
    FL_ENFORCE(infer >= 1, op, ": the output ", i == 0 ? "height" : "width", " (", size, " - 1) * stride ", strides[i],
               " - paddings ", t.pad[2 * i], " + ", t.pad[2 * i + 1], " + dilation ", t.dilation[i], " * (", k,
               " - 1) + 1 = ", infer, " of ", describe("Input"), " and ", describe("Filter"), " is not positive");
    t.out[i] = infer;
    if (!output_size.empty()) {
      const int64_t want = output_size[i];
      FL_ENFORCE(want >= infer && want < infer + strides[i], op, ": output_size ", i == 0 ? "height " : "width ", want,
                 " must be in [", infer, ", ", infer + strides[i], ") for ", describe("Input"), " and ",
                 describe("Filter"), " (the size stride ", strides[i], " gives, up to stride - 1 more)");
      if (want != infer) t.consistent = false;
      t.out[i] = want;
    }
  }
  return t;
}

// The conv2d whose data gradient the transposed convolution is: input [M, Ho, Wo], output [C, H, W].
inline ConvShape MakeTransposeShape(const ExecutionContext& ctx, const DDim& in, const DDim& filter) {
  const auto& strides = ctx.Attr<std::vector<int32_t>>("strides");
  const TransposeGeometry t = MakeTransposeGeometry(ctx, in, filter, [&](const char* slot) {
    return std::string(slot) + " '" + ctx.InputName(slot) + "' " + ctx.Input(slot).dims().ToString();
  });
  ConvShape s;
  s.groups = ctx.Attr<int32_t>("groups");
  s.geom = {filter[1] * s.groups, t.out[0],   t.out[1], filter[2], filter[3],
            strides[0],           strides[1], t.pad[0], t.pad[2],  t.dilation[0],
            t.dilation[1],        in[2],      in[3]};
  s.batch = in[0];
  s.out_channels = in[1];
  s.consistent = t.consistent;
  return s;
}

// The grad ops' inputs of conv2d and depthwise_conv2d (and, `transposed`, of their _transpose ops), checked against
// the forward's output dims, and their outputs allocated on the kernel's place (null where not wanted): what the CPU
// and CUDA kernels all start with.
template <typename T>
struct ConvGradArgs {
  explicit ConvGradArgs(const ExecutionContext& ctx, bool transposed = false)
      : in(ctx.Input("Input")),
        filter(ctx.Input("Filter")),
        dout(ctx.Input("Output@GRAD")),
        s(transposed ? MakeTransposeShape(ctx, in.dims(), filter.dims()) : MakeShape(ctx, in.dims(), filter.dims())) {
    const DDim out_dims = transposed ? DDim{s.batch, s.geom.channels, s.geom.height, s.geom.width}
                                     : DDim{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w};
    FL_ENFORCE(dout.dims() == out_dims, ctx.Type(), ": Output@GRAD '", ctx.InputName("Output@GRAD"), "' ", dout.dims(),
               " does not match the output dims ", out_dims);
    if (Tensor* t = ctx.OutputOrNull("Input@GRAD")) {
      t->Resize(in.dims());
      dx = t->mutable_data<T>(ctx.place());
    }
    if (Tensor* t = ctx.OutputOrNull("Filter@GRAD")) {
      t->Resize(filter.dims());
      dw = t->mutable_data<T>(ctx.place());
    }
  }
  const Tensor& in;
  const Tensor& filter;
  const Tensor& dout;
  const ConvShape s;
  T* dx = nullptr;
  T* dw = nullptr;
};

}  // namespace fl
