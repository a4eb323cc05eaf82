// conv2d's attributes and per-call shape (kernels/conv2d.cc and kernels/cuda/conv2d.cu).
#pragma once
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

}  // namespace fl
