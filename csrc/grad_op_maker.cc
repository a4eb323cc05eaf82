#include "grad_op_maker.h"

#include <algorithm>

#include "op_context.h"

namespace fl {

GradOpMaker::GradOpMaker(const OpDesc& fwd, const std::set<std::string>& no_grad_set, std::vector<int> grad_blocks,
                         const std::map<std::string, std::string>* renames, std::string temp_prefix)
    : fwd_(fwd),
      info_(OpRegistry::Instance().Get(fwd.type())),
      no_grad_(no_grad_set),
      grad_blocks_(std::move(grad_blocks)),
      renames_(renames),
      temp_prefix_(temp_prefix.empty() ? fwd.type() + "_grad" : std::move(temp_prefix)) {}

std::string GradOpMaker::GradVar(const std::string& var) const {
  if (var == kEmptyVarName) return var;
  std::string g = GradName(var);
  if (renames_) {
    auto it = renames_->find(g);
    if (it != renames_->end()) return it->second;
  }
  return g;
}

std::vector<std::string> GradOpMaker::OutputGrad(const std::string& slot) const {
  std::vector<std::string> r;
  for (auto& n : fwd_.Output(slot)) r.push_back(GradVar(n));
  return r;
}

std::vector<std::string> GradOpMaker::InputGrad(const std::string& slot) const {
  std::vector<std::string> r;
  for (auto& n : fwd_.Input(slot)) {
    std::string g = GradVar(n);
    r.push_back(no_grad_.count(g) ? kEmptyVarName : g);
  }
  return r;
}

OpDesc& GradOpMaker::NewOp(const std::string& type, bool copy_attrs) {
  OpDesc& op = ops_.emplace_back(type);
  if (copy_attrs)
    for (auto& kv : fwd_.attrs())
      if (kv.first != "op_role" && kv.first != "op_role_var" && kv.first != "op_callstack")
        op.SetAttr(kv.first, kv.second);
  if (fwd_.HasAttr("op_callstack")) op.SetAttr("op_callstack", fwd_.GetAttr("op_callstack"));
  return op;
}

std::string GradOpMaker::Temp(const std::string& hint) {
  return Str(temp_prefix_, ".", hint, "_", temps_++, kGradSuffix);
}

std::string GradOpMaker::ZerosLike(const std::string& var) {
  std::string zeros = Temp("zeros");
  OpDesc& op = NewOp("fill_zeros_like", false);
  op.SetInput("X", {var});
  op.SetOutput("Out", {zeros});
  return zeros;
}

std::string FirstArg(const std::vector<std::string>& args) {
  return args.empty() || args[0] == kEmptyVarName ? "" : args[0];
}

// ------------------------------------------------------------------ GradOp clauses

// <type>_grad with what the clause reads, an X@GRAD output per differentiable input, and (for ops with a
// sub-block, as Fluid's recurrent and while makers do) sub_block pointing at the grad block.
void MakeDerivedGradOp(GradOpMaker& g) {
  const OpInfo& fwd = g.Info();
  const OpInfo& grad = OpRegistry::Instance().Get(fwd.grad_op);
  OpDesc& op = g.NewOp(grad.type);
  for (const std::string& r : grad.grad_reads) {
    if (std::find(grad.unread_reads.begin(), grad.unread_reads.end(), r) != grad.unread_reads.end()) continue;
    std::vector<std::string> args = fwd.FindInput(r)    ? g.Input(r)
                                    : fwd.FindOutput(r) ? g.Output(r)
                                                        : g.OutputGrad(SlotOfGrad(r));
    if (!args.empty()) op.SetInput(r, std::move(args));
  }
  for (const SlotSpec& out : grad.outputs) {
    auto args = g.InputGrad(SlotOfGrad(out.name));
    if (!args.empty()) op.SetOutput(out.name, std::move(args));
  }
  if (!g.GradBlocks().empty()) op.SetAttr("sub_block", BlockRef{g.GradBlocks()[0]});
}

void DefaultGradInferShape(InferShapeContext& ctx) {
  for (const auto& [out_slot, src_slot] : ctx.Info().grad_shape_sources) {
    const char* o = out_slot.c_str();
    const char* s = src_slot.c_str();
    const int n = ctx.OutputSize(o), m = ctx.InputSize(s);
    for (int i = 0; i < n; ++i) {
      const int j = m == n ? i : 0;  // a list takes its shapes entry by entry; a single source serves all
      if (!ctx.HasOutputAt(o, i) || !ctx.HasInputAt(s, j)) continue;
      ctx.SetOutput(o, ctx.InputDim(s, j), ctx.InputDType(s, j), i);
      ctx.ShareLoD(s, o, j, i);
    }
  }
}

// ------------------------------------------------------------------ gradients of grad ops

void LinearGradGrad(GradOpMaker& g) {
  const OpInfo& grad = g.Info();
  FL_ENFORCE(grad.forward != nullptr, "LinearGradGrad serves generated grad ops, not ", grad.type);
  const OpInfo& fwd = *grad.forward;
  bool wanted = false;
  for (const SlotSpec& out : fwd.outputs)
    if (grad.FindInput(GradName(out.name)) && !FirstArg(g.InputGrad(GradName(out.name))).empty()) wanted = true;
  if (!wanted) return;
  // The inputs first: zeros for a missing X@GRAD@GRAD are made before the op that reads them.
  VarNameMap inputs;
  for (const SlotSpec& in : fwd.inputs) {
    const std::vector<std::string>& xs = g.Input(in.name);  // what the grad op read of this input
    if (in.no_grad) {
      if (!xs.empty()) inputs.emplace_back(in.name, xs);
      continue;
    }
    std::vector<std::string> dd = g.OutputGrad(GradName(in.name));
    if (dd.empty()) dd.assign(xs.size(), kEmptyVarName);
    for (size_t i = 0; i < dd.size(); ++i) {
      if (dd[i] != kEmptyVarName) continue;
      FL_ENFORCE(i < xs.size(), grad.type, ": cannot make zeros for ", in.name, "[", i,
                 "]: the grad op does not read it");
      dd[i] = g.ZerosLike(xs[i]);
    }
    if (!dd.empty()) inputs.emplace_back(in.name, std::move(dd));
  }
  OpDesc& op = g.NewOp(fwd.type);
  for (auto& [slot, args] : inputs) op.SetInput(slot, args);
  for (const SlotSpec& out : fwd.outputs)
    if (grad.FindInput(GradName(out.name))) op.SetOutput(out.name, g.InputGrad(GradName(out.name)));
}

void BilinearGradGrad(GradOpMaker& g) {
  const OpInfo& grad = g.Info();
  FL_ENFORCE(grad.forward != nullptr, "BilinearGradGrad serves generated grad ops, not ", grad.type);
  const std::string& fwd = grad.forward->type;
  const std::string x = FirstArg(g.Input("X")), y = FirstArg(g.Input("Y")), dout = FirstArg(g.Input("Out@GRAD"));
  const std::string ddx = FirstArg(g.OutputGrad("X@GRAD")), ddy = FirstArg(g.OutputGrad("Y@GRAD"));
  auto emit = [&g](const std::string& type, const std::string& a, const std::string& b, const char* out_slot,
                   const std::string& dout_arg, const std::string& out) {
    OpDesc& op = g.NewOp(type);
    op.SetInput("X", {a});
    op.SetInput("Y", {b});
    if (!dout_arg.empty()) op.SetInput("Out@GRAD", {dout_arg});
    op.SetOutput(out_slot, {out});
  };
  if (const std::string d_dout = FirstArg(g.InputGrad("Out@GRAD")); !d_dout.empty() && !(ddx.empty() && ddy.empty())) {
    if (ddx.empty() || ddy.empty()) {
      emit(fwd, ddx.empty() ? x : ddx, ddx.empty() ? ddy : y, "Out", "", d_dout);
    } else {
      const std::string t1 = g.Temp("dx_term"), t2 = g.Temp("dy_term");
      emit(fwd, ddx, y, "Out", "", t1);
      emit(fwd, x, ddy, "Out", "", t2);
      OpDesc& sum = g.NewOp("sum", false);
      sum.SetInput("X", {t1, t2});
      sum.SetOutput("Out", {d_dout});
    }
  }
  if (const std::string dx = FirstArg(g.InputGrad("X")); !dx.empty() && !ddy.empty())
    emit(grad.type, x, ddy, "X@GRAD", dout, dx);
  if (const std::string dy = FirstArg(g.InputGrad("Y")); !dy.empty() && !ddx.empty())
    emit(grad.type, ddx, y, "Y@GRAD", dout, dy);
}

void ZeroGrad(GradOpMaker& g) {
  for (const SlotSpec& in : g.Info().inputs) {
    if (in.no_grad) continue;
    const auto& xs = g.Input(in.name);
    const auto dxs = g.InputGrad(in.name);
    for (size_t i = 0; i < xs.size(); ++i) {
      if (dxs[i] == kEmptyVarName) continue;
      OpDesc& op = g.NewOp("fill_zeros_like", false);
      op.SetInput("X", {xs[i]});
      op.SetOutput("Out", {dxs[i]});
    }
  }
}

}  // namespace fl
