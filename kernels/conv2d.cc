// conv2d (and depthwise_conv2d, the type Fluid picks when groups == channels): NCHW convolution with
// stride, padding, dilation and groups, as im2col + GEMM. Small images are batched: the column matrices
// of several images sit side by side so one wide GEMM replaces many thin ones. Depthwise convolutions
// (one input channel per group) skip the GEMM for a direct loop over output rows.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "helpers/blas.h"
#include "helpers/im2col.h"
#include "helpers/parallel.h"
#include "helpers/scratch.h"
#include "op_context.h"

namespace fl {

namespace {

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

std::string Ints(const std::vector<int32_t>& v) { return DDim(std::vector<int64_t>(v.begin(), v.end())).ToString(); }

void CheckAttrs(const std::string& op, const ConvAttrs& a) {
  FL_ENFORCE(a.data_format == "NCHW" || a.data_format == "AnyLayout", op, ": data_format '", a.data_format,
             "' is not supported; only NCHW (or AnyLayout) is implemented");
  FL_ENFORCE(a.strides.size() == 2, op, ": strides ", Ints(a.strides), " must have 2 elements");
  FL_ENFORCE(a.paddings.size() == 2, op, ": paddings ", Ints(a.paddings), " must have 2 elements");
  FL_ENFORCE(a.dilations.size() == 2, op, ": dilations ", Ints(a.dilations), " must have 2 elements");
  FL_ENFORCE(a.strides[0] >= 1 && a.strides[1] >= 1, op, ": strides ", Ints(a.strides), " must be >= 1");
  FL_ENFORCE(a.dilations[0] >= 1 && a.dilations[1] >= 1, op, ": dilations ", Ints(a.dilations), " must be >= 1");
  FL_ENFORCE(a.paddings[0] >= 0 && a.paddings[1] >= 0, op, ": paddings ", Ints(a.paddings), " must be >= 0");
  FL_ENFORCE(a.groups >= 1, op, ": groups = ", a.groups, " must be >= 1");
}

void ConvInferShape(InferShapeContext& ctx) {
  const std::string& op = ctx.Type();
  const ConvAttrs a = ConvAttrs::From(ctx);
  CheckAttrs(op, a);
  const DDim in = ctx.InputDim("Input"), filter = ctx.InputDim("Filter");
  FL_ENFORCE(in.size() == 4, op, ": ", ctx.Describe("Input"), " must be 4-D [N, C, H, W]");
  FL_ENFORCE(filter.size() == 4, op, ": ", ctx.Describe("Filter"), " must be 4-D [M, C/groups, kh, kw]");
  FL_ENFORCE(ctx.InputDType("Input") == ctx.InputDType("Filter"), op, ": ", ctx.Describe("Input"), " is ",
             DTypeName(ctx.InputDType("Input")), " but ", ctx.Describe("Filter"), " is ",
             DTypeName(ctx.InputDType("Filter")));
  const int64_t c = in[1], m = filter[0], g = a.groups;
  FL_ENFORCE(c < 0 || c % g == 0, op, ": ", c, " input channels of ", ctx.Describe("Input"),
             " are not divisible by groups = ", g);
  FL_ENFORCE(m < 0 || m % g == 0, op, ": ", m, " output channels of ", ctx.Describe("Filter"),
             " are not divisible by groups = ", g);
  FL_ENFORCE(c < 0 || filter[1] < 0 || filter[1] * g == c, op, ": ", ctx.Describe("Filter"), " has ", filter[1],
             " channels but ", ctx.Describe("Input"), " with groups = ", g, " needs C/groups = ", c / g);
  DDim out{in[0], m, -1, -1};
  for (int i = 0; i < 2; ++i) {
    const int64_t size = in[2 + i], k = filter[2 + i];
    FL_ENFORCE(k != 0, op, ": ", ctx.Describe("Filter"), " has an empty kernel");
    if (size < 0 || k < 0) continue;
    const int64_t o = ConvOutSize(size, k, a.strides[i], a.paddings[i], a.dilations[i]);
    FL_ENFORCE(o >= 1, op, ": the ", k, "-wide kernel (dilation ", a.dilations[i], ") of ", ctx.Describe("Filter"),
               " is larger than ", i == 0 ? "height" : "width", " ", size, " + 2 * padding ", a.paddings[i],
               " of ", ctx.Describe("Input"));
    out[2 + i] = o;
  }
  ctx.SetOutput("Output", out, ctx.InputDType("Input"));
}

// Everything a kernel needs: per-image geometry (all C channels) plus batch, output channels, groups.
struct ConvShape {
  ConvGeometry geom;
  int64_t batch, out_channels, groups;

