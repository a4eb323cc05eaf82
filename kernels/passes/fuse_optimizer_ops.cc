// fuse_optimizer_ops (Fluid's BuildStrategy.fuse_all_optimizer_ops): the dense parameter updates of one optimizer
// kind (sgd, momentum, adam) with the same attributes, the same LearningRate variable and the same dtype become one
// multi-tensor op (fused_sgd, fused_momentum, fused_adam) that updates every parameter of the group in one
// loop over all their elements (adam's split over the pool, as its single op does).
//
// Fluid 1.8 instead coalesces the parameters and gradients into one contiguous buffer (coalesce_tensor) and runs
// one update over it. fluidlite keeps every parameter in its own buffer, because a parameter must stay a tensor of
// its own for the user's scope.find_var(p).get_tensor().set(...), fluid.save/load and the ops that resize or
// replace it; and on the bench models the whole update is under 0.5% of a step (resnet_small: 65 momentum ops,
// 0.26 ms of 58 ms), so what a contiguous buffer could add over one loop over the tensors is not worth that risk
// (docs/architecture.md, "Optimizer and aggregation fusion").
//
// Each fused op runs the single op's own element loop (helpers/optimizer_update.h) over each parameter's elements:
// updates are bit for bit those of the unfused ops. Not fused: sparse (SelectedRows) gradients, updates that are
// not in place (ParamOut another variable than Param), a parameter updated twice, and groups that some op between
// their members reads or writes (ReplaceOps refuses; the group is then split in halves and each tried again).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "../helpers/optimizer_update.h"
#include "op_context.h"
#include "pass.h"
#include "thread_pool.h"

