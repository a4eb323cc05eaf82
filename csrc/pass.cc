// The pass framework (see pass.h): the registry, ApplyPasses with its log and check, and the graph helpers every
// pass shares.
#include "pass.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "enforce.h"
#include "logging.h"
#include "names.h"
#include "op_builder.h"
#include "op_registry.h"

namespace fl {

std::string PassResult::Summary() const {
  std::ostringstream s;
  s << pass << ": " << changes << (changes == 1 ? " change" : " changes") << ", " << ops_before << " -> " << ops_after
    << " ops";
  return s.str();
}

PassRegistry& PassRegistry::Instance() {
  static PassRegistry r;
  return r;
}

void PassRegistry::Register(PassInfo info) {
  FL_ENFORCE(!passes_.count(info.name), "pass '", info.name, "' is registered twice");
  std::string name = info.name;
  passes_.emplace(std::move(name), std::move(info));
}

const PassInfo* PassRegistry::Find(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::All() const {
  std::vector<const PassInfo*> all;
  for (auto& [name, info] : passes_) all.push_back(&info);
  std::sort(all.begin(), all.end(), [](const PassInfo* a, const PassInfo* b) {
    return a->order != b->order ? a->order < b->order : a->name < b->name;
  });
  return all;
}

namespace {

// FLUIDLITE_DISABLE_PASSES, read on every ApplyPasses (prepares are rare): "all" or comma-separated names.
bool DisabledByEnv(const std::string& name) {
  const char* env = std::getenv("FLUIDLITE_DISABLE_PASSES");
  if (!env || !*env) return false;
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item == "all" || item == name) return true;
  }
  return false;
}

int CountOps(const ProgramDesc& program) {
  int n = 0;
  for (size_t b = 0; b < program.Size(); ++b) n += static_cast<int>(program.Block(b)->OpSize());
  return n;
}

std::string KnownPasses() {
  std::string s;
  for (const PassInfo* p : PassRegistry::Instance().All()) s += (s.empty() ? "" : ", ") + p->name;
  return s;
}

}  // namespace

std::vector<PassResult> ApplyPasses(ProgramDesc& program, const std::vector<std::string>& names,
                                    const PassContext& ctx) {
  auto& registry = PassRegistry::Instance();
  std::unordered_set<std::string> wanted;
  for (auto& n : names) {
    FL_ENFORCE(registry.Find(n) != nullptr, "unknown IR pass '", n, "'; the passes are: ", KnownPasses());
    wanted.insert(n);
  }
  std::vector<PassResult> results;
  for (const PassInfo* info : registry.All()) {
    if (!wanted.count(info->name)) continue;
    if (DisabledByEnv(info->name)) {
      FL_VLOG(2) << "pass " << info->name << ": skipped (FLUIDLITE_DISABLE_PASSES)";
      continue;
    }
    PassResult r;
    r.pass = info->name;
    r.ops_before = CountOps(program);
    info->fn(program, ctx, r);
    r.ops_after = CountOps(program);
    try {
      ValidateProgram(program);
    } catch (const EnforceNotMet& e) {
      FL_THROW("IR pass '", info->name,
               "' left an invalid program (a fluidlite bug; FLUIDLITE_DISABLE_PASSES=", info->name,
               " runs without it): ", e.what());
    }
    FL_VLOG(2) << "pass " << r.Summary();
    for (auto& d : r.details) FL_VLOG(2) << "pass " << info->name << ":   " << d;
    results.push_back(std::move(r));
  }
  return results;
}

// ---------------------------------------------------------------- helpers

