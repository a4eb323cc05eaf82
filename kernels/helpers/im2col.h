// im2col / col2im for one NCHW image, shared by conv2d's forward and both of its gradients.
//
// The column matrix of an image [C, H, W] has C*kh*kw rows, row (c*kh + ki)*kw + kj holding the Ho*Wo
// input values that kernel tap (ki, kj) of channel c sees (0 where it falls in the padding). Rows are
// `ld` elements apart, so several images can share one matrix side by side ([rows, nb*Ho*Wo]) and feed
// one wide GEMM. Each (tap, output row) is one contiguous run; stride 1 copies it straight, and the
// valid output range of every tap is computed once instead of testing each element.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace fl {

struct ConvGeometry {
  int64_t channels, height, width;  // one image: [C, H, W]
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
  int64_t out_h, out_w;

  int64_t OutSize() const { return out_h * out_w; }
  int64_t ImageSize() const { return channels * height * width; }
  int64_t ColRows() const { return channels * kernel_h * kernel_w; }
  // 1x1, stride 1, no padding: the column matrix is the image itself.
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

namespace im2col_detail {

// kToCol: col = im2col(image) (every col element written). Otherwise image += col2im(col).
template <bool kToCol, typename T>
void Walk(const ConvGeometry& g, T* image, T* col, int64_t ld) {
  const int64_t ow = g.out_w, oh = g.out_h, sw = g.stride_w;
  for (int64_t c = 0; c < g.channels; ++c) {
    T* plane = image + c * g.height * g.width;
    for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
      const int64_t hoff = ki * g.dilation_h - g.pad_h;
      int64_t hlo, hhi;
      ValidRange(oh, g.height, g.stride_h, hoff, &hlo, &hhi);
      for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
        const int64_t woff = kj * g.dilation_w - g.pad_w;
        int64_t wlo, whi;
        ValidRange(ow, g.width, sw, woff, &wlo, &whi);
        const int64_t n = whi - wlo;
        T* row = col + ((c * g.kernel_h + ki) * g.kernel_w + kj) * ld;
        if (kToCol) {
          std::fill(row, row + hlo * ow, T(0));
          std::fill(row + hhi * ow, row + oh * ow, T(0));
        }
        for (int64_t ho = hlo; ho < hhi; ++ho) {
          T* dst = row + ho * ow;
          T* src = plane + (ho * g.stride_h + hoff) * g.width + wlo * sw + woff;
          T* d = dst + wlo;
          if (kToCol) {
            std::fill(dst, d, T(0));
            std::fill(dst + whi, dst + ow, T(0));
            if (sw == 1) {
              for (int64_t i = 0; i < n; ++i) d[i] = src[i];
            } else {
              for (int64_t i = 0; i < n; ++i) d[i] = src[i * sw];
            }
          } else {
            if (sw == 1) {
              for (int64_t i = 0; i < n; ++i) src[i] += d[i];
            } else {
              for (int64_t i = 0; i < n; ++i) src[i * sw] += d[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace im2col_detail

// col[ColRows(), ld] (first OutSize() columns) = the column matrix of `image` [C, H, W].
template <typename T>
void Im2Col(const ConvGeometry& g, const T* image, T* col, int64_t ld) {
  const int64_t p = g.OutSize();
  if (g.IsPointwise()) {
    for (int64_t c = 0; c < g.channels; ++c) std::memcpy(col + c * ld, image + c * p, p * sizeof(T));
    return;
  }
  im2col_detail::Walk<true>(g, const_cast<T*>(image), col, ld);
}

// image [C, H, W] = col2im(col): each input element gets the sum of the column entries it fed.
template <typename T>
void Col2Im(const ConvGeometry& g, const T* col, int64_t ld, T* image) {
  const int64_t p = g.OutSize();
  if (g.IsPointwise()) {
    for (int64_t c = 0; c < g.channels; ++c) std::memcpy(image + c * p, col + c * ld, p * sizeof(T));
    return;
  }
  std::fill(image, image + g.ImageSize(), T(0));
  im2col_detail::Walk<false>(g, image, const_cast<T*>(col), ld);
}

}  // namespace fl
