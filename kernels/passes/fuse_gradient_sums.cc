// fuse_gradient_sums (fluidlite's BuildStrategy.fuse_gradient_sums): the `sum` ops that aggregate a variable's
// gradient contributions (backward's @RENAME@ sums) read a contribution's source instead of a copy of it.
//
// The common case in the bench models (resnet_small: 7 of its 9 sums, mobilenet_v2: 10 of 10, transformer_encoder
// and seq2seq: one input of most of theirs) is a residual or bias add: elementwise_add's gradient writes X@GRAD
// (and Y@GRAD) as a copy of Out@GRAD whenever that operand has the output's shape, and the sum then adds that
// copy to the other contributions. Here the sum reads Out@GRAD itself and elementwise_add_grad (or
// elementwise_sub_grad's X@GRAD, also a copy) stops writing the copy; a grad op left with no outputs goes. This
// saves one read and one write of the gradient per rewrite, and the sum's arithmetic is unchanged (the same
// values added in the same order): results are bit for bit those without the pass.
//
// When it fires: the copy is a temporary (IsRemovableTemporary) that only this sum reads and only that grad op
// writes, in the same block; the operand's declared dims equal Out@GRAD's (no broadcast; at run time the sum's
// own check refuses inputs of different sizes, and an operand with Out@GRAD's element count is not broadcast); no
// op between the two writes Out@GRAD.
//
// Not done (measured as not worth the kernel changes in this round; docs/architecture.md): accumulating a
// mul_grad/matmul_grad/conv2d_grad contribution into the first one's buffer (a GEMM with beta = 1).
#include <string>
#include <vector>

#include "pass.h"

namespace fl {

namespace {

// The (grad op type, gradient slot, operand slot) triples whose gradient is a copy of Out@GRAD when the operand has
// the output's shape.
struct CopyGrad {
  const char* op;
  const char* grad_slot;
  const char* operand;
};
constexpr CopyGrad kCopyGrads[] = {
    {"elementwise_add_grad", "X@GRAD", "X"},
    {"elementwise_add_grad", "Y@GRAD", "Y"},
    {"elementwise_sub_grad", "X@GRAD", "X"},
};

bool SameDeclaredDims(const BlockDesc& block, const std::string& a, const std::string& b) {
  const VarDesc* va = block.FindVarRecursive(a);
  const VarDesc* vb = block.FindVarRecursive(b);
  if (!va || !vb || va->kind() != VarKind::LOD_TENSOR || vb->kind() != VarKind::LOD_TENSOR) return false;
  const auto& da = va->shape();
  const auto& db = vb->shape();
  return !da.empty() && da == db && va->dtype() == vb->dtype();
}

// For input `arg` of the sum at `sum_at`: the Out@GRAD it copies, or "" (then nothing changes). On success the
// producing op stops writing `arg` (and is removed when it writes nothing else); *removed_before is set when that
// op was removed (the sum's index moved down by one).
std::string ForwardCopy(ProgramDesc& program, int b, size_t sum_at, const std::string& arg, const VarUses& uses,
                        const PassContext& ctx, bool* removed_before) {
  BlockDesc& block = *program.Block(b);
  if (!IsRemovableTemporary(program, b, arg, uses, ctx)) return "";
  const auto& writers = uses.Writers(arg);
  const auto& readers = uses.Readers(arg);
  if (writers.size() != 1 || readers.size() != 1 || writers[0].block != b || readers[0].block != b ||
      readers[0].op != static_cast<int>(sum_at) || writers[0].op >= static_cast<int>(sum_at))
    return "";
  const size_t at = static_cast<size_t>(writers[0].op);
  OpDesc* producer = block.Op(at);
  for (const CopyGrad& c : kCopyGrads) {
    if (producer->type() != c.op || producer->Output(c.grad_slot) != std::vector<std::string>{arg}) continue;
    const auto& dout = producer->Input("Out@GRAD");
    const auto& operand = producer->Input(c.operand);
    if (dout.size() != 1 || operand.size() != 1 || !SameDeclaredDims(block, operand[0], dout[0]) ||
        !SameDeclaredDims(block, arg, dout[0]))
      return "";
    for (size_t i = at + 1; i < sum_at; ++i) {  // Out@GRAD must still hold the copied values at the sum
      const OpDesc* op = block.Op(i);
      if (op->HasAttr("sub_block") || op->HasAttr("sub_blocks")) return "";
      for (auto& n : op->OutputArgumentNames())
        if (n == dout[0]) return "";
    }
    const std::string source = dout[0];
    producer->SetOutput(c.grad_slot, {});
    if (producer->OutputArgumentNames().empty()) {
      block.RemoveOp(at, at + 1);
      *removed_before = true;
    }
    return source;
  }
  return "";
}

void FuseGradientSums(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  for (size_t b = 0; b < program.Size(); ++b) {
    BlockDesc& block = *program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      if (block.Op(i)->type() != "sum") continue;
      std::vector<std::string> xs = block.Op(i)->Input("X");
      bool changed = false;
      std::vector<std::string> forwarded, removed;
      for (auto& x : xs) {
        VarUses uses(program);  // rebuilt: the previous rewrite moved ops
        bool removed_before = false;
        const std::string source = ForwardCopy(program, static_cast<int>(b), i, x, uses, ctx, &removed_before);
        if (source.empty()) continue;
        if (removed_before) --i;
        forwarded.push_back(x + " -> " + source);
        removed.push_back(x);
        x = source;
        changed = true;
      }
      if (!changed) continue;
      OpDesc* sum = block.Op(i);
      sum->SetInput("X", xs);
      RemoveUnusedVars(program, static_cast<int>(b), removed);
      ++result.changes;
      std::string line = "sum -> " + sum->Output("Out")[0] + " reads";
      for (auto& f : forwarded) line += " " + f;
      line += " (the gradient copy is no longer written)";
      result.details.push_back(line);
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_gradient_sums, 800,
                 "a gradient sum over elementwise_add_grad's copy of Out@GRAD -> the sum reads Out@GRAD and the copy "
                 "is not written",
                 FuseGradientSums);

}  // namespace fl
