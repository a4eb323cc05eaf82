// inplace (Fluid's BuildStrategy.enable_inplace): an op whose registration declares Inplace(out, in) (activations
// and their grads, elementwise ops, scale, assign, sum, batch_norm's Y) writes its output into its input's variable
// when nothing reads the input after it: the output variable is renamed to the input's in this op and in every later
// op, so the op reuses the buffer it reads and one tensor fewer is alive across it.
//
// When it fires, in one block: the input and the output are temporaries (IsRemovableTemporary: not persistable, not
// fed or fetched, not named by another block or a sub-block op, nor the @GRAD of a name a sub-block op's attributes
// list: the StaticRNN runner reads the memories' gradients by derived names), the input is one variable read once by
// this op and read or written by no later op, the output has no other writer and the same declared dims and dtype as
// the input. For the broadcasting ops (elementwise_*) the dims must be fully known, so that no broadcast can make the
// output larger than the input at run time (the executor refuses an in-place output whose shape would change); the
// others' outputs have their input's shape (activations, scale, and the activations' grads: X@GRAD over Out@GRAD).
// sum may take over any of its inputs; ops with a sub-block, other duplicable slots and the optimizer updates
// (already in place on persistable variables) are left alone. The arithmetic is unchanged: results are bit for bit
// those without the pass.
#include <string>
#include <unordered_set>
#include <vector>

#include "op_registry.h"
#include "pass.h"

namespace fl {

namespace {

bool FullyKnown(const VarDesc& v) {
  if (v.shape().empty()) return false;
  for (int64_t d : v.shape())
    if (d < 0) return false;
  return true;
}

// The names sub-block ops (recurrent, while, conditional_block) list in their attributes: their runtimes reach
// variables by these names and by names derived from them (the StaticRNN runner reads and writes ex_states[i] +
// "@GRAD" in the step scopes, which no op lists).
std::unordered_set<std::string> AttributeNames(const ProgramDesc& program) {
  std::unordered_set<std::string> names;
  for (size_t b = 0; b < program.Size(); ++b)
    for (auto& op : program.Block(b)->AllOps()) {
      if (!op->HasAttr("sub_block")) continue;
      for (auto& [attr, value] : op->attrs()) {
        if (auto* v = std::get_if<std::string>(&value)) names.insert(*v);
        if (auto* v = std::get_if<std::vector<std::string>>(&value)) names.insert(v->begin(), v->end());
      }
    }
  return names;
}

// Whether `name` may be read by such a derived name: its part before "@GRAD" is one of `attr_names`.
bool MaybeReadByDerivedName(const std::string& name, const std::unordered_set<std::string>& attr_names) {
  const size_t at = name.find("@GRAD");
  return at != std::string::npos && attr_names.count(name.substr(0, at));
}

// The input of op `i` whose variable its output can take over, as (out slot, in slot), or false.
bool FindInplacePair(const ProgramDesc& program, int b, size_t i, const VarUses& uses, const PassContext& ctx,
                     const std::unordered_set<std::string>& attr_names, std::string* out_name, std::string* in_name) {
  const BlockDesc& block = *program.Block(b);
  const OpDesc& op = *block.Op(i);
  if (op.HasAttr("sub_block") || op.HasAttr("sub_blocks")) return false;
  const OpInfo* info = OpRegistry::Instance().Find(op.type());
  if (!info || info->inplace.empty()) return false;
  const bool broadcasts = op.type().rfind("elementwise_", 0) == 0;
  // sum's kernel may write over any of its inputs (it adds block by block through a buffer); other duplicable
  // slots are left alone.
  const bool any_of_list = op.type() == "sum";
  for (auto& [out_slot, in_slot] : info->inplace) {
    const auto& outs = op.Output(out_slot);
    if (outs.size() != 1) continue;
    const std::string& out = outs[0];
    const auto& ins = op.Input(in_slot);
    if (ins.size() != 1 && !any_of_list) continue;
    for (const std::string& in : ins) {
      if (in == out) break;  // already in place
      if (!IsRemovableTemporary(program, b, in, uses, ctx) || !IsRemovableTemporary(program, b, out, uses, ctx) ||
          MaybeReadByDerivedName(in, attr_names) || MaybeReadByDerivedName(out, attr_names))
        continue;
      // the input: read once by this op (not also as its other operand), never again after it
      int reads_here = 0;
      for (auto& n : op.InputArgumentNames()) reads_here += n == in;
      bool later = false;
      for (auto& u : uses.Readers(in)) later |= u.block == b && u.op > static_cast<int>(i);
      for (auto& u : uses.Writers(in)) later |= u.block == b && u.op >= static_cast<int>(i);
      if (reads_here != 1 || later) continue;
      // the output: written by this op alone (and not also read by it)
      if (uses.Writers(out).size() != 1) continue;
      bool read_here = false;
      for (auto& n : op.InputArgumentNames()) read_here |= n == out;
      if (read_here) continue;
      const VarDesc* vi = block.FindVar(in);
      const VarDesc* vo = block.FindVar(out);
      if (!vi || !vo || vi->dtype() != vo->dtype() || vi->shape() != vo->shape() || vi->shape().empty()) continue;
      // elementwise_*: a broadcast could make Out larger than this operand at run time
      if (broadcasts && !FullyKnown(*vi)) continue;
      *out_name = out;
      *in_name = in;
      return true;
    }
  }
  return false;
}

void Inplace(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  const std::unordered_set<std::string> attr_names = AttributeNames(program);  // renames never touch these
  for (size_t bi = 0; bi < program.Size(); ++bi) {
    const int b = static_cast<int>(bi);
    BlockDesc& block = *program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      VarUses uses(program);
      std::string out, in;
      if (!FindInplacePair(program, b, i, uses, ctx, attr_names, &out, &in)) continue;
      for (size_t j = i; j < block.OpSize(); ++j) {
        block.Op(j)->RenameOutput(out, in);
        block.Op(j)->RenameInput(out, in);
      }
      RemoveUnusedVars(program, b, {out});
      ++result.changes;
      result.details.push_back(block.Op(i)->type() + ": " + out + " -> " + in + " (in place)");
    }
  }
}

}  // namespace

FL_REGISTER_PASS(inplace, 1000,
                 "an op declared Inplace(out, in) whose input is not read after it -> it writes into the input's "
                 "variable",
                 Inplace);

}  // namespace fl