  int64_t ColRowsPerGroup() const { return geom.ColRows() / groups; }
  int64_t OutPerGroup() const { return out_channels / groups; }
  // One input channel per group (Fluid's depthwise_conv2d, incl. a channel multiplier).
  bool Depthwise() const { return groups == geom.channels && groups > 1; }
};

ConvShape MakeShape(const ExecutionContext& ctx, const DDim& in, const DDim& filter) {
  const ConvAttrs a = ConvAttrs::From(ctx);
  ConvShape s;
  s.geom = {in[1], in[2], in[3], filter[2], filter[3], a.strides[0], a.strides[1], a.paddings[0],
            a.paddings[1], a.dilations[0], a.dilations[1], 0, 0};
  s.geom.out_h = ConvOutSize(in[2], filter[2], a.strides[0], a.paddings[0], a.dilations[0]);
  s.geom.out_w = ConvOutSize(in[3], filter[3], a.strides[1], a.paddings[1], a.dilations[1]);
  s.batch = in[0];
  s.out_channels = filter[0];
  s.groups = a.groups;
  return s;
}

// How many images share one column matrix: images with few output pixels (LeNet's 8x8 second layer)
// are batched to ~1024 columns so one wide GEMM replaces many thin ones, within an 8 MiB buffer. Images
// with >= 256 output pixels stay one per GEMM: batching LeNet's 24x24 first layer 4 images at a time
// measured 2x slower (the [M, n, P] -> NCHW copy and OpenBLAS's split of a K=25 product).
int64_t ImagesPerChunk(const ConvShape& s, size_t elem) {
  constexpr int64_t kThinCols = 256, kTargetCols = 1024, kMaxColBytes = int64_t(8) << 20;
  const int64_t p = s.geom.OutSize();
  if (p >= kThinCols) return 1;
  int64_t nb = (kTargetCols + p - 1) / p;
  nb = std::min(nb, kMaxColBytes / std::max<int64_t>(1, s.geom.ColRows() * p * static_cast<int64_t>(elem)));
  return std::max<int64_t>(1, std::min(nb, s.batch));
}

// [M, n, P] (the GEMM's side-by-side layout) <-> [n, M, P] (NCHW): contiguous runs of P.
template <typename T>
void ToImages(const T* wide, int64_t m, int64_t n, int64_t p, T* images) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < m; ++r) std::memcpy(images + (i * m + r) * p, wide + (r * n + i) * p, p * sizeof(T));
}
template <typename T>
void ToWide(const T* images, int64_t m, int64_t n, int64_t p, T* wide) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < m; ++r) std::memcpy(wide + (r * n + i) * p, images + (i * m + r) * p, p * sizeof(T));
}

// f(image, first channel, end channel) over slices of the n*C (image, channel) pairs, split across the
// thread pool: im2col and col2im run outside BLAS, so they would otherwise use one core.
template <typename F>
void ForChannelSlices(const ConvGeometry& g, int64_t n, F f) {
  const int64_t c = g.channels, work = g.kernel_h * g.kernel_w * g.OutSize();
  ParallelFor(n * c, std::max<int64_t>(1, (int64_t(1) << 15) / work), [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t i = b / c, c0 = b % c, c1 = std::min(c, c0 + (e - b));
      f(i, c0, c1);
      b += c1 - c0;
    }
  });
}

// The geometry of channels [c0, c1) of an image.
ConvGeometry Channels(ConvGeometry g, int64_t c0, int64_t c1) {
  g.channels = c1 - c0;
  return g;
}

// The GEMM path. For a chunk of n images with ld = n*P columns and group g:
//   out'_g [Mg, ld] = W_g [Mg, Kg] @ col_g [Kg, ld]
//   dW_g [Mg, Kg] += dout'_g [Mg, ld] @ col_g^T
//   dcol_g [Kg, ld] = W_g^T @ dout'_g, then col2im per image.
// With several threads and at least one chunk per thread, each pool thread takes a contiguous run of
// chunks and makes single-threaded GEMM calls (its own column matrix, its own dW partial sum): the
// per-image GEMMs of a small image are too small for OpenBLAS to split well (ResNet-20's 16x16 32x32
// layer ran 2.4x faster this way). Otherwise OpenBLAS threads each GEMM and the pool splits im2col.
template <typename T>
class GemmConv {
 public:
  explicit GemmConv(const ConvShape& s)
      : s_(s), p_(s.geom.OutSize()), k_(s.geom.ColRows()), kg_(s.ColRowsPerGroup()), mg_(s.OutPerGroup()),
        image_(s.geom.ImageSize()), nb_(ImagesPerChunk(s, sizeof(T))), parts_(1) {
    const int64_t threads = ThreadPool::Instance().Size(), chunks = (s.batch + nb_ - 1) / std::max<int64_t>(1, nb_);
    if (threads > 1 && chunks >= threads) {
      // Equal chunks, a whole number per thread: 32 images of 8x8 go 16 + 16, not 16 + 16 + 0.
      const int64_t per_thread = (chunks + threads - 1) / threads;
      nb_ = (s.batch + threads * per_thread - 1) / (threads * per_thread);
      parts_ = threads;
    }
  }

