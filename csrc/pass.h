// IR passes: named rewrites of a program, applied to the executor's private copy when it prepares a program
// (PreparedProgram), never to the user's Program. Each pass is one file under kernels/passes/ that registers itself
// with FL_REGISTER_PASS; which ones run is chosen in Python (fluid.BuildStrategy, fluidlite/compiler.py) and
// FLUIDLITE_DISABLE_PASSES=name,name|all turns any of them off for debugging. Passes run in their registered order,
// whatever order they are asked for in. What each one changed is logged at GLOG level 2 (GLOG_vmodule=pass=2) and
// kept with the prepared program (Executor.prepared_program(...) prints it above the program).
//
// The rules every pass keeps (checked by the helpers below, not by each pass):
//   - a protected variable (fed, fetched) and every persistable variable keep their names and final values;
//   - a variable that another block mentions (a StaticRNN/While step block reads its parents' variables by name)
//     is never removed or left unwritten;
//   - ops move only where no other op between the old and the new position reads or writes what they touch.
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "desc.h"
#include "place.h"

namespace fl {

class Scope;

struct PassContext {
  std::unordered_set<std::string> protected_vars;  // fed and fetched names
  Scope* scope = nullptr;                          // where the program will run (may be null: print, tests)
  Place place = Place::CPU();
};

// What one pass did: `changes` rewrites (groups fused, ops folded, ...), one readable line for each.
struct PassResult {
  std::string pass;
  int changes = 0;
  int ops_before = 0;
  int ops_after = 0;
  std::vector<std::string> details;
  std::string Summary() const;  // "fuse_elementwise_chains: 3 changes, 120 -> 84 ops"
};

using PassFn = std::function<void(ProgramDesc& program, const PassContext& ctx, PassResult& result)>;

struct PassInfo {
  std::string name;
  int order;        // passes run in increasing order
  std::string doc;  // one line: what it rewrites into what
  PassFn fn;
};

class PassRegistry {
 public:
  static PassRegistry& Instance();
  void Register(PassInfo info);
  const PassInfo* Find(const std::string& name) const;
  std::vector<const PassInfo*> All() const;  // in run order
 private:
  std::unordered_map<std::string, PassInfo> passes_;
};

struct PassRegistrar {
  PassRegistrar(const char* name, int order, const char* doc, PassFn fn) {
    PassRegistry::Instance().Register({name, order, doc, std::move(fn)});
  }
};
#define FL_REGISTER_PASS(name, order, doc, fn) \
  static ::fl::PassRegistrar fl_pass_registrar_##name(#name, order, doc, fn)

// Runs the named passes (unknown names raise, naming the known ones) over `program` in registered order, skipping
// those FLUIDLITE_DISABLE_PASSES names; validates the result (a pass that breaks the program is a bug: it raises
// naming the pass). Returns one result per pass that ran.
std::vector<PassResult> ApplyPasses(ProgramDesc& program, const std::vector<std::string>& names,
                                    const PassContext& ctx);

// ---------------------------------------------------------------- helpers shared by the passes

// Who reads and writes each variable name, over every block of the program. Build it once per pass (or rebuild
// after a rewrite); positions are (block index, op index).
class VarUses {
 public:
  explicit VarUses(const ProgramDesc& program);
  struct Use {
    int block;
    int op;
  };
  const std::vector<Use>& Readers(const std::string& name) const;
  const std::vector<Use>& Writers(const std::string& name) const;
  // Whether any block other than `block` names the variable (reads or writes it).
  bool MentionedOutside(const std::string& name, int block) const;

 private:
  std::unordered_map<std::string, std::vector<Use>> readers_, writers_;
  std::unordered_map<std::string, std::unordered_set<int>> blocks_;
};

// Whether `name` is a temporary of block `block` that a pass may stop writing: declared in that block (not a
// parent's), not persistable, not protected, not mentioned by another block, a LoDTensor.
bool IsRemovableTemporary(const ProgramDesc& program, int block, const std::string& name, const VarUses& uses,
                          const PassContext& ctx);

// Replaces the ops at `members` (indices into block `block`, ascending) by `fused`, placed at the position of the
// last member, after checking that this keeps the program's meaning: no op between the first and the last member
// reads a variable a member writes, or writes a variable a member reads or writes. Returns false (and changes
// nothing) when it does not. `fused` gets the first member's op_callstack and op_role unless it has its own.
bool ReplaceOps(BlockDesc& block, const std::vector<size_t>& members, const OpDesc& fused);

// Removes the declarations of `names` from block `block` when no op of the program mentions them any more.
void RemoveUnusedVars(ProgramDesc& program, int block, const std::vector<std::string>& names);

}  // namespace fl
