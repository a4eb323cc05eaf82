#include "op_builder.h"

#include <algorithm>

#include "op_context.h"

namespace fl {

std::string CreationSuffix(const OpDesc& op) {
  std::string site = op.CreationSite();
  return site.empty() ? "" : " [op " + op.type() + " created at " + site + "]";
}

namespace {

class CompileTimeInferShapeContext : public InferShapeContext {
 public:
  CompileTimeInferShapeContext(BlockDesc* block, OpDesc* op, const OpInfo& info)
      : block_(block), op_(op), info_(info) {}
  bool IsRuntime() const override { return false; }
  const std::string& Type() const override { return op_->type(); }
  const OpInfo& Info() const override { return info_; }
  bool HasInputAt(const char* slot, int i) const override {
    auto& a = op_->Input(slot);
    return i >= 0 && i < static_cast<int>(a.size()) && a[i] != kEmptyVarName && block_->FindVarRecursive(a[i]);
  }
  bool HasOutputAt(const char* slot, int i) const override {
    auto& a = op_->Output(slot);
    return i >= 0 && i < static_cast<int>(a.size()) && a[i] != kEmptyVarName;
  }
  bool HasInput(const char* slot) const override {
    auto& a = op_->Input(slot);
    return !a.empty() && a[0] != kEmptyVarName;
  }
  bool HasOutput(const char* slot) const override {
    auto& a = op_->Output(slot);
    return !a.empty() && a[0] != kEmptyVarName;
  }
  int InputSize(const char* slot) const override { return static_cast<int>(op_->Input(slot).size()); }
  int OutputSize(const char* slot) const override { return static_cast<int>(op_->Output(slot).size()); }
  DDim InputDim(const char* slot, int i) const override { return DDim(InVar(slot, i)->shape()); }
  DType InputDType(const char* slot, int i) const override { return InVar(slot, i)->dtype(); }
  VarKind InputKind(const char* slot, int i) const override { return InVar(slot, i)->kind(); }
  const std::string& InputName(const char* slot, int i) const override {
    return Arg(op_->Input(slot), slot, i, "input");
  }
  const std::string& OutputName(const char* slot, int i) const override {
    return Arg(op_->Output(slot), slot, i, "output");
  }
  void SetOutputDim(const char* slot, const DDim& dims, int i) override {
    if (VarDesc* v = OutVar(slot, i)) v->set_shape(dims.ToVector());
  }
  void SetOutputDType(const char* slot, DType dtype, int i) override {
    if (VarDesc* v = OutVar(slot, i)) v->set_dtype(dtype);
  }
  void ShareLoD(const char* in, const char* out, int i, int j) override {
    VarDesc* o = OutVar(out, j);
    if (o) o->set_lod_level(InVar(in, i)->lod_level());
  }
  int InputLoDLevel(const char* slot, int i) const override { return InVar(slot, i)->lod_level(); }
  void SetOutputLoDLevel(const char* slot, int level, int i) override {
    if (VarDesc* o = OutVar(slot, i)) o->set_lod_level(level);
  }
  const Attribute& GetAttr(const std::string& name) const override {
    if (op_->HasAttr(name)) return op_->GetAttr(name);
    const AttrSpec* spec = info_.FindAttr(name);
    FL_ENFORCE(spec != nullptr, "op ", op_->type(), " has no attribute '", name, "'");
    return spec->default_value;
  }