  void Forward(const T* x, const T* w, T* out) const {
    ForParts([&](int64_t b0, int64_t b1, int) {
      for (int64_t c0 = b0; c0 < b1; c0 += nb_) ForwardChunk(x, w, c0, std::min(nb_, b1 - c0), out);
    });
  }

  // dx and dw may each be null (not wanted).
  void Backward(const T* x, const T* w, const T* dout, T* dx, T* dw) const {
    const int64_t wsize = s_.out_channels * kg_;
    // dW partial sums of parts 1.. (part 0 sums into dw), added up after the parts join.
    T* partial = dw && parts_ > 1 ? Scratch<T>(2, (parts_ - 1) * wsize) : nullptr;
    ForParts([&](int64_t b0, int64_t b1, int part) {
      T* dw_part = dw && part > 0 ? partial + (part - 1) * wsize : dw;
      if (dw_part && b0 == b1) std::fill(dw_part, dw_part + wsize, T(0));
      for (int64_t c0 = b0; c0 < b1; c0 += nb_)
        BackwardChunk(x, w, dout, c0, std::min(nb_, b1 - c0), c0 == b0, dx, dw_part);
    });
    if (partial)
      for (int64_t p = 0; p + 1 < parts_; ++p)
        for (int64_t i = 0; i < wsize; ++i) dw[i] += partial[p * wsize + i];
  }

 private:
  // f(first image, end image, part) for each part's run of whole chunks, the parts in parallel.
  template <typename F>
  void ForParts(F f) const {
    if (parts_ == 1) {
      f(0, s_.batch, 0);
      return;
    }
    blas::SingleThreadedScope single;
    const int64_t chunks = (s_.batch + nb_ - 1) / nb_;
    ParallelFor(parts_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part)
        f(std::min(s_.batch, chunks * part / parts_ * nb_), std::min(s_.batch, chunks * (part + 1) / parts_ * nb_),
          static_cast<int>(part));
    });
  }

  void ForwardChunk(const T* x, const T* w, int64_t b0, int64_t n, T* out) const {
    const int64_t m = s_.out_channels, ld = n * p_;
    const T* col = Columns(x + b0 * image_, n);
    T* dst = n == 1 ? out + b0 * m * p_ : Scratch<T>(1, m * ld);
    for (int64_t g = 0; g < s_.groups; ++g)
      blas::Gemm<T>(false, false, mg_, ld, kg_, T(1), w + g * mg_ * kg_, kg_, col + g * kg_ * ld, ld, T(0),
                    dst + g * mg_ * ld, ld);
    if (n > 1) ToImages(dst, m, n, p_, out + b0 * m * p_);
  }

  // `first`: dw is overwritten rather than added to.
  void BackwardChunk(const T* x, const T* w, const T* dout, int64_t b0, int64_t n, bool first, T* dx,
                     T* dw) const {
    const int64_t m = s_.out_channels, ld = n * p_;
    const T* dwide = dout + b0 * m * p_;
    if (n > 1) {
      T* t = Scratch<T>(1, m * ld);
      ToWide(dwide, m, n, p_, t);
      dwide = t;
    }
    if (dw) {
      const T* col = Columns(x + b0 * image_, n);
      for (int64_t g = 0; g < s_.groups; ++g)
        blas::Gemm<T>(false, true, mg_, kg_, ld, T(1), dwide + g * mg_ * ld, ld, col + g * kg_ * ld, ld,
                      first ? T(0) : T(1), dw + g * mg_ * kg_, kg_);
    }
    if (dx) {
      T* dxb = dx + b0 * image_;
      const bool direct = n == 1 && s_.geom.IsPointwise();
      T* dcol = direct ? dxb : Scratch<T>(0, k_ * ld);
      for (int64_t g = 0; g < s_.groups; ++g)
        blas::Gemm<T>(true, false, kg_, ld, mg_, T(1), w + g * mg_ * kg_, kg_, dwide + g * mg_ * ld, ld, T(0),
                      dcol + g * kg_ * ld, ld);
      if (!direct) {
        const ConvGeometry& g = s_.geom;
        const int64_t hw = g.height * g.width, rows = g.kernel_h * g.kernel_w;
        ForChannelSlices(g, n, [&](int64_t i, int64_t c0, int64_t c1) {
          Col2Im(Channels(g, c0, c1), dcol + c0 * rows * ld + i * p_, ld, dxb + i * image_ + c0 * hw);
        });
      }
    }
  }

  // The column matrix [K, n*P] of n consecutive images (the images themselves for one pointwise image).
  const T* Columns(const T* x, int64_t n) const {
    if (n == 1 && s_.geom.IsPointwise()) return x;
    T* col = Scratch<T>(0, k_ * n * p_);
    const ConvGeometry& g = s_.geom;
    const int64_t hw = g.height * g.width, rows = g.kernel_h * g.kernel_w, ld = n * p_;
    ForChannelSlices(g, n, [&](int64_t i, int64_t c0, int64_t c1) {
      Im2Col(Channels(g, c0, c1), x + i * image_ + c0 * hw, col + c0 * rows * ld + i * p_, ld);
    });
    return col;
  }

  const ConvShape& s_;
  const int64_t p_, k_, kg_, mg_, image_;
  int64_t nb_, parts_;
};

