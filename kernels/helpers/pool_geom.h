// pool2d's window geometry resolved against X's dims (kernels/pool2d.cc and kernels/cuda/pool2d.cu).
#pragma once
#include <string>
#include <vector>

#include "op_context.h"

namespace fl {
namespace pool {

inline int64_t PoolOutSize(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode) {
  if (in < 0) return -1;
  return ceil_mode ? (in - k + 2 * pad + stride - 1) / stride + 1 : (in - k + 2 * pad) / stride + 1;
}

// Pooling parameters resolved against X's dims (global pooling applied).
struct PoolGeom {
  bool is_max = true, exclusive = true;
  int64_t H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};

template <typename Ctx>
inline PoolGeom ResolvePool(const Ctx& ctx, const DDim& x, const std::string& xdesc) {
  // pooling_type, data_format, strides and paddings are checked by the registration's rules
  const std::string& type = ctx.template Attr<std::string>("pooling_type");
  FL_ENFORCE(x.size() == 4, "pool2d: ", xdesc, " must have rank 4 (NCHW), got rank ", x.size());
  const auto& ksize = ctx.template Attr<std::vector<int32_t>>("ksize");
  const auto& strides = ctx.template Attr<std::vector<int32_t>>("strides");
  const auto& paddings = ctx.template Attr<std::vector<int32_t>>("paddings");
  const bool global = ctx.template Attr<bool>("global_pooling");
  PoolGeom g;
  g.is_max = type == "max";
  g.exclusive = ctx.template Attr<bool>("exclusive");
  g.H = x[2];
  g.W = x[3];
  if (global) {
    g.kh = g.H;
    g.kw = g.W;
    g.OH = g.OW = 1;
    return g;
  }
  FL_ENFORCE(ksize.size() == 2, "pool2d: ksize ", DDim(std::vector<int64_t>(ksize.begin(), ksize.end())),
             " must have 2 values for ", xdesc);
  g.kh = ksize[0], g.kw = ksize[1], g.sh = strides[0], g.sw = strides[1], g.ph = paddings[0], g.pw = paddings[1];
  FL_ENFORCE(g.kh > 0 && g.kw > 0, "pool2d: ksize [", g.kh, ", ", g.kw, "] must be positive for ", xdesc);
  FL_ENFORCE(g.H < 0 || g.kh <= g.H + 2 * g.ph, "pool2d: kernel height ", g.kh,
             " is larger than the padded input height ", g.H + 2 * g.ph, " for ", xdesc, " with paddings [", g.ph, ", ",
             g.pw, "]");
  FL_ENFORCE(g.W < 0 || g.kw <= g.W + 2 * g.pw, "pool2d: kernel width ", g.kw,
             " is larger than the padded input width ", g.W + 2 * g.pw, " for ", xdesc, " with paddings [", g.ph, ", ",
             g.pw, "]");
  const bool ceil_mode = ctx.template Attr<bool>("ceil_mode");
  g.OH = PoolOutSize(g.H, g.kh, g.ph, g.sh, ceil_mode);
  g.OW = PoolOutSize(g.W, g.kw, g.pw, g.sw, ceil_mode);
  return g;
}

}  // namespace pool
}  // namespace fl
