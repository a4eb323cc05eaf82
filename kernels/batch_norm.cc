// batch_norm: per-channel normalisation with learned scale/bias and running statistics (Fluid 1.x), and
// its grad.
//
// Training: mean and biased variance over all axes but the channel; Y = (X - mean) / sqrt(var + eps) *
// Scale + Bias; MeanOut = Mean * momentum + mean * (1 - momentum) and VarianceOut likewise with the
// biased batch variance (Fluid 1.x's CPU kernel does the same); SavedMean / SavedVariance hold the batch
// mean and 1 / sqrt(var + eps) for the grad. is_test or use_global_stats: the running Mean / Variance
// normalise instead, are left unchanged, and are what SavedMean / SavedVariance hold (so the grad reads
// one pair of inputs in both modes).
//
// X is viewed as [outer, C, inner]: NCHW gives [N, C, H*W], NHWC gives [N*H*W, C, 1]. Each direction is
// two passes over the data: per-channel sums, then one fused multiply-add per element. Sums run in
// float lanes over one contiguous block and are added up in double per block; the forward sums X minus
// the channel's first element, so the variance does not cancel catastrophically for large means.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "helpers/activation.h"
#include "helpers/moments.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

struct ChannelView {
  int64_t outer = 0, C = 0, inner = 0;
  int64_t count() const { return outer * inner; }  // elements per channel
};

bool IsNHWC(const std::string& layout) { return layout == "NHWC"; }

ChannelView ViewOf(const DDim& x, bool nhwc) {
  const int r = x.size();
  if (nhwc) return ChannelView{x.Product(0, r - 1), x[r - 1], 1};
  return ChannelView{x[0], x[1], x.Product(2, r)};
}

// Per-channel sums over the view (see RunSums); k holds one shift per channel; with kReluMask, g is read through
// relu's output `mask` as relu_grad would have written it (fused_batch_norm_act_grad).
template <bool kGrad, typename T, bool kReluMask = false>
void ChannelSums(const ChannelView& v, const T* x, const T* g, const T* k, double* s1, double* s2,
                 const T* mask = nullptr) {
  std::fill(s1, s1 + v.C, 0.0);
  std::fill(s2, s2 + v.C, 0.0);
  if (v.inner > 1) {
    // Channels split across the thread pool; each channel sums its runs in the same order either way.
    ParallelFor(v.C, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, v.count())),
                [&](int64_t c0, int64_t c1) {
                  for (int64_t o = 0; o < v.outer; ++o)
                    for (int64_t c = c0; c < c1; ++c) {
                      const int64_t off = (o * v.C + c) * v.inner;
                      RunSums<kGrad, T, kReluMask>(x + off, kGrad ? g + off : nullptr, v.inner, k[c], s1[c], s2[c],
                                                   kReluMask ? mask + off : nullptr);
                    }
                });
    return;
  }
  // inner == 1: rows of C channels; vectorise across channels, flushing float sums to double in blocks.
  constexpr int64_t kRowsPerFlush = 256;
  std::vector<T> a1(v.C), a2(v.C);
  for (int64_t r0 = 0; r0 < v.outer; r0 += kRowsPerFlush) {
    std::fill(a1.begin(), a1.end(), T(0));
    std::fill(a2.begin(), a2.end(), T(0));
    const int64_t r1 = std::min(v.outer, r0 + kRowsPerFlush);
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * v.C;
      const T* gr = kGrad ? g + r * v.C : nullptr;
      const T* mr = kReluMask ? mask + r * v.C : nullptr;
      for (int64_t c = 0; c < v.C; ++c) {
        const T d = xr[c] - k[c];
        const T u = kGrad ? (kReluMask ? (mr[c] > T(0) ? gr[c] : T(0)) : gr[c]) : d;
        a1[c] += u;
        a2[c] += u * d;
      }
    }
    for (int64_t c = 0; c < v.C; ++c) s1[c] += a1[c], s2[c] += a2[c];
  }
}