// Depthwise convolution (one input channel per group, `mult` output channels per input channel) as
// direct loops: for every output row and kernel tap, one contiguous run of output columns whose input
// lies inside the image (the padding is skipped, never read), so no column matrix is built.
template <typename T>
class DepthwiseConv {
 public:
  explicit DepthwiseConv(const ConvShape& s) : s_(s), g_(s.geom), mult_(s.out_channels / s.geom.channels) {
    hlo_.resize(g_.kernel_h);
    hhi_.resize(g_.kernel_h);
    wlo_.resize(g_.kernel_w);
    whi_.resize(g_.kernel_w);
    for (int64_t ki = 0; ki < g_.kernel_h; ++ki)
      ValidRange(g_.out_h, g_.height, g_.stride_h, ki * g_.dilation_h - g_.pad_h, &hlo_[ki], &hhi_[ki]);
    for (int64_t kj = 0; kj < g_.kernel_w; ++kj)
      ValidRange(g_.out_w, g_.width, g_.stride_w, kj * g_.dilation_w - g_.pad_w, &wlo_[kj], &whi_[kj]);
  }

  void Forward(const T* x, const T* w, T* out) const {
    const int64_t sw = g_.stride_w, p = g_.OutSize(), hw = g_.height * g_.width, m_all = s_.out_channels;
    ParallelFor(s_.batch * m_all, Grain(), [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t m = plane % m_all;
        const T* in = x + (plane / m_all * g_.channels + m / mult_) * hw;
        T* o = out + plane * p;
        std::fill(o, o + p, T(0));
        const T* wm = w + m * Taps();
        Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
          const T wv = wm[tap];
          const T* src = in + in_off;
          T* d = o + ho * g_.out_w + wlo;
          if (sw == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] += wv * src[i];
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] += wv * src[i * sw];
          }
        });
      }
    });
  }

  void Backward(const T* x, const T* w, const T* dout, T* dx, T* dw) const {
    const int64_t sw = g_.stride_w, p = g_.OutSize(), hw = g_.height * g_.width, c = g_.channels;
    const int64_t taps = Taps(), ow = g_.out_w;
    if (dx) {
      // By input plane, so the planes of its `mult` output channels add into it from one thread.
      ParallelFor(s_.batch * c, Grain() / mult_, [&](int64_t begin, int64_t end) {
        for (int64_t plane = begin; plane < end; ++plane) {
          T* gin = dx + plane * hw;
          std::fill(gin, gin + hw, T(0));
          for (int64_t m = plane % c * mult_; m < (plane % c + 1) * mult_; ++m) {
            const T* go = dout + (plane / c * s_.out_channels + m) * p;
            const T* wm = w + m * taps;
            Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
              const T wv = wm[tap];
              T* dst = gin + in_off;
              const T* src = go + ho * ow + wlo;
              if (sw == 1) {
                for (int64_t i = 0; i < n; ++i) dst[i] += wv * src[i];
              } else {
                for (int64_t i = 0; i < n; ++i) dst[i * sw] += wv * src[i];
              }
            });
          }
        }
      });
    }
    if (dw) {
      // Per tap, products are summed elementwise into a row of partial sums (vectorisable), reduced once.
      ParallelFor(s_.out_channels, Grain() / std::max<int64_t>(1, s_.batch), [&](int64_t begin, int64_t end) {
        T* acc = Scratch<T>(0, taps * ow);
        for (int64_t m = begin; m < end; ++m) {
          std::fill(acc, acc + taps * ow, T(0));
          for (int64_t b = 0; b < s_.batch; ++b) {
            const T* in = x + (b * c + m / mult_) * hw;
            const T* go = dout + (b * s_.out_channels + m) * p;
            Runs([&](int64_t tap, int64_t in_off, int64_t ho, int64_t wlo, int64_t n) {
              const T* src = in + in_off;
              const T* g = go + ho * ow + wlo;
              T* a = acc + tap * ow + wlo;
              if (sw == 1) {
                for (int64_t i = 0; i < n; ++i) a[i] += g[i] * src[i];
              } else {
                for (int64_t i = 0; i < n; ++i) a[i] += g[i] * src[i * sw];
              }
            });
          }
          for (int64_t t = 0; t < taps; ++t) {
            T sum = 0;
            for (int64_t i = 0; i < ow; ++i) sum += acc[t * ow + i];
            dw[m * taps + t] = sum;
          }
        }
      });
    }
  }

 private:
  int64_t Taps() const { return g_.kernel_h * g_.kernel_w; }
  // Output planes per thread slice: at least ~32K multiply-adds, so small convolutions stay serial.
  int64_t Grain() const { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(1, Taps() * g_.OutSize())); }

  // run(tap, input offset of the run's first element, output row, first output column, length) for every
  // (output row, tap) whose input row is inside the image.
  template <typename F>
  void Runs(F run) const {
    for (int64_t ho = 0; ho < g_.out_h; ++ho)
      for (int64_t ki = 0; ki < g_.kernel_h; ++ki) {
        if (ho < hlo_[ki] || ho >= hhi_[ki]) continue;
        const int64_t row = (ho * g_.stride_h + ki * g_.dilation_h - g_.pad_h) * g_.width;
        for (int64_t kj = 0; kj < g_.kernel_w; ++kj) {
          const int64_t n = whi_[kj] - wlo_[kj];
          if (n > 0)
            run(ki * g_.kernel_w + kj, row + wlo_[kj] * g_.stride_w + kj * g_.dilation_w - g_.pad_w, ho, wlo_[kj], n);
        }
      }
  }

  const ConvShape& s_;
  const ConvGeometry& g_;
  const int64_t mult_;
  std::vector<int64_t> hlo_, hhi_, wlo_, whi_;
};

