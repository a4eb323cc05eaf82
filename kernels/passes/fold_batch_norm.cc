// fold_batch_norm (inference): a batch_norm with test semantics (is_test or use_global_stats) after conv2d /
// depthwise_conv2d or after mul, with or without a bias elementwise_add between them, is folded into the producer's
// weights and a bias:
//     conv(X, W) [+ b] -> batch_norm(scale, shift, mean, var)   ==>   conv(X, W') + b'
//     W'[m] = W[m] * a[m],  b' = b * a + (shift - mean * a),  a = scale / sqrt(var + epsilon)
// (m: the filter's output channel, dim 0 of a conv filter, dim 1 of mul's W). The folded weights are not computed
// here: the pass puts one batch_norm_fold op at the start of the block, which computes every W' and b' from the
// scope's tensors when the program runs and again whenever a source tensor's data_version() changes (parameters
// loaded after the program was prepared, a training program updating them between inference runs), and keeps them
// in the prepared program's kid scope (<W>@bn_folded, <b or batch_norm's Bias>@bn_folded), so the user's
// parameters are never written. fuse_fc / fuse_conv_bias_act then fuse the producer with the new bias add.
//
// Folded where: the producer's output (and the bias add's) is a temporary read only by the next op; batch_norm's
// SavedMean / SavedVariance are read by nothing, its MeanOut / VarianceOut are Mean / Variance themselves; every
// source tensor is persistable, written by no op of the program and fed or fetched by no run; NCHW. Training
// programs (backward or optimizer ops) are left alone.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "inference_pass_util.h"
#include "op_context.h"