// out = x * a[c] + b[c] (+ g * e[c] when g is given) for rows [o0, o1) of the view's outer dim; with kReluMask, g is
// read as mask > 0 ? g : 0 (see ChannelSums).
template <typename T, bool kReluMask = false>
void ChannelAffineRows(const ChannelView& v, const T* x, const T* a, const T* b, const T* g, const T* e, T* out,
                       int64_t o0, int64_t o1, const T* mask = nullptr) {
  // Both values are loaded whatever the mask says: a load under the select (mask > 0 ? g[i] : 0) keeps GCC from
  // vectorising the loop (2.5x slower).
  auto grad = [&](const T* gp, const T* mp, int64_t i) {
    const T gv = gp[i];
    if constexpr (kReluMask) {
      const T mv = mp[i];
      return mv > T(0) ? gv : T(0);
    }
    return gv;
  };
  for (int64_t o = o0; o < o1; ++o) {
    if (v.inner > 1) {
      for (int64_t c = 0; c < v.C; ++c) {
        const int64_t off = (o * v.C + c) * v.inner;
        const T* xp = x + off;
        T* op = out + off;
        const T ac = a[c], bc = b[c];
        if (g) {
          const T* gp = g + off;
          const T* mp = kReluMask ? mask + off : nullptr;
          const T ec = e[c];
          for (int64_t i = 0; i < v.inner; ++i) op[i] = xp[i] * ac + bc + grad(gp, mp, i) * ec;
        } else {
          for (int64_t i = 0; i < v.inner; ++i) op[i] = xp[i] * ac + bc;
        }
      }
    } else {
      const int64_t off = o * v.C;
      const T* xp = x + off;
      T* op = out + off;
      if (g) {
        const T* gp = g + off;
        const T* mp = kReluMask ? mask + off : nullptr;
        for (int64_t c = 0; c < v.C; ++c) op[c] = xp[c] * a[c] + b[c] + grad(gp, mp, c) * e[c];
      } else {
        for (int64_t c = 0; c < v.C; ++c) op[c] = xp[c] * a[c] + b[c];
      }
    }
  }
}

// The same over the whole view, rows split across the thread pool; with `act` (fused_batch_norm_act) each row is
// activated right after it is written, while it is in cache (the same select as the relu op).
template <typename T, bool kReluMask = false>
void ChannelAffine(const ChannelView& v, const T* x, const T* a, const T* b, const T* g, const T* e, T* out,
                   Activation act = Activation::kIdentity, const T* mask = nullptr) {
  const int64_t row = v.C * v.inner;
  ParallelFor(v.outer, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, row)),
              [&](int64_t o0, int64_t o1) {
                if (act == Activation::kIdentity)
                  return ChannelAffineRows<T, kReluMask>(v, x, a, b, g, e, out, o0, o1, mask);
                for (int64_t o = o0; o < o1; ++o) {
                  ChannelAffineRows(v, x, a, b, g, e, out, o, o + 1);
                  Activate(act, out + o * row, out + o * row, row);
                }
              });
}