template <typename T>
void ConvForwardKernel(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const ConvShape s = MakeShape(ctx, in.dims(), filter.dims());
  Tensor* out = ctx.Output("Output");
  out->Resize(DDim{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w});
  T* o = out->mutable_data<T>(ctx.place());
  if (s.Depthwise())
    DepthwiseConv<T>(s).Forward(in.data<T>(), filter.data<T>(), o);
  else
    GemmConv<T>(s).Forward(in.data<T>(), filter.data<T>(), o);
}

template <typename T>
void ConvGradKernel(const ExecutionContext& ctx) {
  const Tensor& in = ctx.Input("Input");
  const Tensor& filter = ctx.Input("Filter");
  const Tensor& dout = ctx.Input("Output@GRAD");
  const ConvShape s = MakeShape(ctx, in.dims(), filter.dims());
  const DDim out_dims{s.batch, s.out_channels, s.geom.out_h, s.geom.out_w};
  FL_ENFORCE(dout.dims() == out_dims, ctx.Type(), ": Output@GRAD '", ctx.InputName("Output@GRAD"), "' ",
             dout.dims(), " does not match the output dims ", out_dims);
  T* dx = nullptr;
  T* dw = nullptr;
  if (Tensor* t = ctx.OutputOrNull("Input@GRAD")) {
    t->Resize(in.dims());
    dx = t->mutable_data<T>(ctx.place());
  }
  if (Tensor* t = ctx.OutputOrNull("Filter@GRAD")) {
    t->Resize(filter.dims());
    dw = t->mutable_data<T>(ctx.place());
  }
  if (!dx && !dw) return;
  if (s.Depthwise())
    DepthwiseConv<T>(s).Backward(in.data<T>(), filter.data<T>(), dout.data<T>(), dx, dw);
  else
    GemmConv<T>(s).Backward(in.data<T>(), filter.data<T>(), dout.data<T>(), dx, dw);
}

