// What the inference passes (fold_batch_norm, fuse_fc, fuse_conv_bias_act) share: which programs they may change,
// and the single-consumer chains they fuse. Included only by those passes.
#pragma once
#include <string>
#include <vector>

#include "names.h"
#include "pass.h"

namespace fl {
namespace inference_pass {

// A program with backward or optimizer ops is a training program: the inference passes never change one (its
// grad ops read the intermediates they would remove, and its optimizer writes the parameters they fold).
inline bool IsTrainingProgram(const ProgramDesc& program) {
  const int mask = static_cast<int>(OpRole::kBackward) | static_cast<int>(OpRole::kOptimize);
  for (size_t b = 0; b < program.Size(); ++b)
    for (auto& op : program.Block(b)->AllOps()) {
      if (!op->HasAttr("op_role")) continue;
      const Attribute& role = op->GetAttr("op_role");
      if (const int32_t* r = std::get_if<int32_t>(&role); r && (*r & mask)) return true;
    }
  return false;
}

// The index of the one op of block `block` that reads `name`, when `name` is a removable temporary of that block
// (pass.h) written once and read by exactly that op (once); else -1. Such a variable can disappear inside a
// fused op.
inline int SoleReader(const ProgramDesc& program, int block, const std::string& name, const VarUses& uses,
                      const PassContext& ctx) {
  if (!IsRemovableTemporary(program, block, name, uses, ctx)) return -1;
  const auto& readers = uses.Readers(name);
  if (readers.size() != 1 || uses.Writers(name).size() != 1 || readers[0].block != block) return -1;
  return readers[0].op;
}

// The one argument of `slot` ("" when the slot is absent or holds several).
inline std::string Arg(const OpDesc& op, const std::string& slot, bool input = true) {
  if (input ? !op.HasInput(slot) : !op.HasOutput(slot)) return "";
  const auto& args = input ? op.Input(slot) : op.Output(slot);
  return args.size() == 1 ? args[0] : "";
}

// The product of a declared shape; -1 when a dim is unknown.
inline int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

template <typename T>
T AttrOr(const OpDesc& op, const std::string& name, T fallback) {
  if (!op.HasAttr(name)) return fallback;
  const T* v = std::get_if<T>(&op.GetAttr(name));
  return v ? *v : fallback;
}

// The activation an epilogue can apply for an activation op (helpers/bias_act.h), or "" when it cannot: relu,
// sigmoid, tanh, and relu6 with its default threshold 6.
inline std::string EpilogueActivation(const OpDesc& op) {
  const std::string& t = op.type();
  if (t == "relu" || t == "sigmoid" || t == "tanh") return t;
  if (t == "relu6" && AttrOr<float>(op, "threshold", 6.0f) == 6.0f) return t;
  return "";
}

// A producer op at `first` (mul, conv2d) followed by elementwise_add of a bias (optional) and an activation
// (optional), each intermediate read only by the next op: what fuse_fc and fuse_conv_bias_act replace by one op.
struct BiasActChain {
  std::vector<size_t> members;       // op indices, ascending
  std::string bias;                  // "" when there is no add
  std::string activation;            // "" when there is no activation op
  std::string out;                   // the chain's final output
  std::vector<std::string> removed;  // the intermediates
  std::vector<std::string> fused_ops;
};

// `bias_ok(add op)` says whether an elementwise_add is a bias add for this producer (its Y, its axis).
template <typename BiasOk>
BiasActChain MatchBiasAct(const ProgramDesc& program, int block, size_t first, const std::string& out_slot,
                          const VarUses& uses, const PassContext& ctx, BiasOk bias_ok) {
  const BlockDesc& b = *program.Block(block);
  BiasActChain c;
  c.members = {first};
  c.fused_ops = {b.Op(first)->type()};
  c.out = Arg(*b.Op(first), out_slot, false);
  if (c.out.empty()) return c;
  int next = SoleReader(program, block, c.out, uses, ctx);
  if (next > static_cast<int>(first)) {
    const OpDesc& add = *b.Op(next);
    if (add.type() == "elementwise_add" && Arg(add, "X") == c.out && Arg(add, "Y") != c.out && bias_ok(add) &&
        !Arg(add, "Out", false).empty()) {
      c.bias = Arg(add, "Y");
      c.removed.push_back(c.out);
      c.out = Arg(add, "Out", false);
      c.members.push_back(next);
      c.fused_ops.push_back(add.type());
      next = SoleReader(program, block, c.out, uses, ctx);
    }
  }
  if (next > static_cast<int>(c.members.back())) {
    const OpDesc& act = *b.Op(next);
    const std::string a = EpilogueActivation(act);
    if (!a.empty() && Arg(act, "X") == c.out && !Arg(act, "Out", false).empty()) {
      c.activation = a;
      c.removed.push_back(c.out);
      c.out = Arg(act, "Out", false);
      c.members.push_back(next);
      c.fused_ops.push_back(act.type());
    }
  }
  return c;
}

inline std::string Joined(const std::vector<std::string>& v, const char* sep = " + ") {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace inference_pass
}  // namespace fl