VarUses::VarUses(const ProgramDesc& program) {
  for (size_t b = 0; b < program.Size(); ++b) {
    const auto& ops = program.Block(b)->AllOps();
    for (size_t i = 0; i < ops.size(); ++i) {
      const Use use{static_cast<int>(b), static_cast<int>(i)};
      for (auto& n : ops[i]->InputArgumentNames()) {
        readers_[n].push_back(use);
        blocks_[n].insert(use.block);
      }
      for (auto& n : ops[i]->OutputArgumentNames()) {
        writers_[n].push_back(use);
        blocks_[n].insert(use.block);
      }
      // An op with a sub-block (recurrent, while, conditional_block) names variables in its attributes that its
      // runtime reads or writes by name in either block (StaticRNN's states and ex_states): mentioned everywhere.
      if (!ops[i]->HasAttr("sub_block")) continue;
      for (auto& [attr, value] : ops[i]->attrs()) {
        // The runtime also derives gradient names from them (StaticRNN reads ex_states[i] + "@GRAD").
        auto mention = [this](const std::string& n) {
          blocks_[n].insert(-1);
          blocks_[n + kGradSuffix].insert(-1);
        };
        if (auto* s = std::get_if<std::string>(&value)) mention(*s);
        if (auto* v = std::get_if<std::vector<std::string>>(&value))
          for (auto& n : *v) mention(n);
      }
    }
  }
}

const std::vector<VarUses::Use>& VarUses::Readers(const std::string& name) const {
  static const std::vector<Use> none;
  auto it = readers_.find(name);
  return it == readers_.end() ? none : it->second;
}

const std::vector<VarUses::Use>& VarUses::Writers(const std::string& name) const {
  static const std::vector<Use> none;
  auto it = writers_.find(name);
  return it == writers_.end() ? none : it->second;
}

bool VarUses::MentionedOutside(const std::string& name, int block) const {
  auto it = blocks_.find(name);
  if (it == blocks_.end()) return false;
  for (int b : it->second)
    if (b != block) return true;
  return false;
}

bool IsRemovableTemporary(const ProgramDesc& program, int block, const std::string& name, const VarUses& uses,
                          const PassContext& ctx) {
  const VarDesc* v = program.Block(block)->FindVar(name);
  if (!v || v->persistable() || v->kind() != VarKind::LOD_TENSOR) return false;
  if (ctx.protected_vars.count(name) || uses.MentionedOutside(name, block)) return false;
  return true;
}

bool ReplaceOps(BlockDesc& block, const std::vector<size_t>& members, const OpDesc& fused) {
  FL_ENFORCE(!members.empty() && std::is_sorted(members.begin(), members.end()), "ReplaceOps: members must be sorted");
  std::unordered_set<std::string> reads, writes;
  for (size_t m : members) {
    for (auto& n : block.Op(m)->InputArgumentNames()) reads.insert(n);
    for (auto& n : block.Op(m)->OutputArgumentNames()) writes.insert(n);
  }
  std::unordered_set<size_t> is_member(members.begin(), members.end());
  for (size_t i = members.front(); i < members.back(); ++i) {
    if (is_member.count(i)) continue;
    const OpDesc* op = block.Op(i);
    if (op->HasAttr("sub_block") || op->HasAttr("sub_blocks")) return false;  // reads by name, unlisted
    for (auto& n : op->InputArgumentNames())
      if (writes.count(n)) return false;
    for (auto& n : op->OutputArgumentNames())
      if (writes.count(n) || reads.count(n)) return false;
  }
  const OpDesc* first = block.Op(members.front());
  const size_t last = members.back();
  OpDesc* op = block.InsertOp(last + 1);
  op->set_type(fused.type());
  for (auto& [slot, args] : fused.inputs()) op->SetInput(slot, args);
  for (auto& [slot, args] : fused.outputs()) op->SetOutput(slot, args);
  for (auto& [name, value] : fused.attrs()) op->SetAttr(name, value);
  for (const char* inherited : {"op_callstack", "op_role", "op_namescope"})
    if (!op->HasAttr(inherited) && first->HasAttr(inherited)) op->SetAttr(inherited, first->GetAttr(inherited));
  for (auto it = members.rbegin(); it != members.rend(); ++it) block.RemoveOp(*it, *it + 1);
  return true;
}

void RemoveUnusedVars(ProgramDesc& program, int block, const std::vector<std::string>& names) {
  VarUses uses(program);
  for (auto& n : names)
    if (uses.Readers(n).empty() && uses.Writers(n).empty() && program.Block(block)->FindVar(n))
      program.Block(block)->RemoveVar(n);
}

}  // namespace fl
