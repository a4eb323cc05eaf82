// nce: noise-contrastive estimation (layers.nce, word2vec). For each row n of Input the op scores its
// num_true labels and num_neg_samples negative classes drawn from a sampler q (uniform, log-uniform or a
// custom distribution given as alias tables), with logits s = <Input[n], Weight[c]> + Bias[c]:
//   o = sigmoid(s), b = q(c) * num_neg_samples,
//   Cost[n] = SampleWeight[n] * (sum_true -log(o / (o + b)) + sum_neg -log(b / (o + b))).
// SampleLabels holds the classes (labels first), SampleLogits their o. custom_neg_classes fixes the
// negatives (the same for every row), which makes the op deterministic for tests.
//
// Sampling: the op keeps its own engine across runs (per prepared op), seeded once from attr seed, or from
// std::random_device when seed is 0. So a fixed seed gives the same sequence of negatives in every process,
// and different negatives at each step (Fluid re-seeds on every run and draws the same ones each step).
// is_sparse is accepted; the Weight and Bias gradients are dense tensors.
#include <cmath>
#include <random>
#include <vector>

#include "helpers/random.h"
#include "helpers/same_dims.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

enum Sampler { kUniform = 0, kLogUniform = 1, kCustomDist = 2 };

// Reads element i of a float32 or float64 tensor.
double ReadProb(const Tensor& t, int64_t i) {
  return t.dtype() == DType::FP64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}

// The sampler of one run: q(c) and draws.
class NceSampler {
 public:
  NceSampler(const ExecutionContext& ctx, int64_t classes) : ctx_(ctx), classes_(classes) {
    kind_ = ctx.Attr<int32_t>("sampler");
    log_range_ = std::log(static_cast<double>(classes) + 1.0);
    if (kind_ == kCustomDist) {
      probs_ = &ctx.Input("CustomDistProbs");
      for (const char* slot : {"CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs"}) {
        const Tensor& t = ctx.Input(slot);
        FL_ENFORCE(t.numel() == classes, "nce: ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " must hold ",
                   classes, " values (num_total_classes)");
      }
    }
  }
  double Probability(int64_t c) const {
    switch (kind_) {
      case kLogUniform: return std::log((c + 2.0) / (c + 1.0)) / log_range_;
      case kCustomDist: return ReadProb(*probs_, c);
      default: return 1.0 / static_cast<double>(classes_);
    }
  }
  int64_t Sample(std::mt19937& e) const {
    const double u = Uniform01<double>(e);
    if (kind_ == kLogUniform) {
      const int64_t v = static_cast<int64_t>(std::exp(u * log_range_)) - 1;
      return std::min<int64_t>(std::max<int64_t>(v, 0), classes_ - 1);
    }
    const int64_t k = std::min<int64_t>(static_cast<int64_t>(u * static_cast<double>(classes_)), classes_ - 1);
    if (kind_ != kCustomDist) return k;
    // Walker's alias method: keep k with probability AliasProbs[k], else take Alias[k].
    const Tensor& alias = ctx_.Input("CustomDistAlias");
    const double keep = ReadProb(ctx_.Input("CustomDistAliasProbs"), k);
    if (Uniform01<double>(e) < keep) return k;
    const int64_t a = alias.dtype() == DType::INT64 ? alias.data<int64_t>()[k] : alias.data<int32_t>()[k];
    FL_ENFORCE(a >= 0 && a < classes_, "nce: CustomDistAlias '", ctx_.InputName("CustomDistAlias"), "' holds ", a,
               " at ", k, ", out of range [0, ", classes_, ")");
    return a;
  }

 private:
  const ExecutionContext& ctx_;
  int64_t classes_;
  int kind_;
  double log_range_;
  const Tensor* probs_ = nullptr;
};

// The engine an nce op keeps across runs.
struct NceState {
  std::unique_ptr<std::mt19937> engine;
};

std::mt19937& NceEngine(const ExecutionContext& ctx) {
  NceState& st = ctx.State<NceState>();
  if (!st.engine) {
    const int seed = ctx.Attr<int32_t>("seed");
    if (seed != 0) {
      st.engine = std::make_unique<std::mt19937>(static_cast<uint32_t>(seed));
    } else {
      std::random_device rd;
      std::seed_seq seq{rd(), rd(), rd(), rd()};
      st.engine = std::make_unique<std::mt19937>(seq);
    }
  }
  return *st.engine;
}

struct NceDims {
  int64_t rows, dim, classes, num_true, num_neg;
};

NceDims Dims(const ExecutionContext& ctx) {
  const DDim& x = ctx.Input("Input").dims();
  const DDim& l = ctx.Input("Label").dims();
  return NceDims{x[0], x[1], ctx.Input("Weight").dims()[0], l.size() == 2 ? l[1] : 1,
                 ctx.Attr<int32_t>("num_neg_samples")};
}

}  // namespace