namespace fl {

namespace {

// The slots of one optimizer kind: its per-parameter inputs (Param first), the outputs that are those inputs
// updated in place, its per-parameter one-element inputs, and the attributes its kernel reads.
struct UpdateKind {
  const char* op;
  const char* fused;
  std::vector<const char*> tensors;                           // per parameter, Param's shape
  std::vector<std::pair<const char*, const char*>> in_place;  // (output, input)
  std::vector<const char*> scalars;                           // per parameter, one element
  std::vector<const char*> attrs;
};

const std::vector<UpdateKind>& Kinds() {
  static const std::vector<UpdateKind> kinds = {
      {"sgd", "fused_sgd", {"Param", "Grad"}, {{"ParamOut", "Param"}}, {}, {}},
      {"momentum",
       "fused_momentum",
       {"Param", "Grad", "Velocity"},
       {{"ParamOut", "Param"}, {"VelocityOut", "Velocity"}},
       {},
       {"mu", "use_nesterov"}},
      {"adam",
       "fused_adam",
       {"Param", "Grad", "Moment1", "Moment2"},
       {{"ParamOut", "Param"}, {"Moment1Out", "Moment1"}, {"Moment2Out", "Moment2"}},
       {"Beta1Pow", "Beta2Pow"},
       {"beta1", "beta2", "epsilon", "lazy_mode"}},
  };
  return kinds;
}

const UpdateKind* KindOfFused(const std::string& fused) {
  for (auto& k : Kinds())
    if (fused == k.fused) return &k;
  return nullptr;
}

// The fused op's rules over its desc: every per-parameter slot lists the same number of variables, each output is
// its input's variable (the update is in place), and no parameter appears twice.
void CheckFused(const OpCheckContext& ctx) {
  const UpdateKind& k = *KindOfFused(ctx.Type());
  const auto& params = ctx.desc().Input("Param");
  const size_t n = params.size();
  auto same_count = [&](const char* slot, size_t got) {
    FL_ENFORCE(got == n, ctx.Type(), ": ", slot, " lists ", got, " variables, Param ", n, "; one per parameter");
  };
  for (const char* s : k.tensors) same_count(s, ctx.desc().Input(s).size());
  for (const char* s : k.scalars) same_count(s, ctx.desc().Input(s).size());
  for (auto& [out, in] : k.in_place) {
    const auto& o = ctx.desc().Output(out);
    const auto& i = ctx.desc().Input(in);
    same_count(out, o.size());
    for (size_t j = 0; j < n; ++j)
      FL_ENFORCE(o[j] == i[j], ctx.Type(), ": ", out, "[", j, "] '", o[j], "' must be ", in, "[", j, "] '", i[j],
                 "' itself (the fused update is in place)");
  }
  std::set<std::string> seen;
  for (auto& p : params) FL_ENFORCE(seen.insert(p).second, ctx.Type(), ": parameter '", p, "' is listed twice");
}

void InferFused(InferShapeContext& ctx) {
  const UpdateKind& k = *KindOfFused(ctx.Type());
  const int n = ctx.InputSize("Param");
  const DType dt = ctx.InputDType("Param");
  for (int i = 0; i < n; ++i) {
    const DType t = ctx.InputDType("Param", i);
    FL_ENFORCE(t == dt || t == DType::UNDEFINED || dt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Param", i),
               " must have the dtype of ", ctx.Describe("Param", 0), " (", DTypeName(dt), "), got ", DTypeName(t));
    for (size_t s = 1; s < k.tensors.size(); ++s) {
      FL_ENFORCE(ctx.InputKind(k.tensors[s], i) == VarKind::LOD_TENSOR, ctx.Type(), ": ", ctx.Describe(k.tensors[s], i),
                 " must be a dense LoDTensor, got ", VarKindName(ctx.InputKind(k.tensors[s], i)),
                 " (sparse gradients are updated by ", k.op, ")");
    }
    for (const char* s : k.scalars) {
      const DDim d = ctx.InputDim(s, i);
      FL_ENFORCE(d.numel() == 1 || d.numel() < 0, ctx.Type(), ": ", ctx.Describe(s, i),
                 " must hold exactly one element");
    }
    switch (k.tensors.size()) {  // InferUpdateShapes takes its slots as initializer lists
      case 2: InferUpdateShapes(ctx, {k.tensors[1]}, {{k.in_place[0].first, k.in_place[0].second}}, true, i); break;
      case 3:
        InferUpdateShapes(ctx, {k.tensors[1], k.tensors[2]},
                          {{k.in_place[0].first, k.in_place[0].second}, {k.in_place[1].first, k.in_place[1].second}},
                          true, i);
        break;
      default:
        InferUpdateShapes(ctx, {k.tensors[1], k.tensors[2], k.tensors[3]},
                          {{k.in_place[0].first, k.in_place[0].second},
                           {k.in_place[1].first, k.in_place[1].second},
                           {k.in_place[2].first, k.in_place[2].second}},
                          true, i);
    }
  }
}

// Runs update(i, begin, end) over elements [begin, end) of parameter i, for every element of every parameter.
// `parallel` (as adam's single op splits its loop): one parallel loop over their concatenation, each part a
// contiguous run of elements that may span parameters; else (sgd, momentum: their single ops are serial, and a
// split two-stream loop lost to one thread on the bench models, measured under load) one thread, in order.
template <typename F>
void ForEachParameterRange(const ExecutionContext& ctx, bool parallel, F&& update) {
  const int n = ctx.InputSize("Param");
  std::vector<int64_t> start(n + 1, 0);
  for (int i = 0; i < n; ++i) start[i + 1] = start[i] + ctx.Input("Param", i).numel();
  if (!parallel) {
    for (int i = 0; i < n; ++i) update(i, 0, start[i + 1] - start[i]);
    return;
  }
  ParallelFor(start[n], kMinParallelElements, [&](int64_t begin, int64_t end) {
    int i = static_cast<int>(std::upper_bound(start.begin(), start.end(), begin) - start.begin()) - 1;
    for (; i < n && start[i] < end; ++i) {
      const int64_t b = std::max(begin, start[i]) - start[i];
      const int64_t e = std::min(end, start[i + 1]) - start[i];
      if (b < e) update(i, b, e);
    }
  });
}

// The dense Grad of parameter i, with the sparse case named (InferShape refuses it; this is the run-time check of
// a variable that came to hold a SelectedRows after the program was prepared).
template <typename T>
const T* DenseGrad(const ExecutionContext& ctx, int i) {
  FL_ENFORCE(!ctx.InputRowsOrNull("Grad", i), ctx.Type(), ": Grad '", ctx.InputName("Grad", i),
             "' holds a SelectedRows (sparse gradient); only dense gradients are fused");
  const Tensor& g = ctx.Input("Grad", i);
  FL_ENFORCE(g.dims() == ctx.Input("Param", i).dims(), ctx.Type(), ": Grad '", ctx.InputName("Grad", i), "' ", g.dims(),
             " must have the shape of Param '", ctx.InputName("Param", i), "' ", ctx.Input("Param", i).dims());
  return g.data<T>();
}

// What the three fused ops share: slots and attributes from the kind, the check, InferShape.
OpBuilder& DeclareFused(OpBuilder& op, const UpdateKind& k, const std::string& doc) {
  op.Doc(doc);
  for (const char* s : k.tensors) op.DuplicableInput(s, std::string(k.op) + "'s " + s + ", one per parameter");
  for (const char* s : k.scalars) op.DuplicableInput(s, std::string(k.op) + "'s " + s + ", one per parameter");
  op.Input("LearningRate", "learning rate of every parameter, one element");
  for (auto& [out, in] : k.in_place) {
    op.DuplicableOutput(out, std::string(in) + " updated in place, one per parameter");
    op.Inplace(out, in);
  }
  op.Attr<std::vector<std::string>>("fused_ops", {}, "the op types this op replaced, one per parameter");
  return op.KernelDTypeFrom("Param").Check(CheckFused).SetInferShape(InferFused);
}

}  // namespace

FL_REGISTER_OP(fused_sgd, op) {
  DeclareFused(op, Kinds()[0],
               "sgd over many parameters in one op (fuse_optimizer_ops): ParamOut[i] = Param[i] - LearningRate * "
               "Grad[i], one loop over every parameter's elements; bit for bit the sgd ops it replaced.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const int n = ctx.InputSize("Param");
        std::vector<const T*> p(n), g(n);
        std::vector<T*> pout(n);
        for (int i = 0; i < n; ++i) {
          g[i] = DenseGrad<T>(ctx, i);
          p[i] = ctx.Input("Param", i).template data<T>();
          pout[i] = UpdateOutput<T>(ctx, "ParamOut", "Param", i);
        }
        ForEachParameterRange(ctx, false,
                              [&](int i, int64_t b, int64_t e) { SgdRange<T>(p[i], g[i], lr, pout[i], b, e); });
      });
}

