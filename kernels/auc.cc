// auc: streaming ROC AUC from histograms of the positive-class probability, kept in persistable int64 buffers
// (layers.auc). Each row's probability p goes to bucket uint32(p * num_thresholds) (in Predict's dtype) of the
// positive (label > 0) or negative (label == 0) histogram; negative labels are skipped. The AUC is the
// trapezoid area under the ROC curve drawn from the highest bucket down, over tot_pos * tot_neg (0 unless
// both are positive).
//
// slide_steps = 0: StatPos/StatNeg are one histogram [num_thresholds + 1] (any shape of that size), summed
// over every run. slide_steps = s > 0: s ring histograms, then their sum, then one slot holding the batch
// count: s * (num_thresholds + 1) + (num_thresholds + 1) + 1 elements. A run replaces ring entry
// count % s with this batch (subtracting the old entry from the sum first), so the AUC covers the last s
// batches, then increments the count in both buffers.
#include <cstring>

#include "op_context.h"

namespace fl {

namespace {

int64_t StatSize(int64_t num_thresholds, int64_t slide_steps) {
  return (1 + slide_steps) * (num_thresholds + 1) + (slide_steps > 0 ? 1 : 0);
}

void InferAuc(InferShapeContext& ctx) {
  const DDim p = ctx.InputDim("Predict");
  const DDim l = ctx.InputDim("Label");
  FL_ENFORCE(p.size() == 2 && (p[1] < 0 || p[1] == 1 || p[1] == 2), "auc: ", ctx.Describe("Predict"),
             " must be [N, 2] (probabilities of class 0 and 1) or [N, 1] (of class 1): only binary "
             "classification is supported");
  FL_ENFORCE((l.size() == 2 && (l[1] == 1 || l[1] < 0)) || l.size() == 1, "auc: ", ctx.Describe("Label"),
             " must be [N, 1] or [N]");
  FL_ENFORCE(p[0] < 0 || l[0] < 0 || p[0] == l[0], "auc: ", ctx.Describe("Predict"), " and ", ctx.Describe("Label"),
             " have different numbers of rows");
  const DType ld = ctx.InputDType("Label");
  FL_ENFORCE(ld == DType::INT32 || ld == DType::INT64 || ld == DType::UNDEFINED, "auc: Label '", ctx.InputName("Label"),
             "' must be int32 or int64, got ", DTypeName(ld));
  const int64_t want = StatSize(ctx.Attr<int32_t>("num_thresholds"), ctx.Attr<int32_t>("slide_steps"));
  for (const char* slot : {"StatPos", "StatNeg"}) {
    const DType d = ctx.InputDType(slot);
    FL_ENFORCE(d == DType::INT64 || d == DType::UNDEFINED, "auc: ", slot, " '", ctx.InputName(slot),
               "' must be int64, got ", DTypeName(d));
    const DDim s = ctx.InputDim(slot);
    if (ctx.IsRuntime() || (s.size() > 0 && s.numel() >= 0))
      FL_ENFORCE(s.numel() == want, "auc: ", ctx.Describe(slot), " must have ", want, " elements for num_thresholds ",
                 ctx.Attr<int32_t>("num_thresholds"), " and slide_steps ", ctx.Attr<int32_t>("slide_steps"),
                 " ((1 + slide_steps) * (num_thresholds + 1)",
                 ctx.Attr<int32_t>("slide_steps") > 0 ? " + 1 for the batch count)" : ")");
  }
  ctx.SetOutput("AUC", DDim{1}, DType::FP64);
  ctx.SetOutput("StatPosOut", ctx.InputDim("StatPos"), DType::INT64);
  ctx.SetOutput("StatNegOut", ctx.InputDim("StatNeg"), DType::INT64);
}

// StatXOut starts as StatX (the layer passes one variable for both; copied when they differ).
int64_t* StatOut(const ExecutionContext& ctx, const char* in, const char* out) {
  const Tensor& src = ctx.Input(in);
  Tensor* dst = ctx.Output(out);
  if (dst == &src) return dst->mutable_data<int64_t>(ctx.place());
  dst->Resize(src.dims());
  int64_t* d = dst->mutable_data<int64_t>(ctx.place());
  std::memcpy(d, src.data<int64_t>(), sizeof(int64_t) * src.numel());
  return d;
}

template <typename L>
int64_t LabelAt(const Tensor& t, int64_t i) {
  return static_cast<int64_t>(t.data<L>()[i]);
}

template <typename T>
void AucKernel(const ExecutionContext& ctx) {
  const Tensor& predict = ctx.Input("Predict");
  const Tensor& label = ctx.Input("Label");
  const int64_t nt = ctx.Attr<int32_t>("num_thresholds");
  const int64_t slide = ctx.Attr<int32_t>("slide_steps");
  const int64_t rows = predict.dims()[0], width = predict.dims()[1];
  const int64_t buckets = nt + 1;
  const T* p = predict.data<T>();
  // Every probability is checked before any bucket changes, so a bad batch leaves the state as it was.
  for (int64_t i = 0; i < rows; ++i) {
    const T v = p[i * width + width - 1];
    FL_ENFORCE(v >= T(0) && v <= T(1), "auc: Predict '", ctx.InputName("Predict"), "' row ", i,
               " has positive-class probability ", v, ", outside [0, 1]");
  }
  const bool int64_label = label.dtype() == DType::INT64;
  FL_ENFORCE(int64_label || label.dtype() == DType::INT32, "auc: Label '", ctx.InputName("Label"),
             "' must be int32 or int64, got ", DTypeName(label.dtype()));
  int64_t* pos = StatOut(ctx, "StatPos", "StatPosOut");
  int64_t* neg = StatOut(ctx, "StatNeg", "StatNegOut");
  int64_t* cur_pos = pos;
  int64_t* cur_neg = neg;
  if (slide > 0) {
    const int64_t count = pos[(slide + 1) * buckets];
    FL_ENFORCE(count >= 0, "auc: StatPos '", ctx.InputName("StatPos"), "' holds a negative batch count ", count);
    const int64_t begin = (count % slide) * buckets;
    cur_pos = pos + begin;
    cur_neg = neg + begin;
    int64_t* sum_pos = pos + slide * buckets;
    int64_t* sum_neg = neg + slide * buckets;
    for (int64_t b = 0; b < buckets; ++b) {
      sum_pos[b] -= cur_pos[b];
      sum_neg[b] -= cur_neg[b];
    }
    std::memset(cur_pos, 0, sizeof(int64_t) * buckets);
    std::memset(cur_neg, 0, sizeof(int64_t) * buckets);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const auto bin = static_cast<uint32_t>(p[i * width + width - 1] * static_cast<T>(nt));
    const int64_t l = int64_label ? LabelAt<int64_t>(label, i) : LabelAt<int32_t>(label, i);
    if (l > 0) ++cur_pos[bin];
    else if (l == 0) ++cur_neg[bin];
  }
  const int64_t* stat_pos = pos;
  const int64_t* stat_neg = neg;
  if (slide > 0) {
    int64_t* sum_pos = pos + slide * buckets;
    int64_t* sum_neg = neg + slide * buckets;
    for (int64_t b = 0; b < buckets; ++b) {
      sum_pos[b] += cur_pos[b];
      sum_neg[b] += cur_neg[b];
    }
    stat_pos = sum_pos;
    stat_neg = sum_neg;
  }
  double auc = 0.0, tot_pos = 0.0, tot_neg = 0.0;
  for (int64_t b = nt; b >= 0; --b) {
    const double prev_pos = tot_pos, prev_neg = tot_neg;
    tot_pos += static_cast<double>(stat_pos[b]);
    tot_neg += static_cast<double>(stat_neg[b]);
    auc += (tot_neg - prev_neg) * (tot_pos + prev_pos) / 2.0;
  }
  if (tot_pos > 0.0 && tot_neg > 0.0) auc = auc / tot_pos / tot_neg;
  *ctx.Alloc<double>("AUC") = auc;
  if (slide > 0) {
    ++pos[(slide + 1) * buckets];
    ++neg[(slide + 1) * buckets];
  }
}

}  // namespace

FL_REGISTER_OP(auc, op) {
  op.Doc(
        "AUC of the ROC curve from streaming histograms of the positive-class probability (StatPos/StatNeg, "
        "updated in place).")
      .Input("Predict", "probabilities [N, 2] (column 1: the positive class) or [N, 1]")
      .Input("Label", "labels [N, 1] or [N], int32/int64: > 0 positive, 0 negative, < 0 skipped")
      .Input("StatPos", "int64 histogram state of positives (see the op's file for the layout)")
      .Input("StatNeg", "int64 histogram state of negatives")
      .Output("AUC", "the AUC, float64 [1]")
      .Output("StatPosOut", "StatPos updated (usually StatPos itself)")
      .Output("StatNegOut", "StatNeg updated (usually StatNeg itself)")
      .Inplace("StatPosOut", "StatPos")
      .Inplace("StatNegOut", "StatNeg")
      .Attr("curve", "ROC", "'ROC' or 'PR'; accepted, and the ROC area is computed for both, as in Fluid")
      .OneOf({"ROC", "PR"})
      .Attr<int32_t>("num_thresholds", (2 << 12) - 1, "buckets - 1: probability p goes to uint(p * num_thresholds)")
      .Range(1, 1 << 24)
      .Attr<int32_t>("slide_steps", 1, "batches the AUC covers (0: every batch since the state was zeroed)")
      .Range(0, 1 << 16)
      .KernelDTypeFrom("Predict")
      .SetInferShape(InferAuc)
      .NoGradient()
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { AucKernel<typename decltype(tag)::type>(ctx); });
}

}  // namespace fl