void RegisterConv(OpBuilder& op, const std::string& type) {
  op.Doc(type + ": 2-D convolution of NCHW Input [N, C, H, W] with Filter [M, C/groups, kh, kw] giving Output "
                "[N, M, Ho, Wo], Ho = (H + 2*pad - (dilation*(kh-1) + 1)) / stride + 1 (likewise Wo). Channels "
                "split into `groups` independent convolutions.")
      .Input("Input", "input images [N, C, H, W]")
      .Input("Filter", "filters [M, C/groups, kh, kw]")
      .Output("Output", "output images [N, M, Ho, Wo]")
      .Attr("strides", std::vector<int32_t>{1, 1}, "[stride_h, stride_w]")
      .Attr("paddings", std::vector<int32_t>{0, 0}, "zero padding [pad_h, pad_w] on both sides")
      .Attr("dilations", std::vector<int32_t>{1, 1}, "kernel dilation [dilation_h, dilation_w]")
      .Attr<int32_t>("groups", 1, "number of channel groups (C and M divisible by it)")
      .Attr<bool>("use_cudnn", false, "accepted for Fluid compatibility; CPU kernels ignore it")
      .Attr<bool>("use_mkldnn", false, "accepted for Fluid compatibility; ignored")
      .Attr("data_format", "AnyLayout", "NCHW (or AnyLayout, meaning NCHW); no other layout is supported")
      .SetInferShape(ConvInferShape)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        ConvForwardKernel<typename decltype(tag)::type>(ctx);
      })
      .SetGradMaker([](GradOpMaker& g) {
        // The grad needs neither Output nor its buffer: only Input, Filter and Output@GRAD.
        OpDesc& op = g.NewOp(g.Forward().type() + "_grad");
        op.SetInput("Input", g.Input("Input"));
        op.SetInput("Filter", g.Input("Filter"));
        op.SetInput("Output@GRAD", g.OutputGrad("Output"));
        op.SetOutput("Input@GRAD", g.InputGrad("Input"));
        op.SetOutput("Filter@GRAD", g.InputGrad("Filter"));
      });
}

void RegisterConvGrad(OpBuilder& op, const std::string& type) {
  op.Doc(type + ": gradients of the convolution; Input@GRAD and Filter@GRAD are each optional.")
      .Input("Input", "forward Input")
      .Input("Filter", "forward Filter")
      .DispensableInput("Output", "forward Output (accepted for Fluid programs; unused)")
      .Input("Output@GRAD", "gradient of Output")
      .DispensableOutput("Input@GRAD", "gradient of Input")
      .DispensableOutput("Filter@GRAD", "gradient of Filter")
      .Attr("strides", std::vector<int32_t>{1, 1}, "as in the forward op")
      .Attr("paddings", std::vector<int32_t>{0, 0}, "as in the forward op")
      .Attr("dilations", std::vector<int32_t>{1, 1}, "as in the forward op")
      .Attr<int32_t>("groups", 1, "as in the forward op")
      .Attr<bool>("use_cudnn", false, "as in the forward op")
      .Attr<bool>("use_mkldnn", false, "as in the forward op")
      .Attr("data_format", "AnyLayout", "as in the forward op")
      .KernelDTypeFrom("Output@GRAD")
      .SetInferShape([](InferShapeContext& ctx) {
        if (ctx.HasOutput("Input@GRAD")) ctx.SetOutput("Input@GRAD", ctx.InputDim("Input"), ctx.InputDType("Input"));
        if (ctx.HasOutput("Filter@GRAD"))
          ctx.SetOutput("Filter@GRAD", ctx.InputDim("Filter"), ctx.InputDType("Filter"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        ConvGradKernel<typename decltype(tag)::type>(ctx);
      });
}

}  // namespace

FL_REGISTER_OP(conv2d, op) { RegisterConv(op, "conv2d"); }
FL_REGISTER_OP(conv2d_grad, op) { RegisterConvGrad(op, "conv2d_grad"); }
FL_REGISTER_OP(depthwise_conv2d, op) { RegisterConv(op, "depthwise_conv2d"); }
FL_REGISTER_OP(depthwise_conv2d_grad, op) { RegisterConvGrad(op, "depthwise_conv2d_grad"); }

}  // namespace fl
