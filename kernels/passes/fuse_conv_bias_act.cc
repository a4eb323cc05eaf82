// fuse_conv_bias_act (inference): conv2d / depthwise_conv2d + elementwise_add(bias [M], axis 1) [+ relu / relu6 /
// sigmoid / tanh] -> one conv2d_fusion op (kernels/conv2d.cc), whose kernel applies the bias and the activation to
// each output tile as the convolution writes it. Either the bias or the activation may be missing (not both). A
// residual elementwise_add between the bias and the activation (ResNet's shortcut: the other operand of Output's
// shape, either side of the add) becomes conv2d_fusion's ResidualData.
// Each intermediate must be a temporary read only by the next op of the chain. Training programs are left alone.
#include "inference_pass_util.h"

namespace fl {
namespace {

using namespace inference_pass;

void FuseConvBiasAct(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  if (IsTrainingProgram(program)) return;
  for (size_t bi = 0; bi < program.Size(); ++bi) {
    BlockDesc& block = *program.Block(bi);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const OpDesc& conv = *block.Op(i);
      if (conv.type() != "conv2d" && conv.type() != "depthwise_conv2d") continue;
      const std::string layout = AttrOr<std::string>(conv, "data_format", "AnyLayout");
      const std::string x = Arg(conv, "Input"), w = Arg(conv, "Filter");
      const VarDesc* wv = w.empty() ? nullptr : block.FindVarRecursive(w);
      if (x.empty() || !wv || wv->shape().size() != 4 || wv->shape()[0] < 0 || layout == "NHWC") continue;
      const int64_t m = wv->shape()[0];
      VarUses uses(program);
      BiasActChain c = MatchBiasAct(program, static_cast<int>(bi), i, "Output", uses, ctx, [&](const OpDesc& add) {
        const VarDesc* bv = block.FindVarRecursive(Arg(add, "Y"));
        return bv && bv->shape().size() == 1 && bv->shape()[0] == m && AttrOr<int32_t>(add, "axis", -1) == 1;
      });
      // conv [+ bias] -> elementwise_add(the chain's output, a residual of the same shape) [-> activation].
      const BiasActChain base = c;
      std::string residual;
      if (c.activation.empty()) {
        const int next = SoleReader(program, static_cast<int>(bi), c.out, uses, ctx);
        const OpDesc* add = next > static_cast<int>(c.members.back()) ? block.Op(next) : nullptr;
        if (add && add->type() == "elementwise_add" && AttrOr<int32_t>(*add, "axis", -1) == -1 &&
            !Arg(*add, "Out", false).empty()) {
          const std::string x_in = Arg(*add, "X"), y_in = Arg(*add, "Y");
          const std::string other = x_in == c.out ? y_in : (y_in == c.out ? x_in : "");
          const VarDesc* ov = other.empty() || other == c.out ? nullptr : block.FindVarRecursive(other);
          const VarDesc* cv = block.FindVarRecursive(c.out);
          if (ov && cv && ov->shape() == cv->shape() && ov->shape().size() == 4 && ov->dtype() == cv->dtype()) {
            residual = other;
            c.removed.push_back(c.out);
            c.out = Arg(*add, "Out", false);
            c.members.push_back(next);
            c.fused_ops.push_back("elementwise_add");
            const int after = SoleReader(program, static_cast<int>(bi), c.out, uses, ctx);
            if (after > next) {
              const OpDesc& act = *block.Op(after);
              const std::string a = EpilogueActivation(act);
              if (!a.empty() && Arg(act, "X") == c.out && !Arg(act, "Out", false).empty()) {
                c.activation = a;
                c.removed.push_back(c.out);
                c.out = Arg(act, "Out", false);
                c.members.push_back(after);
                c.fused_ops.push_back(act.type());
              }
            }
          }
        }
      }
      // Replaces the chain by one conv2d_fusion; false when ReplaceOps refuses the move.
      auto fuse = [&](const BiasActChain& ch, const std::string& res) {
        if (ch.members.size() < 2) return false;
        OpDesc fused("conv2d_fusion");
        fused.SetInput("Input", {x});
        fused.SetInput("Filter", {w});
        if (!ch.bias.empty()) fused.SetInput("Bias", {ch.bias});
        if (!res.empty()) fused.SetInput("ResidualData", {res});
        fused.SetOutput("Output", {ch.out});
        for (const char* a : {"strides", "paddings", "dilations", "groups", "use_cudnn", "use_mkldnn", "data_format"})
          if (conv.HasAttr(a)) fused.SetAttr(a, conv.GetAttr(a));
        fused.SetAttr("activation", ch.activation.empty() ? std::string("identity") : ch.activation);
        fused.SetAttr("fused_ops", ch.fused_ops);
        if (!ReplaceOps(block, ch.members, fused)) return false;
        RemoveUnusedVars(program, static_cast<int>(bi), ch.removed);
        ++result.changes;
        result.details.push_back("block " + std::to_string(bi) + ": " + Joined(ch.fused_ops) + " -> conv2d_fusion (" +
                                 w + (ch.bias.empty() ? "" : " + " + ch.bias) +
                                 (res.empty() ? "" : " + residual " + res) +
                                 (ch.activation.empty() ? "" : ", " + ch.activation) + ") -> " + ch.out);
        return true;
      };
      // The residual's producer may sit between the conv and the add (ResNet's projection shortcut is computed
      // after the block's second conv): then the conv fuses with its bias alone, and the shortcut's conv takes the
      // add.
      if (!fuse(c, residual) && (residual.empty() || !fuse(base, ""))) continue;
      i = c.members.front() > 0 ? c.members.front() - 1 : 0;
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_conv_bias_act, 300, "conv2d + elementwise_add(bias) [+ activation] -> conv2d_fusion (inference)",
                 FuseConvBiasAct);

}  // namespace fl
