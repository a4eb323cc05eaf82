// fuse_fc (inference): mul(X, W) + elementwise_add(bias) [+ relu / relu6 / sigmoid / tanh] -> one fc op (kernels/
// fc.cc), whose kernel applies the bias and the activation to the GEMM's output rows while they are in cache. Each
// intermediate must be a temporary read only by the next op of the chain; W must be 2-D (y_num_col_dims 1) and the
// bias hold W's N columns, added along the last axis. Training programs are left alone.
#include "inference_pass_util.h"

namespace fl {
namespace {

using namespace inference_pass;

void FuseFc(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  if (IsTrainingProgram(program)) return;
  for (size_t bi = 0; bi < program.Size(); ++bi) {
    BlockDesc& block = *program.Block(bi);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const OpDesc& mul = *block.Op(i);
      if (mul.type() != "mul" || AttrOr<int32_t>(mul, "y_num_col_dims", 1) != 1) continue;
      const std::string x = Arg(mul, "X"), w = Arg(mul, "Y");
      const VarDesc* wv = w.empty() ? nullptr : block.FindVarRecursive(w);
      if (x.empty() || !wv || wv->shape().size() != 2 || wv->shape()[1] < 0) continue;
      const int64_t n = wv->shape()[1];
      const int32_t xn = AttrOr<int32_t>(mul, "x_num_col_dims", 1);
      VarUses uses(program);
      BiasActChain c = MatchBiasAct(program, static_cast<int>(bi), i, "Out", uses, ctx, [&](const OpDesc& add) {
        const VarDesc* bv = block.FindVarRecursive(Arg(add, "Y"));
        const int32_t axis = AttrOr<int32_t>(add, "axis", -1);
        return bv && Numel(bv->shape()) == n && bv->shape().back() == n && bv->shape().size() <= 2 &&
               (axis == -1 || axis == xn);
      });
      if (c.members.size() < 2) continue;
      OpDesc fc("fc");
      fc.SetInput("Input", {x});
      fc.SetInput("W", {w});
      if (!c.bias.empty()) fc.SetInput("Bias", {c.bias});
      fc.SetOutput("Out", {c.out});
      fc.SetAttr("in_num_col_dims", xn);
      fc.SetAttr("activation_type", c.activation);
      fc.SetAttr("fused_ops", c.fused_ops);
      if (!ReplaceOps(block, c.members, fc)) continue;
      RemoveUnusedVars(program, static_cast<int>(bi), c.removed);
      ++result.changes;
      result.details.push_back("block " + std::to_string(bi) + ": " + Joined(c.fused_ops) + " -> fc (" + x + " @ " + w +
                               (c.bias.empty() ? "" : " + " + c.bias) +
                               (c.activation.empty() ? "" : ", " + c.activation) + ") -> " + c.out);
      i = c.members.front() > 0 ? c.members.front() - 1 : 0;  // the fc now sits where the chain began or later
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_fc, 200, "mul + elementwise_add(bias) [+ activation] -> fc (inference)", FuseFc);

}  // namespace fl