FL_REGISTER_OP(fused_momentum, op) {
  DeclareFused(op, Kinds()[1],
               "momentum over many parameters in one op (fuse_optimizer_ops), one loop over every "
               "parameter's elements; bit for bit the momentum ops it replaced.")
      .Attr<float>("mu", 0.9f, "momentum")
      .Attr<bool>("use_nesterov", false, "Nesterov momentum")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T mu = static_cast<T>(ctx.Attr<float>("mu"));
        const bool nesterov = ctx.Attr<bool>("use_nesterov");
        const int n = ctx.InputSize("Param");
        std::vector<const T*> p(n), g(n), v(n);
        std::vector<T*> pout(n), vout(n);
        for (int i = 0; i < n; ++i) {
          g[i] = DenseGrad<T>(ctx, i);
          p[i] = ctx.Input("Param", i).template data<T>();
          v[i] = ctx.Input("Velocity", i).template data<T>();
          pout[i] = UpdateOutput<T>(ctx, "ParamOut", "Param", i);
          vout[i] = UpdateOutput<T>(ctx, "VelocityOut", "Velocity", i);
        }
        ForEachParameterRange(ctx, false, [&](int i, int64_t b, int64_t e) {
          MomentumRange<T>(p[i], g[i], v[i], mu, lr, nesterov, pout[i], vout[i], b, e);
        });
      });
}

FL_REGISTER_OP(fused_adam, op) {
  DeclareFused(op, Kinds()[2],
               "adam over many parameters in one op (fuse_optimizer_ops), each with its own Beta1Pow/Beta2Pow, one "
               "parallel loop over every parameter's elements; bit for bit the adam ops it replaced.")
      .Attr<float>("beta1", 0.9f, "exponential decay of the first moment")
      .Attr<float>("beta2", 0.999f, "exponential decay of the second moment")
      .Attr<float>("epsilon", 1e-8f, "numerical stability term")
      .Attr<bool>("lazy_mode", false, "adam's lazy_mode (no effect on the dense gradients this op takes)")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
        const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const int n = ctx.InputSize("Param");
        std::vector<const T*> g(n);
        std::vector<T*> p(n), m1(n), m2(n);
        std::vector<T> lr_t(n);
        for (int i = 0; i < n; ++i) {
          g[i] = DenseGrad<T>(ctx, i);
          lr_t[i] = AdamStepSize<T>(lr, ReadFloatScalarInput<T>(ctx, "Beta1Pow", i),
                                    ReadFloatScalarInput<T>(ctx, "Beta2Pow", i));
          p[i] = InPlaceOutput<T>(ctx, "ParamOut", "Param", i);
          m1[i] = InPlaceOutput<T>(ctx, "Moment1Out", "Moment1", i);
          m2[i] = InPlaceOutput<T>(ctx, "Moment2Out", "Moment2", i);
        }
        ForEachParameterRange(ctx, true, [&](int i, int64_t b, int64_t e) {
          AdamRange<T>(g[i], b1, b2, eps, lr_t[i], p[i], m1[i], m2[i], b, e);
        });
      });
}

