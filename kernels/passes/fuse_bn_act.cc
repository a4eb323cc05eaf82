// fuse_bn_act (Fluid's BuildStrategy.fuse_bn_act_ops): batch_norm followed by relu becomes Fluid 1.8's
// fused_batch_norm_act (kernels/batch_norm.cc), which applies relu to each part of Y while it is in cache; and in
// the backward, relu_grad followed by batch_norm_grad becomes fused_batch_norm_act_grad, which reads relu's
// derivative off the fused op's output instead of a Y@GRAD tensor. Bit for bit the unfused ops (the same selects
// and the same sums).
//
// When it fires: batch_norm's Y is a temporary (IsRemovableTemporary) read only by the relu (batch_norm_grad does
// not read Y); the relu's gradient, if it is there, is a relu_grad of that relu's output whose X@GRAD is a temporary
// read only by batch_norm_grad of the same batch_norm (a Y with other readers has its gradient summed: nothing is
// fused in the backward then, and the forward fusion alone keeps the program's meaning, relu_grad reading the fused
// op's output).
#include <string>
#include <vector>

#include "pass.h"

namespace fl {

namespace {

const std::string& One(const OpDesc& op, const std::string& slot, bool output) {
  static const std::string none;
  const auto& args = output ? op.Output(slot) : op.Input(slot);
  return args.size() == 1 ? args[0] : none;
}

int FindOp(const BlockDesc& block, const OpDesc* op) {
  for (size_t i = 0; i < block.OpSize(); ++i)
    if (block.Op(i) == op) return static_cast<int>(i);
  return -1;
}

// batch_norm_grad of `bn` (same X, SavedMean, SavedVariance) reading `y_grad`, written by a relu_grad of `out`;
// both in block b. Null when the backward is not that shape.
struct Backward {
  OpDesc* relu_grad = nullptr;
  OpDesc* bn_grad = nullptr;
};

Backward FindBackward(const ProgramDesc& program, int b, const OpDesc& bn, const std::string& out, const VarUses& uses,
                      const PassContext& ctx) {
  const BlockDesc& block = *program.Block(b);
  Backward none, found;
  for (auto& r : uses.Readers(out)) {
    if (r.block != b) continue;
    OpDesc* op = block.Op(r.op);
    if (op->type() != "relu_grad" || One(*op, "Out", false) != out) continue;
    const std::string& dy = One(*op, "X@GRAD", true);
    if (dy.empty() || !IsRemovableTemporary(program, b, dy, uses, ctx) || uses.Writers(dy).size() != 1 ||
        uses.Readers(dy).size() != 1)
      return none;
    OpDesc* g = block.Op(uses.Readers(dy)[0].op);
    if (uses.Readers(dy)[0].block != b || g->type() != "batch_norm_grad" || One(*g, "Y@GRAD", false) != dy) return none;
    for (const char* s : {"X", "Scale"})
      if (One(*g, s, false) != One(bn, s, false)) return none;
    if (One(*g, "SavedMean", false) != One(bn, "SavedMean", true) ||
        One(*g, "SavedVariance", false) != One(bn, "SavedVariance", true))
      return none;
    if (found.relu_grad) return none;  // two relu_grads of one output: leave it
    found = {op, g};
  }
  return found;
}

void FuseBnAct(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  for (size_t bi = 0; bi < program.Size(); ++bi) {
    const int b = static_cast<int>(bi);
    BlockDesc& block = *program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      OpDesc* bn = block.Op(i);
      if (bn->type() != "batch_norm") continue;
      const std::string y = One(*bn, "Y", true);
      if (y.empty() || y == One(*bn, "X", false) || One(*bn, "SavedMean", true).empty() ||
          One(*bn, "SavedVariance", true).empty())
        continue;
      VarUses uses(program);
      if (!IsRemovableTemporary(program, b, y, uses, ctx) || uses.Readers(y).size() != 1 || uses.Writers(y).size() != 1)
        continue;
      const auto reader = uses.Readers(y)[0];
      if (reader.block != b) continue;
      OpDesc* relu = block.Op(reader.op);
      if (relu->type() != "relu" || One(*relu, "X", false) != y) continue;
      const std::string out = One(*relu, "Out", true);
      if (out.empty() || out == y) continue;
      const Backward bw = FindBackward(program, b, *bn, out, uses, ctx);

      const std::vector<std::string> fused_ops = {"batch_norm", "relu"};
      OpDesc fused("fused_batch_norm_act");
      for (auto& [slot, args] : bn->inputs()) fused.SetInput(slot, args);
      for (auto& [slot, args] : bn->outputs()) fused.SetOutput(slot, args);
      fused.SetOutput("Y", {out});
      for (const char* a : {"momentum", "epsilon", "is_test", "data_layout", "use_global_stats"})
        if (bn->HasAttr(a)) fused.SetAttr(a, bn->GetAttr(a));
      fused.SetAttr("act_type", std::string("relu"));
      fused.SetAttr("fused_ops", fused_ops);
      OpDesc fused_grad("fused_batch_norm_act_grad");
      if (bw.bn_grad) {
        for (auto& [slot, args] : bw.bn_grad->inputs()) fused_grad.SetInput(slot, args);
        for (auto& [slot, args] : bw.bn_grad->outputs()) fused_grad.SetOutput(slot, args);
        fused_grad.SetInput("Y", {out});
        fused_grad.SetInput("Y@GRAD", bw.relu_grad->Input("Out@GRAD"));
        for (auto& [name, value] : fused.attrs()) fused_grad.SetAttr(name, value);
        fused_grad.SetAttr("fused_ops", std::vector<std::string>{"relu_grad", "batch_norm_grad"});
        for (const char* a : {"op_role", "op_callstack"})
          if (bw.bn_grad->HasAttr(a)) fused_grad.SetAttr(a, bw.bn_grad->GetAttr(a));
      }
      const std::string line = "batch_norm -> " + y + " -> relu -> " + out;
      if (!ReplaceOps(block, {i, static_cast<size_t>(reader.op)}, fused)) continue;
      std::string detail = "fused_batch_norm_act: " + line;
      if (bw.bn_grad) {
        const int rg = FindOp(block, bw.relu_grad), bg = FindOp(block, bw.bn_grad);
        const std::string dy = One(*bw.relu_grad, "X@GRAD", true);
        if (rg >= 0 && bg > rg && ReplaceOps(block, {static_cast<size_t>(rg), static_cast<size_t>(bg)}, fused_grad)) {
          RemoveUnusedVars(program, b, {dy});
          detail += "; fused_batch_norm_act_grad: relu_grad + batch_norm_grad (" + dy + " no longer written)";
        }
      }
      RemoveUnusedVars(program, b, {y});
      result.details.push_back(detail);
      ++result.changes;
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_bn_act, 400,
                 "batch_norm + relu -> fused_batch_norm_act, and relu_grad + batch_norm_grad -> "
                 "fused_batch_norm_act_grad",
                 FuseBnAct);

}  // namespace fl