void InferBatchNorm(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const std::string& layout = ctx.Attr<std::string>("data_layout");  // one of the declared layouts
  FL_ENFORCE(x.size() >= 2 && x.size() <= 5, "batch_norm: ", ctx.Describe("X"), " must have rank 2 to 5, got ",
             x.size());
  const int64_t C = IsNHWC(layout) ? x[x.size() - 1] : x[1];
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
    const DDim d = ctx.InputDim(slot);
    FL_ENFORCE(d.size() == 1 && (C < 0 || d[0] < 0 || d[0] == C), "batch_norm: ", ctx.Describe(slot),
               " must be [C] = [", C, "] for ", ctx.Describe("X"), " (data_layout ", layout, ")");
    FL_ENFORCE(ctx.InputDType(slot) == ctx.InputDType("X"), "batch_norm: ", ctx.Describe(slot), " has dtype ",
               DTypeName(ctx.InputDType(slot)), " but X has ", DTypeName(ctx.InputDType("X")));
  }
  const float momentum = ctx.Attr<float>("momentum"), eps = ctx.Attr<float>("epsilon");
  FL_ENFORCE(eps >= 0.0f, "batch_norm: epsilon ", eps, " must be >= 0 for ", ctx.Describe("X"));
  FL_ENFORCE(momentum >= 0.0f && momentum <= 1.0f, "batch_norm: momentum ", momentum, " must be in [0, 1] for ",
             ctx.Describe("X"));
  const DType dt = ctx.InputDType("X");
  ctx.SetOutput("Y", x, dt);
  ctx.ShareLoD("X", "Y");
  for (const char* slot : {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"})
    if (ctx.HasOutput(slot)) ctx.SetOutput(slot, DDim{C}, dt);
}

// `act`: fused_batch_norm_act's activation of Y (identity for batch_norm).
template <typename T>
void BatchNormForward(const ExecutionContext& ctx, Activation act = Activation::kIdentity) {
  const Tensor& x = ctx.Input("X");
  const bool nhwc = IsNHWC(ctx.Attr<std::string>("data_layout"));
  const ChannelView v = ViewOf(x.dims(), nhwc);
  const int64_t C = v.C;
  const T eps = ctx.Attr<float>("epsilon");
  const T momentum = ctx.Attr<float>("momentum");
  const bool global = ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats");
  const T* scale = ctx.Input("Scale").data<T>();
  const T* bias = ctx.Input("Bias").data<T>();
  const T* run_mean = ctx.Input("Mean").data<T>();
  const T* run_var = ctx.Input("Variance").data<T>();
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"})
    FL_ENFORCE(ctx.Input(slot).numel() == C, "batch_norm: ", slot, " '", ctx.InputName(slot), "' ",
               ctx.Input(slot).dims(), " must hold C = ", C, " values for X ", x.dims());

  std::vector<T> mean(C), inv_std(C), a(C), b(C);
  if (global) {
    for (int64_t c = 0; c < C; ++c) mean[c] = run_mean[c], inv_std[c] = T(1) / std::sqrt(run_var[c] + eps);
  } else {
    FL_ENFORCE(v.count() > 0, "batch_norm: X '", ctx.InputName("X"), "' ", x.dims(),
               " has no elements per channel to compute batch statistics from");
    const T* xp = x.data<T>();
    std::vector<T> shift(C);
    for (int64_t c = 0; c < C; ++c) shift[c] = xp[c * v.inner];  // the channel's first element
    std::vector<double> s1(C), s2(C);
    ChannelSums<false, T>(v, xp, nullptr, shift.data(), s1.data(), s2.data());
    const double m = static_cast<double>(v.count());
    std::vector<T> batch_var(C);
    for (int64_t c = 0; c < C; ++c) {
      const double dm = s1[c] / m;
      batch_var[c] = static_cast<T>(std::max(s2[c] / m - dm * dm, 0.0));
      mean[c] = static_cast<T>(shift[c] + dm);
      inv_std[c] = T(1) / std::sqrt(batch_var[c] + eps);
    }
    // Running statistics (MeanOut / VarianceOut are normally Mean / Variance themselves).
    T* mean_out = ctx.Output("MeanOut")->mutable_data<T>(DDim{C}, ctx.place());
    T* var_out = ctx.Output("VarianceOut")->mutable_data<T>(DDim{C}, ctx.place());
    for (int64_t c = 0; c < C; ++c) {
      const T rm = run_mean[c], rv = run_var[c];
      mean_out[c] = rm * momentum + mean[c] * (T(1) - momentum);
      var_out[c] = rv * momentum + batch_var[c] * (T(1) - momentum);
    }
  }
  if (global) {  // running stats unchanged; copy only if MeanOut / VarianceOut are other variables
    for (auto [in, out] : {std::pair{"Mean", "MeanOut"}, std::pair{"Variance", "VarianceOut"}}) {
      Tensor* o = ctx.OutputOrNull(out);
      const Tensor& i = ctx.Input(in);
      if (!o || o->holder() == i.holder()) continue;
      std::copy(i.data<T>(), i.data<T>() + C, o->mutable_data<T>(DDim{C}, ctx.place()));
    }
  }
  if (Tensor* t = ctx.OutputOrNull("SavedMean"))
    std::copy(mean.begin(), mean.end(), t->mutable_data<T>(DDim{C}, ctx.place()));
  if (Tensor* t = ctx.OutputOrNull("SavedVariance"))
    std::copy(inv_std.begin(), inv_std.end(), t->mutable_data<T>(DDim{C}, ctx.place()));

  for (int64_t c = 0; c < C; ++c) {
    a[c] = scale[c] * inv_std[c];
    b[c] = bias[c] - mean[c] * a[c];
  }
  const T* xp = x.data<T>();
  Tensor* y = ctx.Output("Y");
  T* yp = y->mutable_data<T>(x.dims(), ctx.place());  // may be X itself (in_place)
  ChannelAffine<T>(v, xp, a.data(), b.data(), nullptr, nullptr, yp, act);
}

// Gradients with m = elements per channel, xhat = (x - mean) * inv:
//   dBias = sum dy; dScale = sum dy * xhat;
//   training: dx = scale * inv * (dy - dBias / m - xhat * dScale / m); global stats: dx = scale * inv * dy.
// `gp`: Y@GRAD's values; with kReluMask (fused_batch_norm_act_grad) read through relu's output `mask` as relu_grad
// would have written them: the same values, without that tensor.
template <typename T, bool kReluMask = false>
void BatchNormBackwardFrom(const ExecutionContext& ctx, const T* gp, const T* mask = nullptr) {
  const Tensor& x = ctx.Input("X");
  const ChannelView v = ViewOf(x.dims(), IsNHWC(ctx.Attr<std::string>("data_layout")));
  const int64_t C = v.C;
  const bool global = ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats");
  const T* scale = ctx.Input("Scale").data<T>();
  const T* mean = ctx.Input("SavedMean").data<T>();
  const T* inv = ctx.Input("SavedVariance").data<T>();
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  Tensor* dscale = ctx.OutputOrNull("Scale@GRAD");
  Tensor* dbias = ctx.OutputOrNull("Bias@GRAD");
  const T* xp = x.data<T>();

  std::vector<double> s1(C, 0.0), s2(C, 0.0);
  if (dscale || dbias || !global) ChannelSums<true, T, kReluMask>(v, xp, gp, mean, s1.data(), s2.data(), mask);
  if (dbias) {
    T* p = dbias->mutable_data<T>(DDim{C}, ctx.place());
    for (int64_t c = 0; c < C; ++c) p[c] = static_cast<T>(s1[c]);
  }
  if (dscale) {
    T* p = dscale->mutable_data<T>(DDim{C}, ctx.place());
    for (int64_t c = 0; c < C; ++c) p[c] = static_cast<T>(s2[c] * inv[c]);
  }
  if (!dx) return;
  // dx = e * dy + a * x + b per channel.
  std::vector<T> a(C), b(C), e(C);
  const double m = static_cast<double>(v.count());
  for (int64_t c = 0; c < C; ++c) {
    e[c] = scale[c] * inv[c];
    if (global) {
      a[c] = b[c] = T(0);
    } else {
      const double ec = e[c], ic = inv[c];
      const double ac = -ec * ic * ic * s2[c] / m;  // -(scale * inv) * inv * dScale / m, dScale = s2 * inv
      a[c] = static_cast<T>(ac);
      b[c] = static_cast<T>(-ec * s1[c] / m - ac * mean[c]);
    }
  }
  T* dxp = dx->mutable_data<T>(x.dims(), ctx.place());
  ChannelAffine<T, kReluMask>(v, xp, a.data(), b.data(), gp, e.data(), dxp, Activation::kIdentity, mask);
}

template <typename T>
void BatchNormBackward(const ExecutionContext& ctx, Activation act = Activation::kIdentity) {
  const Tensor& dy = ctx.Input("Y@GRAD");
  FL_ENFORCE(dy.dims() == ctx.Input("X").dims(), ctx.Type(), ": Y@GRAD '", ctx.InputName("Y@GRAD"), "' ", dy.dims(),
             " must match X ", ctx.Input("X").dims());
  if (act == Activation::kIdentity) return BatchNormBackwardFrom<T>(ctx, dy.data<T>());
  FL_ENFORCE(act == Activation::kRelu, ctx.Type(), ": act_type must be relu");
  const Tensor& y = ctx.Input("Y");
  FL_ENFORCE(y.dims() == dy.dims(), ctx.Type(), ": Y '", ctx.InputName("Y"), "' ", y.dims(),
             " must have the shape of Y@GRAD '", ctx.InputName("Y@GRAD"), "' ", dy.dims());
  BatchNormBackwardFrom<T, true>(ctx, dy.data<T>(), y.data<T>());
}

// The slots and attributes batch_norm and fused_batch_norm_act share.
OpBuilder& DeclareBatchNorm(OpBuilder& op) {
  return op.Input("X", "input [N, C, ...] (NCHW) or [N, ..., C] (NHWC)")
      .Input("Scale", "per-channel scale [C]")
      .Input("Bias", "per-channel bias [C]")
      .Input("Mean", "running mean [C]")
      .Input("Variance", "running variance [C]")
      .Output("Y", "normalised output, X's shape")
      .Output("MeanOut", "updated running mean (the Mean variable itself)")
      .Output("VarianceOut", "updated running variance (the Variance variable itself)")
      .DispensableOutput("SavedMean", "mean used for normalising (batch mean in training)")
      .DispensableOutput("SavedVariance", "1 / sqrt(var + epsilon) used for normalising")
      .Inplace("MeanOut", "Mean")
      .Inplace("VarianceOut", "Variance")
      .NonDifferentiable({"Mean", "Variance"})
      .Attr<float>("momentum", 0.9f, "running stats: new = old * momentum + batch * (1 - momentum)")
      .Attr<float>("epsilon", 1e-5f, "added to the variance before the square root")
      .Attr<bool>("is_test", false, "normalise with the running Mean / Variance and leave them unchanged")
      .Attr("data_layout", "NCHW", "NCHW (channel axis 1) or NHWC (channel axis last)")
      .OneOf({"NCHW", "NHWC", "AnyLayout"})
      .Attr<bool>("use_global_stats", false, "like is_test for the normalisation, also while training")
      .SetInferShape(InferBatchNorm);
}

}  // namespace