FL_REGISTER_OP(nce, op) {
  op.Doc("Cost = the noise-contrastive estimation loss of each row against its labels and sampled negatives.")
      .Input("Input", "features [N, D]")
      .Input("Label", "int64 true classes [N, num_true] (or [N])")
      .Input("Weight", "class embeddings [num_total_classes, D]")
      .DispensableInput("Bias", "class biases [num_total_classes, 1]")
      .DispensableInput("SampleWeight", "per-row weights [N, 1] (default 1)")
      .DispensableInput("CustomDistProbs", "sampler 2: q(c), [num_total_classes]")
      .DispensableInput("CustomDistAlias", "sampler 2: alias table, int32 [num_total_classes]")
      .DispensableInput("CustomDistAliasProbs", "sampler 2: alias keep probabilities [num_total_classes]")
      .Output("Cost", "the loss per row [N, 1]")
      .Output("SampleLogits", "sigmoid of the sampled logits [N, num_true + num_neg_samples]")
      .Output("SampleLabels", "the sampled classes, labels first, int64 [N, num_true + num_neg_samples]")
      .NonDifferentiable({"Label", "SampleWeight", "CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs"})
      .RequiredAttr<int32_t>("num_total_classes", 1, "the number of classes")
      .Min(1)
      .Attr<int32_t>("num_neg_samples", 10, "negative classes sampled per row")
      .Min(1)
      .Attr<int32_t>("sampler", 0, "0: uniform, 1: log-uniform (Zipf), 2: custom distribution")
      .Range(0, 2)
      .Attr<int32_t>("seed", 0, "seed of the sampler's engine (kept across runs); 0: std::random_device")
      .Attr<bool>("is_sparse", false, "accepted for Fluid compatibility; gradients are dense")
      .Attr<std::vector<int32_t>>("custom_neg_classes", {},
                                  "fixed negative classes for every row (tests); size num_neg_samples")
      .Check([](const OpCheckContext& ctx) {
        const auto& neg = ctx.Attr<std::vector<int32_t>>("custom_neg_classes");
        const int num_neg = ctx.Attr<int32_t>("num_neg_samples");
        FL_ENFORCE(neg.empty() || static_cast<int>(neg.size()) == num_neg, "nce: custom_neg_classes has ", neg.size(),
                   " classes but num_neg_samples is ", num_neg);
        const int classes = ctx.Attr<int32_t>("num_total_classes");
        for (int c : neg)
          FL_ENFORCE(c >= 0 && c < classes, "nce: custom_neg_classes holds ", c, ", out of range [0, ", classes,
                     ") (num_total_classes)");
        if (ctx.Attr<int32_t>("sampler") == kCustomDist)
          for (const char* slot : {"CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs"})
            FL_ENFORCE(ctx.InputSize(slot) != 0, "nce: sampler 2 (custom_dist) needs input ", slot);
      })
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceRank(ctx, "Input", 2, -1, " ([N, D])");
        const DDim x = ctx.InputDim("Input"), l = ctx.InputDim("Label"), w = ctx.InputDim("Weight");
        FL_ENFORCE((l.size() == 1 || l.size() == 2) && (x[0] < 0 || l[0] < 0 || l[0] == x[0]),
                   "nce: ", ctx.Describe("Label"), " must be [N, num_true] with N the rows of ", ctx.Describe("Input"));
        const DType lt = ctx.InputDType("Label");
        FL_ENFORCE(lt == DType::INT64 || lt == DType::UNDEFINED, "nce: ", ctx.Describe("Label"), " must be int64, got ",
                   DTypeName(lt));
        const int64_t classes = ctx.Attr<int32_t>("num_total_classes");
        FL_ENFORCE(w.size() == 2 && (w[0] < 0 || w[0] == classes) && (w[1] < 0 || x[1] < 0 || w[1] == x[1]),
                   "nce: ", ctx.Describe("Weight"), " must be [num_total_classes=", classes,
                   ", D] with D the width of ", ctx.Describe("Input"));
        ctx.EnforceSameDType("Input", "Weight");
        if (ctx.HasInput("Bias")) {
          const DDim b = ctx.InputDim("Bias");
          FL_ENFORCE(b.numel() < 0 || b.numel() == classes, "nce: ", ctx.Describe("Bias"), " must hold ", classes,
                     " values ([num_total_classes, 1])");
          ctx.EnforceSameDType("Input", "Bias");
        }
        if (ctx.HasInput("SampleWeight")) {
          const DDim s = ctx.InputDim("SampleWeight");
          FL_ENFORCE(x[0] < 0 || s.numel() < 0 || s.numel() == x[0], "nce: ", ctx.Describe("SampleWeight"),
                     " must hold one weight per row of ", ctx.Describe("Input"));
        }
        const int64_t num_true = l.size() == 2 ? l[1] : 1;
        const int64_t cols = num_true < 0 ? -1 : num_true + ctx.Attr<int32_t>("num_neg_samples");
        ctx.SetOutput("Cost", DDim{x[0], 1}, ctx.InputDType("Input"));
        ctx.SetOutput("SampleLogits", DDim{x[0], cols}, ctx.InputDType("Input"));
        ctx.SetOutput("SampleLabels", DDim{x[0], cols}, DType::INT64);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const NceDims d = Dims(ctx);
        const NceSampler sampler(ctx, d.classes);
        const int64_t cols = d.num_true + d.num_neg;
        const T* x = ctx.Input("Input").data<T>();
        const T* w = ctx.Input("Weight").data<T>();
        const T* bias = ctx.HasInput("Bias") ? ctx.Input("Bias").data<T>() : nullptr;
        const Tensor* sw = ctx.InputOrNull("SampleWeight");
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        int64_t* labels = ctx.Alloc<int64_t>("SampleLabels");
        T* logits = ctx.Alloc<T>("SampleLogits");
        T* cost = ctx.Alloc<T>("Cost");
        const auto& custom = ctx.Attr<std::vector<int32_t>>("custom_neg_classes");
        for (int64_t n = 0; n < d.rows; ++n)
          for (int64_t j = 0; j < d.num_true; ++j) {
            const int64_t c = label[n * d.num_true + j];
            FL_ENFORCE(c >= 0 && c < d.classes, "nce: Label '", ctx.InputName("Label"), "' holds ", c, " at row ", n,
                       ", out of range [0, ", d.classes, ") (num_total_classes)");
            labels[n * cols + j] = c;
          }
        if (custom.empty()) {
          std::mt19937& e = NceEngine(ctx);
          for (int64_t n = 0; n < d.rows; ++n)
            for (int64_t j = d.num_true; j < cols; ++j) labels[n * cols + j] = sampler.Sample(e);
        } else {
          for (int64_t n = 0; n < d.rows; ++n)
            for (int64_t j = d.num_true; j < cols; ++j) labels[n * cols + j] = custom[j - d.num_true];
        }
        for (int64_t n = 0; n < d.rows; ++n) {
          T total = 0;
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t c = labels[n * cols + j];
            T s = bias ? bias[c] : T(0);
            for (int64_t k = 0; k < d.dim; ++k) s += x[n * d.dim + k] * w[c * d.dim + k];
            const T o = T(1) / (T(1) + std::exp(-s));
            logits[n * cols + j] = o;
            const T b = static_cast<T>(sampler.Probability(c) * static_cast<double>(d.num_neg));
            total += j < d.num_true ? -std::log(o / (o + b)) : -std::log(b / (o + b));
          }
          cost[n] = sw ? total * static_cast<T>(ReadProb(*sw, n)) : total;
        }
      });
  op.GradOp({"Input", "Label", "Weight", "Bias", "SampleWeight", "CustomDistProbs", "CustomDistAlias",
             "CustomDistAliasProbs", "SampleLogits", "SampleLabels", "Cost@GRAD"})
      .Optional({"Bias", "SampleWeight", "CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs"})
      .Doc(
          "Gradients of nce for Input, Weight and Bias from the saved samples: d/ds = b (o - 1) / (o + b) for a "
          "label, o (1 - o) / (o + b) for a negative, times SampleWeight and Cost@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const NceDims d = Dims(ctx);
        const NceSampler sampler(ctx, d.classes);
        const Tensor& lt = ctx.Input("SampleLabels");
        const int64_t cols = lt.dims()[1];
        FL_ENFORCE(lt.dims()[0] == d.rows && cols == d.num_true + d.num_neg, "nce_grad: SampleLabels '",
                   ctx.InputName("SampleLabels"), "' ", lt.dims(), " does not match Input ", ctx.Input("Input").dims());
        const Tensor& gt = ctx.Input("Cost@GRAD");
        FL_ENFORCE(gt.numel() == d.rows, "nce_grad: Cost@GRAD '", ctx.InputName("Cost@GRAD"), "' ", gt.dims(),
                   " must hold one value per row");
        const int64_t* labels = lt.data<int64_t>();
        const T* o = ctx.Input("SampleLogits").data<T>();
        const T* g = gt.data<T>();
        const T* x = ctx.Input("Input").data<T>();
        const T* w = ctx.Input("Weight").data<T>();
        const Tensor* sw = ctx.InputOrNull("SampleWeight");
        T* dx = ZeroedOutputOrNull<T>(ctx, "Input@GRAD");
        T* dw = ZeroedOutputOrNull<T>(ctx, "Weight@GRAD");
        T* db = ZeroedOutputOrNull<T>(ctx, "Bias@GRAD");
        for (int64_t n = 0; n < d.rows; ++n) {
          const T rw = g[n] * (sw ? static_cast<T>(ReadProb(*sw, n)) : T(1));
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t c = labels[n * cols + j];
            FL_ENFORCE(c >= 0 && c < d.classes, "nce_grad: SampleLabels holds ", c, ", out of range [0, ", d.classes,
                       ")");
            const T on = o[n * cols + j];
            const T b = static_cast<T>(sampler.Probability(c) * static_cast<double>(d.num_neg));
            const T gs = rw * (j < d.num_true ? b * (on - T(1)) / (on + b) : on * (T(1) - on) / (on + b));
            if (db) db[c] += gs;
            for (int64_t k = 0; k < d.dim; ++k) {
              if (dx) dx[n * d.dim + k] += gs * w[c * d.dim + k];
              if (dw) dw[c * d.dim + k] += gs * x[n * d.dim + k];
            }
          }
        }
      });
}

}  // namespace fl