 private:
  const std::string& Arg(const std::vector<std::string>& args, const char* slot, int i, const char* side) const {
    FL_ENFORCE(i < static_cast<int>(args.size()), "op ", op_->type(), " has no ", side, " ", slot, "[", i, "]");
    return args[i];
  }
  VarDesc* InVar(const char* slot, int i) const {
    const std::string& n = Arg(op_->Input(slot), slot, i, "input");
    VarDesc* v = block_->FindVarRecursive(n);
    FL_ENFORCE(v != nullptr, "op ", op_->type(), ": input ", slot, " variable '", n, "' is not declared in block ",
               block_->idx(), " or its parents");
    return v;
  }
  VarDesc* OutVar(const char* slot, int i) const {
    const auto& args = op_->Output(slot);
    if (i >= static_cast<int>(args.size()) || args[i] == kEmptyVarName) return nullptr;
    VarDesc* v = block_->FindVarRecursive(args[i]);
    FL_ENFORCE(v != nullptr, "op ", op_->type(), ": output ", slot, " variable '", args[i],
               "' is not declared in block ", block_->idx(), " or its parents");
    return v;
  }
  BlockDesc* block_;
  OpDesc* op_;
  const OpInfo& info_;
};

// The op's creation suffix, made only when an error message is (validation runs at every prepare).
struct SiteOf {
  const OpDesc& op;
};
std::ostream& operator<<(std::ostream& os, const SiteOf& s) { return os << CreationSuffix(s.op); }

void CheckSlots(const OpInfo& info, const VarNameMap& given, const std::vector<SlotSpec>& specs, const char* side,
                const SiteOf& site) {
  for (auto& kv : given) {
    const SlotSpec* spec = nullptr;
    for (auto& s : specs)
      if (s.name == kv.first) spec = &s;
    if (!spec) {
      std::string valid;
      for (auto& s : specs) valid += (valid.empty() ? "" : ", ") + s.name;
      FL_THROW("op ", info.type, " has no ", side, " slot '", kv.first, "' (", side, "s: ", valid, ")", site);
    }
    FL_ENFORCE(spec->duplicable || kv.second.size() <= 1, "op ", info.type, ": ", side, " ", kv.first,
               " takes one variable, got ", kv.second.size(), site);
    for (size_t i = 0; i < kv.second.size(); ++i)
      FL_ENFORCE(!kv.second[i].empty(), "op ", info.type, ": ", side, " ", kv.first, "[", i,
                 "] has an empty variable name", site);
  }
  for (size_t i = 0; i < given.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      FL_ENFORCE(given[i].first != given[j].first, "op ", info.type, ": ", side, " slot ", given[i].first,
                 " is listed twice", site);
  for (auto& s : specs) {
    if (s.dispensable) continue;
    bool present = false;
    for (auto& kv : given)
      if (kv.first == s.name && !kv.second.empty()) present = true;
    FL_ENFORCE(present, "op ", info.type, ": ", side, " ", s.name, " is required but was not given", site);
  }
}

// An attribute value for a message, cut short (a crafted program's list may hold millions of values).
std::string ShortAttrString(const Attribute& a) {
  std::string s = AttrToString(a);
  return s.size() <= 120 ? s : s.substr(0, 100) + " ... (" + std::to_string(s.size()) + " characters)";
}

void CheckAttrs(const OpInfo& info, const OpDesc& op, const SiteOf& site) {
  for (auto& spec : info.attrs) {
    if (!op.HasAttr(spec.name)) {
      FL_ENFORCE(!spec.required, "op ", info.type, ": attribute '", spec.name, "' is required", site);
      continue;
    }
    const Attribute& value = op.GetAttr(spec.name);
    FL_ENFORCE(TypeOf(value) == spec.type(), "op ", info.type, ": attribute '", spec.name, "' must be ",
               AttrTypeName(spec.type()), ", got ", AttrTypeName(TypeOf(value)), site);
    const std::string why = spec.Violation(value);
    FL_ENFORCE(why.empty(), "op ", info.type, ": attribute '", spec.name, "' = ", ShortAttrString(value),
               " is invalid: ", why, site);
  }
  for (auto& spec : CommonAttrs()) {
    if (!op.HasAttr(spec.name) || info.FindAttr(spec.name)) continue;
    FL_ENFORCE(TypeOf(op.GetAttr(spec.name)) == spec.type(), "op ", info.type, ": attribute '", spec.name, "' must be ",
               AttrTypeName(spec.type()), ", got ", AttrTypeName(TypeOf(op.GetAttr(spec.name))), site);
  }
}

// Every block attribute names a block of the program, and every declared one (the blocks the op runs) a block
// nested below the op's block: running the op's sub-blocks never comes back to the op (no cycle), and the
// depth is bounded.
void CheckBlockRefs(const OpInfo& info, const OpDesc& op, const BlockDesc* block, const SiteOf& site) {
  std::vector<std::pair<std::string, int32_t>> refs;
  for (auto& [name, value] : op.attrs()) {
    if (auto* b = std::get_if<BlockRef>(&value)) refs.emplace_back(name, b->idx);
    if (auto* bs = std::get_if<std::vector<BlockRef>>(&value))
      for (auto& b : *bs) refs.emplace_back(name, b.idx);
  }
  if (refs.empty()) return;
  const ProgramDesc* program = block ? block->program() : op.program();
  if (!program) return;  // a free-standing desc: checked when it joins a program
  if (!block)
    for (size_t b = 0; b < program->Size() && !block; ++b)
      for (auto& o : program->Block(b)->AllOps())
        if (o.get() == &op) block = program->Block(b);
  for (auto& [name, idx] : refs) {
    FL_ENFORCE(idx >= 0 && static_cast<size_t>(idx) < program->Size(), "op ", info.type, ": attribute '", name,
               "' = block[", idx, "] is not a block of the program (it has ", program->Size(), " blocks)", site);
    if (!block || !info.FindAttr(name)) continue;
    bool below = false;
    int depth = 0;
    for (const BlockDesc* b = program->Block(idx); b->parent_idx() >= 0;) {
      FL_ENFORCE(++depth <= kMaxBlockDepth, "op ", info.type, ": attribute '", name, "' = block[", idx,
                 "] is nested more than ", kMaxBlockDepth, " blocks deep", site);
      b = program->Block(b->parent_idx());
      if (b == block) below = true;
    }
    FL_ENFORCE(below, "op ", info.type, " in block ", block->idx(), ": attribute '", name, "' = block[", idx,
               "] is not nested in block ", block->idx(),
               " (a sub-block must be a descendant of its op's block: anything else would run the op again)", site);
  }
}

}  // namespace

void ValidateOpDesc(const OpInfo& info, const OpDesc& op, const BlockDesc* block) {
  const SiteOf site{op};
  CheckSlots(info, op.inputs(), info.inputs, "input", site);
  CheckSlots(info, op.outputs(), info.outputs, "output", site);
  CheckAttrs(info, op, site);
  CheckBlockRefs(info, op, block, site);
  if (info.check) {
    try {
      info.check(OpCheckContext(info, op));
    } catch (const EnforceNotMet& e) {
      std::string msg = e.what();
      if (msg.rfind("op " + info.type, 0) != 0) msg = "op " + info.type + ": " + msg;
      throw EnforceNotMet(msg + CreationSuffix(op));
    }
  }
}

void ValidateProgram(const ProgramDesc& program) {
  const size_t n = program.Size();
  for (size_t b = 0; b < n; ++b) {
    const BlockDesc* block = program.Block(b);
    FL_ENFORCE(block->parent_idx() < static_cast<int>(b) && (b == 0 || block->parent_idx() >= 0), "program: block ", b,
               " has parent ", block->parent_idx(), " (a block's parent comes before it)");
    const int fwd = block->forward_block_idx();
    FL_ENFORCE(fwd >= -1 && fwd < static_cast<int>(n) && fwd != static_cast<int>(b), "program: block ", b,
               " has forward block ", fwd, " (the program has ", n, " blocks)");
    int depth = 0;
    for (const BlockDesc* p = block; p->parent_idx() >= 0; p = program.Block(p->parent_idx()))
      FL_ENFORCE(++depth <= kMaxBlockDepth, "program: block ", b, " is nested more than ", kMaxBlockDepth,
                 " blocks deep");
  }
  for (size_t b = 0; b < n; ++b) {
    const BlockDesc* block = program.Block(b);
    for (size_t i = 0; i < block->OpSize(); ++i) {
      const OpDesc& op = *block->Op(i);
      // An unknown type is not an error yet: the program can be inspected or pruned; preparing it raises.
      if (const OpInfo* info = OpRegistry::Instance().Find(op.type())) ValidateOpDesc(*info, op, block);
    }
  }
}

void InferShapeAtCompileTime(BlockDesc* block, OpDesc* op) {
  const OpInfo& info = OpRegistry::Instance().Get(op->type());
  if (!info.infer_shape) return;
  CompileTimeInferShapeContext ctx(block, op, info);
  try {
    if (info.forward) CheckAgainstForward(ctx);
    info.infer_shape(ctx);
  } catch (const std::exception& e) {  // EnforceNotMet, or std::out_of_range from an .at()
    std::string msg = e.what();
    if (msg.rfind(op->type(), 0) != 0 && msg.find("op " + op->type()) == std::string::npos)
      msg = op->type() + ": " + msg;
    throw EnforceNotMet(msg + CreationSuffix(*op));
  }
}

OpDesc* AppendCheckedOp(BlockDesc* block, const std::string& type, const VarNameMap& inputs, const VarNameMap& outputs,
                        std::map<std::string, Attribute> attrs, int index) {
  OpDesc probe(type);
  if (attrs.count("op_callstack")) probe.SetAttr("op_callstack", attrs["op_callstack"]);
  std::string site = CreationSuffix(probe);
  if (!OpRegistry::Instance().Find(type)) {
    try {
      OpRegistry::Instance().Get(type);
    } catch (const EnforceNotMet& e) {
      throw EnforceNotMet(e.what() + site);
    }
  }
  const OpInfo& info = OpRegistry::Instance().Get(type);
  for (auto& spec : info.attrs) {
    if (attrs.count(spec.name)) continue;
    FL_ENFORCE(!spec.required, "op ", type, ": attribute '", spec.name, "' is required", site);
    attrs[spec.name] = spec.default_value;
  }
  OpDesc* op = index < 0 ? block->AppendOp() : block->InsertOp(static_cast<size_t>(index));
  op->set_type(type);
  for (auto& kv : inputs) op->SetInput(kv.first, kv.second);
  for (auto& kv : outputs) op->SetOutput(kv.first, kv.second);
  for (auto& kv : attrs) op->SetAttr(kv.first, kv.second);
  try {
    ValidateOpDesc(info, *op, block);
    InferShapeAtCompileTime(block, op);
  } catch (...) {
    for (size_t i = 0; i < block->OpSize(); ++i)
      if (block->Op(i) == op) {
        block->RemoveOp(i, i + 1);
        break;
      }
    throw;
  }
  return op;
}

}  // namespace fl