FL_REGISTER_OP(batch_norm, op) {
  op.Doc("Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel, with batch or running statistics.");
  DeclareBatchNorm(op)
      .Inplace("Y", "X")  // layers.batch_norm(in_place=True)
      .Attr<bool>("fuse_with_relu", false, "accepted for compatibility (Fluid's MKL-DNN kernel only; no effect)")
      .Attr<bool>("use_mkldnn", false, "accepted for compatibility (no effect)")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { BatchNormForward<typename decltype(tag)::type>(ctx); });
  op.GradOp({"X", "Scale", "SavedMean", "SavedVariance", "Y@GRAD"})
      .Doc("Gradients of batch_norm for X, Scale and Bias from SavedMean / SavedVariance.")
      .ShapeLike("Bias", "Scale")
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { BatchNormBackward<typename decltype(tag)::type>(ctx); });
}

// Fluid 1.8's fused_batch_norm_act (made by the fuse_bn_act pass, kernels/passes/fuse_bn_act.cc): batch_norm with
// act_type applied to Y in the same pass over the data, and its gradient without the activation's gradient tensor.
// Bit for bit batch_norm followed by relu (and relu_grad followed by batch_norm_grad). No ReserveSpace output
// (cuDNN's workspace in Fluid).
FL_REGISTER_OP(fused_batch_norm_act, op) {
  op.Doc(
      "Y = act((X - mean) / sqrt(var + epsilon) * Scale + Bias) per channel: batch_norm and its activation in one "
      "op (fuse_bn_act).");
  DeclareBatchNorm(op)
      .Attr("act_type", "relu", "the activation applied to batch_norm's output")
      .OneOf({"relu"})
      .Attr<std::vector<std::string>>("fused_ops", {}, "the op types this op replaced")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        BatchNormForward<typename decltype(tag)::type>(ctx, ActivationByName(ctx.Attr<std::string>("act_type")));
      });
  op.GradOp({"X", "Scale", "SavedMean", "SavedVariance", "Y", "Y@GRAD"})
      .Doc("Gradients of fused_batch_norm_act for X, Scale and Bias: act's derivative taken from Y.")
      .ShapeLike("Bias", "Scale")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        BatchNormBackward<typename decltype(tag)::type>(ctx, ActivationByName(ctx.Attr<std::string>("act_type")));
      });
}

}  // namespace fl