namespace fl {
namespace {

using namespace inference_pass;

// ------------------------------------------------------------------ the batch_norm_fold op

struct FoldState {
  // Per folded pair: the data_version()s of the sources (W, bias or none, Scale, Bias, Mean, Variance) and of the
  // two outputs when they were last computed.
  using Versions = std::array<std::pair<const void*, uint64_t>, 8>;
  std::vector<Versions> versions;
};

template <typename T>
void FoldKernel(const ExecutionContext& ctx) {
  const int n = ctx.InputSize("Filter");
  const auto& axis = ctx.Attr<std::vector<int32_t>>("channel_axis");
  const auto& bias_of = ctx.Attr<std::vector<int32_t>>("bias_index");
  const auto& eps = ctx.Attr<std::vector<float>>("epsilon");
  // Every slot looked up once: the check below runs on every run, for every folded pair.
  const std::vector<const Tensor*> ws = ctx.MultiInput("Filter"), scales = ctx.MultiInput("Scale"),
                                   shifts = ctx.MultiInput("Shift"), means = ctx.MultiInput("Mean"),
                                   vars = ctx.MultiInput("Variance");
  const std::vector<const Tensor*> bs = ctx.HasInput("Bias") ? ctx.MultiInput("Bias") : std::vector<const Tensor*>{};
  const std::vector<Tensor*> wfs = ctx.MultiOutput("FoldedFilter"), bfs = ctx.MultiOutput("FoldedBias");
  FoldState& st = ctx.State<FoldState>();
  st.versions.resize(n);
  for (int i = 0; i < n; ++i) {
    const Tensor& w = *ws[i];
    const Tensor* b = bias_of[i] >= 0 ? bs[bias_of[i]] : nullptr;
    const Tensor *scale = scales[i], *shift = shifts[i], *mean = means[i], *var = vars[i];
    Tensor* wf = wfs[i];
    Tensor* bf = bfs[i];
    FoldState::Versions now = {w.data_version(),      b ? b->data_version() : std::pair<const void*, uint64_t>{},
                               scale->data_version(), shift->data_version(),
                               mean->data_version(),  var->data_version(),
                               wf->data_version(),    bf->data_version()};
    if (now == st.versions[i] && wf->IsInitialized() && bf->IsInitialized()) continue;  // still current
    const DDim& wd = w.dims();
    const int ax = axis[i];
    FL_ENFORCE(wd.size() > ax, "batch_norm_fold: Filter '", ctx.InputName("Filter", i), "' ", wd,
               " has no channel axis ", ax);
    const int64_t c = wd[ax];
    for (const Tensor* t : {scale, shift, mean, var})
      FL_ENFORCE(t->numel() == c, "batch_norm_fold: the batch norm parameters of Filter '", ctx.InputName("Filter", i),
                 "' ", wd, " must hold ", c, " values (its output channels), got ", t->dims());
    FL_ENFORCE(!b || b->numel() == c, "batch_norm_fold: Bias '", ctx.InputName("Bias", bias_of[i]), "' ", b->dims(),
               " must hold ", c, " values (the output channels of Filter '", ctx.InputName("Filter", i), "')");
    std::vector<T> a(c);
    const T *sc = scale->data<T>(), *sh = shift->data<T>(), *mu = mean->data<T>(), *v = var->data<T>();
    for (int64_t k = 0; k < c; ++k) a[k] = sc[k] * (T(1) / std::sqrt(v[k] + T(eps[i])));  // batch_norm's a
    wf->Resize(wd);
    T* wo = wf->mutable_data<T>(ctx.place());
    const T* wi = w.data<T>();
    const int64_t outer = wd.Product(0, ax), inner = wd.Product(ax + 1, wd.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t j = 0; j < inner; ++j) {
          const int64_t at = (o * c + k) * inner + j;
          wo[at] = wi[at] * a[k];
        }
    bf->Resize(DDim{c});
    T* bo = bf->mutable_data<T>(ctx.place());
    const T* bi = b ? b->data<T>() : nullptr;
    for (int64_t k = 0; k < c; ++k) bo[k] = (bi ? bi[k] * a[k] : T(0)) + (sh[k] - mu[k] * a[k]);
    now[6] = wf->data_version();
    now[7] = bf->data_version();
    st.versions[i] = now;
  }
}

// ------------------------------------------------------------------ the pass

struct Fold {
  std::string filter, bias, scale, shift, mean, var, folded_filter, folded_bias;
  int axis;
  float epsilon;
};

std::string FreshName(const BlockDesc& block, const std::string& base) {
  std::string name = base;
  for (int k = 1; block.FindVarRecursive(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

// A source tensor the fold op may read: persistable, written by no op, not fed or fetched.
bool IsFrozenParameter(const BlockDesc& block, const std::string& name, const VarUses& uses, const PassContext& ctx,
                       const std::vector<VarUses::Use>& allowed_writers = {}) {
  const VarDesc* v = block.FindVarRecursive(name);
  if (!v || !v->persistable() || ctx.protected_vars.count(name)) return false;
  for (auto& w : uses.Writers(name)) {
    bool ok = false;
    for (auto& a : allowed_writers) ok = ok || (a.block == w.block && a.op == w.op);
    if (!ok) return false;
  }
  return true;
}

void FoldBatchNorm(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  if (IsTrainingProgram(program)) return;
  BlockDesc& block = *program.Block(0);
  std::vector<Fold> folds;
  for (size_t i = 0; i < block.OpSize(); ++i) {
    OpDesc& bn = *block.Op(i);
    if (bn.type() != "batch_norm" ||
        !(AttrOr<bool>(bn, "is_test", false) || AttrOr<bool>(bn, "use_global_stats", false)))
      continue;
    if (AttrOr<std::string>(bn, "data_layout", "NCHW") == "NHWC") continue;
    const std::string x = Arg(bn, "X"), y = Arg(bn, "Y", false);
    Fold f;
    f.scale = Arg(bn, "Scale"), f.shift = Arg(bn, "Bias"), f.mean = Arg(bn, "Mean"), f.var = Arg(bn, "Variance");
    f.epsilon = AttrOr<float>(bn, "epsilon", 1e-5f);
    if (x.empty() || y.empty() || x == y || Arg(bn, "MeanOut", false) != f.mean ||
        Arg(bn, "VarianceOut", false) != f.var)
      continue;
    VarUses uses(program);
    bool saved_unread = true;
    for (const char* slot : {"SavedMean", "SavedVariance"}) {
      const std::string s = Arg(bn, slot, false);
      if (!s.empty() && (!uses.Readers(s).empty() || !IsRemovableTemporary(program, 0, s, uses, ctx)))
        saved_unread = false;
    }
    if (!saved_unread) continue;
    const VarUses::Use self{0, static_cast<int>(i)};
    bool frozen = true;
    for (auto& s : {f.scale, f.shift}) frozen = frozen && IsFrozenParameter(block, s, uses, ctx);
    for (auto& s : {f.mean, f.var}) frozen = frozen && IsFrozenParameter(block, s, uses, ctx, {self});
    if (!frozen) continue;
    // X's producer: conv / mul directly, or a bias add after one.
    if (SoleReader(program, 0, x, uses, ctx) != static_cast<int>(i) || uses.Writers(x).size() != 1) continue;
    int p = uses.Writers(x)[0].op;
    OpDesc* add = nullptr;
    if (block.Op(p)->type() == "elementwise_add") {
      add = block.Op(p);
      const std::string ax = Arg(*add, "X");
      f.bias = Arg(*add, "Y");
      if (ax.empty() || f.bias.empty() || uses.Writers(ax).size() != 1 || SoleReader(program, 0, ax, uses, ctx) != p)
        continue;
      p = uses.Writers(ax)[0].op;
    }
    OpDesc* prod = block.Op(p);
    const bool conv = prod->type() == "conv2d" || prod->type() == "depthwise_conv2d";
    if (!conv && !(prod->type() == "mul" && AttrOr<int32_t>(*prod, "y_num_col_dims", 1) == 1)) continue;
    if (conv && AttrOr<std::string>(*prod, "data_format", "AnyLayout") == "NHWC") continue;
    f.filter = Arg(*prod, conv ? "Filter" : "Y");
    const VarDesc* wv = f.filter.empty() ? nullptr : block.FindVarRecursive(f.filter);
    if (!wv || wv->shape().size() != (conv ? 4u : 2u) || !IsFrozenParameter(block, f.filter, uses, ctx)) continue;
    // The filter and the bias must serve this producer only (another op reading W would see W').
    if (uses.Readers(f.filter).size() != 1) continue;
    f.axis = conv ? 0 : 1;
    const int64_t c = wv->shape()[f.axis];
    // batch_norm normalises X's dim 1: the producer's output channels (conv: [N, M, H, W]; mul: a 2-D [N, C]).
    const VarDesc* xv = block.FindVarRecursive(x);
    if (!xv || xv->shape().size() < 2 || xv->shape()[1] != c || (!conv && xv->shape().size() != 2)) continue;
    if (add) {
      const VarDesc* bv = block.FindVarRecursive(f.bias);
      const int32_t axis = AttrOr<int32_t>(*add, "axis", -1);
      if (!bv || Numel(bv->shape()) != c || uses.Readers(f.bias).size() != 1 ||
          !IsFrozenParameter(block, f.bias, uses, ctx) || !(axis == 1 || (!conv && axis == -1)))
        continue;
    }
    // Rewrite: the producer reads W', the bias add (made if there was none) adds b' and writes batch_norm's Y.
    f.folded_filter = FreshName(block, f.filter + "@bn_folded");
    VarDesc* wf = block.Var(f.folded_filter);
    wf->set_dtype(wv->dtype());
    wf->set_shape(wv->shape());
    f.folded_bias = FreshName(block, (add ? f.bias : f.shift) + "@bn_folded");
    VarDesc* bf = block.Var(f.folded_bias);
    bf->set_dtype(wv->dtype());
    bf->set_shape({c});
    prod->SetInput(conv ? "Filter" : "Y", {f.folded_filter});
    std::vector<std::string> removed = {x};
    for (const char* slot : {"SavedMean", "SavedVariance"})
      if (!Arg(bn, slot, false).empty()) removed.push_back(Arg(bn, slot, false));
    std::string what = prod->type() + (add ? " + elementwise_add" : "") + " + batch_norm";
    if (add) {
      add->SetInput("Y", {f.folded_bias});
      add->SetOutput("Out", {y});
      block.RemoveOp(i, i + 1);
    } else {
      OpDesc* a = block.InsertOp(i + 1);  // right after batch_norm, which then goes: the add takes its place
      a->set_type("elementwise_add");
      a->SetInput("X", {x});
      a->SetInput("Y", {f.folded_bias});
      a->SetOutput("Out", {y});
      a->SetAttr("axis", int32_t(1));
      for (const char* inherited : {"op_callstack", "op_role", "op_namescope"})
        if (bn.HasAttr(inherited)) a->SetAttr(inherited, bn.GetAttr(inherited));
      removed = {};
      for (const char* slot : {"SavedMean", "SavedVariance"})
        if (!Arg(bn, slot, false).empty()) removed.push_back(Arg(bn, slot, false));
      block.RemoveOp(i, i + 1);
    }
    RemoveUnusedVars(program, 0, removed);
    ++result.changes;
    result.details.push_back("block 0: " + what + " -> " + (conv ? "conv" : "mul") + "(" + f.folded_filter +
                             ") + elementwise_add(" + f.folded_bias + ") -> " + y);
    folds.push_back(f);
    --i;
  }
  if (folds.empty()) return;
  OpDesc* op = block.InsertOp(0);
  op->set_type("batch_norm_fold");
  std::vector<std::string> filters, biases, scales, shifts, means, vars, wfs, bfs;
  std::vector<int32_t> axes, bias_index;
  std::vector<float> eps;
  for (auto& f : folds) {
    filters.push_back(f.filter);
    bias_index.push_back(f.bias.empty() ? -1 : static_cast<int32_t>(biases.size()));
    if (!f.bias.empty()) biases.push_back(f.bias);
    scales.push_back(f.scale), shifts.push_back(f.shift), means.push_back(f.mean), vars.push_back(f.var);
    wfs.push_back(f.folded_filter), bfs.push_back(f.folded_bias);
    axes.push_back(f.axis);
    eps.push_back(f.epsilon);
  }
  op->SetInput("Filter", filters);
  op->SetInput("Bias", biases);
  op->SetInput("Scale", scales);
  op->SetInput("Shift", shifts);
  op->SetInput("Mean", means);
  op->SetInput("Variance", vars);
  op->SetOutput("FoldedFilter", wfs);
  op->SetOutput("FoldedBias", bfs);
  op->SetAttr("channel_axis", axes);
  op->SetAttr("bias_index", bias_index);
  op->SetAttr("epsilon", eps);
  op->SetAttr("keep_outputs", true);
  op->SetAttr("op_role", int32_t(0));
}

}  // namespace

FL_REGISTER_OP(batch_norm_fold, op) {
  op.Doc(
        "batch_norm_fold: the weights of test-mode batch norms folded into their producers (made by the "
        "fold_batch_norm pass): FoldedFilter[i] = Filter[i] * a along channel_axis[i], FoldedBias[i] = Bias * a + "
        "Shift[i] - Mean[i] * a with a = Scale[i] / sqrt(Variance[i] + epsilon[i]). Computed again only when a "
        "source tensor's data changed since the last run (Tensor::data_version); the outputs stay between runs.")
      .DuplicableInput("Filter", "the producers' weights (conv filters [M, C/g, kh, kw] or mul's W [K, N])")
      .OptionalDuplicableInput("Bias", "the producers' biases that existed (see bias_index)")
      .DuplicableInput("Scale", "batch_norm's Scale, one per filter")
      .DuplicableInput("Shift", "batch_norm's Bias, one per filter")
      .DuplicableInput("Mean", "batch_norm's running mean, one per filter")
      .DuplicableInput("Variance", "batch_norm's running variance, one per filter")
      .DuplicableOutput("FoldedFilter", "the folded weights, one per filter")
      .DuplicableOutput("FoldedBias", "the folded biases [C], one per filter")
      .Attr("channel_axis", std::vector<int32_t>{}, "per filter: its output-channel dim (0 conv, 1 mul)")
      .Range(0, 1)
      .Attr("bias_index", std::vector<int32_t>{}, "per filter: its index in Bias, or -1 when it had no bias")
      .Min(-1)
      .Attr("epsilon", std::vector<float>{}, "per filter: batch_norm's epsilon")
      .Attr<bool>("keep_outputs", true, "the executor keeps the outputs between runs (a cache)")
      .Check([](const OpCheckContext& c) {
        const int n = c.InputSize("Filter");
        for (const char* slot : {"Scale", "Shift", "Mean", "Variance"})
          FL_ENFORCE(c.InputSize(slot) == n, "batch_norm_fold: ", slot, " has ", c.InputSize(slot),
                     " variables, Filter ", n);
        for (const char* slot : {"FoldedFilter", "FoldedBias"})
          FL_ENFORCE(c.OutputSize(slot) == n, "batch_norm_fold: ", slot, " has ", c.OutputSize(slot),
                     " variables, Filter ", n);
        FL_ENFORCE(c.Attr<std::vector<int32_t>>("channel_axis").size() == size_t(n) &&
                       c.Attr<std::vector<int32_t>>("bias_index").size() == size_t(n) &&
                       c.Attr<std::vector<float>>("epsilon").size() == size_t(n),
                   "batch_norm_fold: channel_axis, bias_index and epsilon need one value per Filter (", n, ")");
        const int biases = std::max(0, c.InputSize("Bias"));
        for (int32_t b : c.Attr<std::vector<int32_t>>("bias_index"))
          FL_ENFORCE(b < biases, "batch_norm_fold: bias_index ", b, " is out of range for ", biases, " Bias");
      })
      .SetInferShape([](InferShapeContext& ctx) {
        // At run time the kernel sizes its outputs when it computes them and leaves them as they are otherwise:
        // shape inference over every folded pair on every run would cost more than the check itself.
        if (ctx.IsRuntime()) return;
        const auto& axis = ctx.Attr<std::vector<int32_t>>("channel_axis");
        for (int i = 0; i < ctx.InputSize("Filter"); ++i) {
          const DDim w = ctx.InputDim("Filter", i);
          FL_ENFORCE(axis[i] < w.size(), "batch_norm_fold: ", ctx.Describe("Filter", i), " has no channel axis ",
                     axis[i]);
          ctx.SetOutput("FoldedFilter", w, ctx.InputDType("Filter", i), i);
          ctx.SetOutput("FoldedBias", DDim{w[axis[i]]}, ctx.InputDType("Filter", i), i);
        }
      })
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { FoldKernel<typename decltype(tag)::type>(ctx); });
}

FL_REGISTER_PASS(fold_batch_norm, 100,
                 "test-mode batch_norm after conv2d / mul (+ bias) -> folded weights and a bias add (inference)",
                 FoldBatchNorm);

}  // namespace fl