namespace {

// An update op the pass can fuse: every slot one variable, updated in place, a dense gradient, a float parameter.
// Returns the group key (kind, LearningRate, dtype, the kernel's attributes) or "".
std::string GroupKey(const BlockDesc& block, const OpDesc& op, const UpdateKind& k) {
  auto one = [&](const std::vector<std::string>& args) { return args.size() == 1; };
  for (const char* s : k.tensors)
    if (!one(op.Input(s))) return "";
  for (const char* s : k.scalars)
    if (!one(op.Input(s))) return "";
  if (!one(op.Input("LearningRate"))) return "";
  for (auto& [out, in] : k.in_place)
    if (!one(op.Output(out)) || op.Output(out)[0] != op.Input(in)[0]) return "";
  const VarDesc* param = block.FindVarRecursive(op.Input("Param")[0]);
  const VarDesc* grad = block.FindVarRecursive(op.Input("Grad")[0]);
  if (!param || !grad || grad->kind() != VarKind::LOD_TENSOR || param->kind() != VarKind::LOD_TENSOR) return "";
  if (param->dtype() != DType::FP32 && param->dtype() != DType::FP64) return "";
  std::ostringstream key;
  key << k.op << "|" << op.Input("LearningRate")[0] << "|" << DTypeName(param->dtype());
  for (const char* a : k.attrs) {
    key << "|" << a << "=";
    if (!op.HasAttr(a)) continue;  // the default
    const Attribute& v = op.GetAttr(a);
    if (auto* f = std::get_if<float>(&v)) key << std::hexfloat << *f << std::defaultfloat;
    if (auto* b = std::get_if<bool>(&v)) key << *b;
  }
  return key.str();
}

// Replaces `group` (ops of `block`, in program order) by one fused op; when ReplaceOps refuses (an op between the
// members touches what they read or write), tries each half. Returns the number of fused ops made.
int FuseGroup(BlockDesc& block, const UpdateKind& k, const std::vector<OpDesc*>& group, PassResult& result) {
  if (group.size() < 2) return 0;
  std::vector<size_t> members;
  for (size_t i = 0, g = 0; i < block.OpSize() && g < group.size(); ++i)
    if (block.Op(i) == group[g]) members.push_back(i), ++g;
  OpDesc fused(k.fused);
  auto gather = [&](const char* slot, bool output) {
    std::vector<std::string> args;
    for (OpDesc* op : group) args.push_back(output ? op->Output(slot)[0] : op->Input(slot)[0]);
    return args;
  };
  for (const char* s : k.tensors) fused.SetInput(s, gather(s, false));
  for (const char* s : k.scalars) fused.SetInput(s, gather(s, false));
  fused.SetInput("LearningRate", group[0]->Input("LearningRate"));
  for (auto& io : k.in_place) fused.SetOutput(io.first, gather(io.first, true));
  for (const char* a : k.attrs)
    if (group[0]->HasAttr(a)) fused.SetAttr(a, group[0]->GetAttr(a));
  fused.SetAttr("fused_ops", std::vector<std::string>(group.size(), k.op));
  std::string line = std::string(k.fused) + ": " + std::to_string(group.size()) + " " + k.op + " ops (LearningRate " +
                     group[0]->Input("LearningRate")[0] + "):";
  for (auto& p : gather("Param", false)) line += " " + p;
  if (!ReplaceOps(block, members, fused)) {  // (the members are untouched)
    const size_t half = group.size() / 2;
    return FuseGroup(block, k, {group.begin() + half, group.end()}, result) +
           FuseGroup(block, k, {group.begin(), group.begin() + half}, result);
  }
  result.details.push_back(line);  // (ReplaceOps freed the members: `group` dangles from here)
  return 1;
}

void FuseOptimizerOps(ProgramDesc& program, const PassContext&, PassResult& result) {
  for (size_t b = 0; b < program.Size(); ++b) {
    BlockDesc& block = *program.Block(b);
    for (const UpdateKind& k : Kinds()) {
      std::map<std::string, std::vector<OpDesc*>> groups;  // key -> candidates in program order
      std::map<std::string, int> updates;                  // parameter -> update ops of this kind
      for (size_t i = 0; i < block.OpSize(); ++i)
        if (block.Op(i)->type() == k.op && !block.Op(i)->Input("Param").empty())
          ++updates[block.Op(i)->Input("Param")[0]];
      std::vector<std::string> order;
      for (size_t i = 0; i < block.OpSize(); ++i) {
        OpDesc* op = block.Op(i);
        if (op->type() != k.op) continue;
        const std::string key = GroupKey(block, *op, k);
        if (key.empty() || updates[op->Input("Param")[0]] != 1) continue;  // a parameter updated twice stays as is
        if (!groups.count(key)) order.push_back(key);
        groups[key].push_back(op);
      }
      for (auto& key : order) result.changes += FuseGroup(block, k, groups[key], result);
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_optimizer_ops, 900,
                 "the dense sgd/momentum/adam updates with one LearningRate and the same attributes -> one "
                 "fused_sgd/fused_momentum/fused_adam over all their parameters",
                 FuseOptimizerOps);

}  // namespace fl
