// Convolution geometry and patch rows ("im2row") for NHWC images, shared by conv2d's forward and both
// of its gradients.
//
// The patch matrix of an image [H, W, C] (channels last) has one row per output pixel (Ho*Wo rows) and
// K = C*kh*kw columns, ordered (group, ki, kj, channel within the group): the input values that output
// pixel's kernel sees, 0 where a tap falls in the padding. Channels last makes every tap one contiguous
// run of C/groups values in both the image and the row, and a row-major [P, K] patch matrix is the
// operand OpenBLAS multiplies fastest against the small [K, M] weight matrices of convnets (measured for
// ResNet-20's layers, single-threaded: 154 vs 73 GFLOP/s at M=16 for the [M, K] @ [K, P] im2col form).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace fl {

struct ConvGeometry {
  int64_t channels, height, width;  // one image: C, H, W
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
  int64_t out_h, out_w;

  int64_t OutSize() const { return out_h * out_w; }
  int64_t ImageSize() const { return channels * height * width; }
  int64_t Taps() const { return kernel_h * kernel_w; }
  int64_t PatchSize() const { return channels * Taps(); }
  // 1x1, stride 1, no padding: the patch matrix is the channels-last image itself.
  bool IsPointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

// Output dim of a convolution along one axis; < 1 when the kernel does not fit the padded input.
inline int64_t ConvOutSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  return (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

// Output positions [lo, hi) along one axis whose input index o*stride + offset lies in [0, size).
inline void ValidRange(int64_t out, int64_t size, int64_t stride, int64_t offset, int64_t* lo, int64_t* hi) {
  int64_t l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t h = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
  l = std::min(l, out);
  *lo = l;
  *hi = std::max(l, std::min(h, out));
}

namespace im2row_detail {

// For output rows [ho0, ho1): kToRows: rows = the patch rows of `image` (every element written).
// Otherwise image += the patch rows scattered back (each input gets the sum of the entries it fed).
template <bool kToRows, typename T>
void Walk(const ConvGeometry& g, int64_t groups, T* image, T* rows, int64_t ho0, int64_t ho1) {
  const int64_t c = g.channels, cg = c / groups, taps = g.Taps(), k = g.PatchSize();
  // With one group and dilation 1 the kw taps of a kernel row are one run of kw*C values in both.
  const bool whole_rows = groups == 1 && g.dilation_w == 1;
  for (int64_t ho = ho0; ho < ho1; ++ho) {
    for (int64_t wo = 0; wo < g.out_w; ++wo) {
      T* row = rows + (ho * g.out_w + wo) * k;
      const int64_t w0 = wo * g.stride_w - g.pad_w;
      const bool w_inside = w0 >= 0 && w0 + (g.kernel_w - 1) * g.dilation_w < g.width;
      for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
        const int64_t hi = ho * g.stride_h - g.pad_h + ki * g.dilation_h;
        const bool h_inside = hi >= 0 && hi < g.height;
        if (whole_rows && h_inside && w_inside) {
          T* dst = row + ki * g.kernel_w * c;
          T* src = image + (hi * g.width + w0) * c;
          const int64_t len = g.kernel_w * c;
          if (kToRows) std::memcpy(dst, src, len * sizeof(T));
          else
            for (int64_t i = 0; i < len; ++i) src[i] += dst[i];
          continue;
        }
        for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
          const int64_t wi = w0 + kj * g.dilation_w;
          const bool inside = h_inside && wi >= 0 && wi < g.width;
          T* src = inside ? image + (hi * g.width + wi) * c : nullptr;
          for (int64_t grp = 0; grp < groups; ++grp) {
            T* dst = row + (grp * taps + ki * g.kernel_w + kj) * cg;
            if (kToRows) {
              if (inside)
                for (int64_t i = 0; i < cg; ++i) dst[i] = src[grp * cg + i];
              else std::fill(dst, dst + cg, T(0));
            } else if (inside) {
              for (int64_t i = 0; i < cg; ++i) src[grp * cg + i] += dst[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace im2row_detail

// Patch rows of output rows [ho0, ho1) of the channels-last image [H, W, C]: rows[(ho*Wo + wo)*K + ...].
template <typename T>
void Im2Row(const ConvGeometry& g, int64_t groups, const T* image, T* rows, int64_t ho0, int64_t ho1) {
  im2row_detail::Walk<true>(g, groups, const_cast<T*>(image), rows, ho0, ho1);
}

// image [H, W, C] = the patch rows [P, K] scattered back (the adjoint of Im2Row).
template <typename T>
void Row2Im(const ConvGeometry& g, int64_t groups, const T* rows, T* image) {
  std::fill(image, image + g.ImageSize(), T(0));
  im2row_detail::Walk<false>(g, groups, image, const_cast<T*>(rows), 0, g.out_h);
}

}  // namespace fl
