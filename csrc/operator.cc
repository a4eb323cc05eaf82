#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "cuda_api.h"
#include "logging.h"
#include "op_builder.h"
#include "op_context.h"
#include "profiler.h"
#include "scope.h"
#include "sparse_rows.h"

namespace fl {

static const DDim kNoTensor{-1};  // stands for "no tensor" (a real dim is never -1 at run time)

// An op reading a LoDTensor where the variable holds a LoDTensorArray (without this it read as "not initialized").
[[noreturn]] static void ThrowArrayWhereTensor(const std::string& type, const char* slot, const std::string& name) {
  FL_THROW("op ", type, ": input ", slot, " variable '", name, "' holds a LoDTensorArray, but ", type,
           " reads a LoDTensor there (read an entry with layers.array_read, or join the entries with "
           "layers.tensor_array_to_tensor)");
}

// ------------------------------------------------------------------ shape inference helpers

std::string InferShapeContext::Describe(const char* slot, int i) const {
  return Str(slot, " '", InputName(slot, i), "' ", InputDim(slot, i).ToString());
}

void InferShapeContext::EnforceSameDType(const char* a, const char* b) const {
  const DType da = InputDType(a), db = InputDType(b);
  FL_ENFORCE(da == db || da == DType::UNDEFINED || db == DType::UNDEFINED, Type(), ": ", Describe(a), " is ",
             DTypeName(da), " but ", Describe(b), " is ", DTypeName(db), "; cast one of them (layers.cast)");
}

namespace {

// Thrown when the forward InferShape asks for something the grad op does not have: the check is skipped.
struct ForwardSlotUnavailable {};

// The forward op's view of a grad op's inputs (see CheckAgainstForward).
class ForwardCheckContext : public InferShapeContext {
 public:
  ForwardCheckContext(InferShapeContext& g, const OpInfo& grad) : g_(g), grad_(grad), fwd_(*grad.forward) {}
  bool IsRuntime() const override { return g_.IsRuntime(); }
  const std::string& Type() const override { return grad_.type; }
  const OpInfo& Info() const override { return fwd_; }
  bool HasInput(const char* slot) const override {
    const char* n = InName(slot);
    return n && g_.HasInput(n);
  }
  bool HasOutput(const char* slot) const override {
    const OpInfo::ForwardSlot* m = OutSlot(slot);
    return m && ((m->same >= 0 && g_.HasInput(Name(m->same))) || (m->alt >= 0 && g_.HasInput(Name(m->alt))));
  }
  bool HasInputAt(const char* slot, int i) const override {
    const char* n = InName(slot);
    return n && g_.HasInputAt(n, i);
  }
  bool HasOutputAt(const char* slot, int i) const override {
    const OpInfo::ForwardSlot* m = OutSlot(slot);
    return m && ((m->same >= 0 && g_.HasInputAt(Name(m->same), i)) || (m->alt >= 0 && g_.HasInputAt(Name(m->alt), i)));
  }
  int InputSize(const char* slot) const override { return g_.InputSize(Need(InName(slot))); }
  int OutputSize(const char* slot) const override {
    const OpInfo::ForwardSlot* m = OutSlot(slot);
    if (m && m->same >= 0) return g_.InputSize(Name(m->same));
    if (m && m->alt >= 0) return g_.InputSize(Name(m->alt));
    throw ForwardSlotUnavailable();
  }
  DDim InputDim(const char* slot, int i) const override {
    const char* n = Need(InName(slot));
    if (!g_.HasInputAt(n, i)) throw ForwardSlotUnavailable();
    return g_.InputDim(n, i);
  }
  // A ShapeLike read lends its dtype too, as it does to the gradient (DefaultGradInferShape).
  DType InputDType(const char* slot, int i) const override {
    const char* n = InName(slot);
    return n && g_.HasInputAt(n, i) ? g_.InputDType(n, i) : DType::UNDEFINED;
  }
  VarKind InputKind(const char* slot, int i) const override { return g_.InputKind(Need(InName(slot)), i); }
  const std::string& InputName(const char* slot, int i) const override { return g_.InputName(Need(InName(slot)), i); }
  const std::string& OutputName(const char* slot, int i) const override {
    const OpInfo::ForwardSlot* m = OutSlot(slot);
    if (m && m->same >= 0) return g_.InputName(Name(m->same), i);
    if (m && m->alt >= 0) return g_.InputName(Name(m->alt), i);
    throw ForwardSlotUnavailable();
  }
  // The forward op's Out dims: the grad op's reads of Out and Out@GRAD must have them.
  void SetOutputDim(const char* slot, const DDim& dims, int i) override {
    const OpInfo::ForwardSlot* m = OutSlot(slot);
    if (!m) return;
    for (int k : {m->same, m->alt}) {
      if (k < 0 || !g_.HasInputAt(Name(k), i)) continue;
      const DDim have = g_.InputDim(Name(k), i);
      bool same = have == dims;
      if (!same && !g_.IsRuntime()) {  // at build time: unknown (-1) or unset (rank 0) dims match anything
        same = have.size() == 0 || dims.size() == 0 || have.size() == dims.size();
        for (int d = 0; same && d < have.size() && d < dims.size(); ++d)
          same = have[d] < 0 || dims[d] < 0 || have[d] == dims[d];
      }
      FL_ENFORCE(same, grad_.type, ": ", Name(k), " '", g_.InputName(Name(k), i), "' has dims ", have, " but ",
                 fwd_.type, " computes ", slot, " ", dims, " from the inputs and attributes (", AttrList(), ") ",
                 grad_.type, " was given");
    }
  }
  void SetOutputDType(const char*, DType, int) override {}
  void ShareLoD(const char*, const char*, int, int) override {}
  int InputLoDLevel(const char* slot, int i) const override { return g_.InputLoDLevel(Need(InName(slot)), i); }
  void SetOutputLoDLevel(const char*, int, int) override {}
  const Attribute& GetAttr(const std::string& name) const override { return g_.GetAttr(name); }

 private:
  const char* Name(int grad_input) const { return grad_.inputs[grad_input].name.c_str(); }
  // "axis = 0, ..." for the forward op's own attributes (not the common op_* ones).
  std::string AttrList() const {
    std::string s;
    for (auto& a : fwd_.attrs) s += (s.empty() ? "" : ", ") + a.name + " = " + AttrToString(g_.GetAttr(a.name));
    return s;
  }
  // The grad op's input holding forward input `slot` (its ShapeLike read when it does not read it), or null.
  const char* InName(const char* slot) const {
    const int k = fwd_.InputIndex(slot);
    if (k < 0) return nullptr;
    const OpInfo::ForwardSlot& m = grad_.forward_inputs[k];
    return m.same >= 0 ? Name(m.same) : m.alt >= 0 ? Name(m.alt) : nullptr;
  }
  static const char* Need(const char* n) {
    if (!n) throw ForwardSlotUnavailable();
    return n;
  }
  const OpInfo::ForwardSlot* OutSlot(const char* slot) const {
    const int k = fwd_.OutputIndex(slot);
    return k < 0 ? nullptr : &grad_.forward_outputs[k];
  }
  InferShapeContext& g_;
  const OpInfo& grad_;
  const OpInfo& fwd_;
};

}  // namespace

bool CheckAgainstForward(InferShapeContext& grad_ctx) {
  const OpInfo& grad = grad_ctx.Info();
  if (!grad.forward || !grad.forward->infer_shape) return false;
  ForwardCheckContext ctx(grad_ctx, grad);
  try {
    grad.forward->infer_shape(ctx);
  } catch (const ForwardSlotUnavailable&) {
    return false;  // the forward op needs an input the grad op does not read: what could be checked was
  }
  return true;
}

void SameShapeAsInput(InferShapeContext& ctx, const char* in, const char* out) {
  ctx.SetOutput(out, ctx.InputDim(in), ctx.InputDType(in));
  ctx.ShareLoD(in, out);
}

// ------------------------------------------------------------------ PreparedOp

PreparedOp::PreparedOp(const OpInfo* info, const OpDesc* desc)
    : info_(info), desc_(desc), check_forward_(info->forward && info->forward->infer_shape) {
  ValidateOpDesc(*info, *desc);  // attributes may have changed since the op was built (op._set_attr)
  attrs_.reserve(info->attrs.size());
  for (auto& spec : info->attrs) {
    auto it = desc->attrs().find(spec.name);
    attrs_.push_back(it == desc->attrs().end() ? &spec.default_value : &it->second);
    if (spec.name == "force_cpu" && spec.type() == AttrType::BOOLEAN)
      force_cpu_ = AttrCast<bool>(*attrs_.back(), "force_cpu");
  }
  ins_.resize(info->inputs.size());
  outs_.resize(info->outputs.size());
}

void PreparedOp::Bind(Scope& scope) {
  scope_ = &scope;
  auto resolve = [&](const std::vector<SlotSpec>& specs, const VarNameMap& args,
                     std::vector<std::vector<Variable*>>& out, const char* side) {
    for (auto& v : out) v.clear();
    for (auto& kv : args) {
      int idx = -1;
      for (size_t i = 0; i < specs.size(); ++i)
        if (specs[i].name == kv.first) idx = static_cast<int>(i);
      FL_ENFORCE(idx >= 0, "op ", info_->type, " has no ", side, " slot '", kv.first, "'");
      for (auto& name : kv.second) {
        if (name == kEmptyVarName) {
          out[idx].push_back(nullptr);
          continue;
        }
        Variable* var = scope.FindVar(name);
        FL_ENFORCE(var != nullptr, "op ", info_->type, ": ", side, " ", kv.first, " variable '", name,
                   "' does not exist in the scope");
        out[idx].push_back(var);
      }
    }
  };
  resolve(info_->inputs, desc_->inputs(), ins_, "input");
  resolve(info_->outputs, desc_->outputs(), outs_, "output");
  CheckAliases();
  grad_lod_.clear();
  auto role = desc_->attrs().find("op_role");
  const bool backward = role != desc_->attrs().end() && std::holds_alternative<int32_t>(role->second) &&
                        (std::get<int32_t>(role->second) & static_cast<int>(OpRole::kBackward));
  if (backward && !info_->run)
    for (auto& kv : desc_->outputs())
      for (auto& name : kv.second) {
        if (name == kEmptyVarName || !IsGradName(name)) continue;
        const Variable* fwd = scope.FindVar(StripGradSuffix(name));
        Variable* grad = scope.FindVar(name);
        if (fwd && grad && fwd != grad) grad_lod_.emplace_back(grad, fwd);
      }
}

void PreparedOp::LogRun(const Place& place, bool after) const {
  if (after) {
    FL_VLOG(3) << DebugString(place);
  } else {
    FL_VLOG(4) << DebugString(place);
  }
}

void PreparedOp::ShareForwardLoDWithGrads() const {
  for (auto& [grad, fwd] : grad_lod_) {
    const Tensor* f = fwd->GetTensor();
    Tensor* g = grad->IsSelectedRows() ? nullptr : grad->GetTensor() ? grad->GetMutableTensor() : nullptr;
    if (!f || !g || f->lod().empty() || !g->lod().empty() || !f->IsInitialized() || !g->IsInitialized()) continue;
    if (f->rank() > 0 && g->rank() > 0 && f->dims()[0] == g->dims()[0]) g->set_lod(f->lod());
  }
}

// An output bound to the variable of an input: kernels write Out while reading X, so unless the op
// declares the pair in place (it reads each element before writing it) the result would be garbage.
void PreparedOp::CheckAliases() {
  inplace_.clear();
  for (size_t o = 0; o < outs_.size(); ++o)
    for (Variable* ov : outs_[o]) {
      if (!ov) continue;
      for (size_t i = 0; i < ins_.size(); ++i)
        for (size_t k = 0; k < ins_[i].size(); ++k) {
          if (ins_[i][k] != ov) continue;
          const std::string& out = info_->outputs[o].name;
          const std::string& in = info_->inputs[i].name;
          if (info_->AllowsInplace(out, in)) {
            inplace_.push_back({ov, &out, &in, &desc_->Input(in).at(k), DDim{}});
            continue;
          }
          FL_THROW("op ", info_->type, ": output ", out, " and input ", in, " are the same variable '",
                   desc_->Input(in).at(k), "', but ", info_->type,
                   " does not compute in place; give the output a variable of its own", CreationSuffix(*desc_));
        }
    }
}

class RuntimeInferShapeContext : public InferShapeContext {
 public:
  explicit RuntimeInferShapeContext(const PreparedOp& op) : op_(op) {}
  bool IsRuntime() const override { return true; }
  const std::string& Type() const override { return op_.info_->type; }
  const OpInfo& Info() const override { return *op_.info_; }
  bool HasInputAt(const char* slot, int i) const override {
    const auto& vars = In(slot);
    if (i < 0 || i >= static_cast<int>(vars.size()) || !vars[i]) return false;
    const Tensor* t = TensorOrValue(vars[i]);
    return t && t->IsInitialized();
  }
  bool HasOutputAt(const char* slot, int i) const override {
    const auto& vars = Out(slot);
    return i >= 0 && i < static_cast<int>(vars.size()) && vars[i];
  }
  bool HasInput(const char* slot) const override {
    int i = op_.info_->InputIndex(slot);
    return i >= 0 && !op_.ins_[i].empty() && op_.ins_[i][0] != nullptr;
  }
  bool HasOutput(const char* slot) const override {
    int i = op_.info_->OutputIndex(slot);
    return i >= 0 && !op_.outs_[i].empty() && op_.outs_[i][0] != nullptr;
  }
  int InputSize(const char* slot) const override { return static_cast<int>(In(slot).size()); }
  int OutputSize(const char* slot) const override { return static_cast<int>(Out(slot).size()); }
  DDim InputDim(const char* slot, int i) const override {
    // A SelectedRows input has the dims of the dense tensor it stands for (Fluid's GetCompleteDims).
    if (const SelectedRows* sr = InRows(slot, i)) return sr->CompleteDims();
    return InTensor(slot, i).dims();
  }
  DType InputDType(const char* slot, int i) const override {
    if (const SelectedRows* sr = InRows(slot, i)) return sr->value.dtype();
    return InTensor(slot, i).dtype();
  }
  VarKind InputKind(const char* slot, int i) const override {
    const auto& vars = In(slot);
    const Variable* v = i >= 0 && i < static_cast<int>(vars.size()) ? vars[i] : nullptr;
    if (v && v->IsTensorList()) return VarKind::LOD_TENSOR_ARRAY;
    if (v && v->IsSelectedRows()) return VarKind::SELECTED_ROWS;
    if (v && v->IsRankTable()) return VarKind::LOD_RANK_TABLE;
    if (v && v->IsStepScopes()) return VarKind::STEP_SCOPES;
    return VarKind::LOD_TENSOR;
  }
  const std::string& InputName(const char* slot, int i) const override { return op_.desc_->Input(slot).at(i); }
  const std::string& OutputName(const char* slot, int i) const override { return op_.desc_->Output(slot).at(i); }
  void SetOutputDim(const char* slot, const DDim& dims, int i) override {
    Variable* v = Out(slot).at(i);
    if (v && !v->IsSelectedRows()) v->GetMutableTensor()->Resize(dims);  // a sparse kernel shapes its own
  }
  void SetOutputDType(const char*, DType, int) override {}  // the kernel's mutable_data<T> sets it
  void ShareLoD(const char* in, const char* out, int i, int j) override {
    Variable* v = Out(out).at(j);
    if (!v || v->IsSelectedRows()) return;
    if (InRows(in, i)) v->GetMutableTensor()->set_lod({});
    else v->GetMutableTensor()->set_lod(InTensor(in, i).lod());
  }
  int InputLoDLevel(const char* slot, int i) const override {
    return InRows(slot, i) ? 0 : static_cast<int>(InTensor(slot, i).lod().size());
  }
  void SetOutputLoDLevel(const char*, int, int) override {}  // the kernel sets the output's LoD
  const Attribute& GetAttr(const std::string& name) const override {
    ExecutionContext ctx(op_, Place::CPU());
    return ctx.GetAttr(name.c_str());
  }

 private:
  const std::vector<Variable*>& In(const char* slot) const {
    static const std::vector<Variable*> kNone;
    int i = op_.info_->InputIndex(slot);
    return i < 0 ? kNone : op_.ins_[i];
  }
  const std::vector<Variable*>& Out(const char* slot) const {
    static const std::vector<Variable*> kNone;
    int i = op_.info_->OutputIndex(slot);
    return i < 0 ? kNone : op_.outs_[i];
  }
  const SelectedRows* InRows(const char* slot, int i) const {
    const auto& vars = In(slot);
    if (i < 0 || i >= static_cast<int>(vars.size()) || !vars[i]) return nullptr;
    const SelectedRows* sr = vars[i]->GetSelectedRows();
    return sr && sr->value.IsInitialized() ? sr : nullptr;
  }
  const Tensor& InTensor(const char* slot, int i) const {
    const auto& vars = In(slot);
    FL_ENFORCE(i < static_cast<int>(vars.size()) && vars[i], "op ", op_.info_->type, " has no input ", slot);
    const Tensor* t = vars[i]->GetTensor();
    if (!t && vars[i]->IsTensorList()) ThrowArrayWhereTensor(op_.info_->type, slot, op_.desc_->Input(slot).at(i));
    FL_ENFORCE(t && t->IsInitialized(), "op ", op_.info_->type, ": input ", slot, " variable '",
               op_.desc_->Input(slot).at(i), "' is not initialized (was it fed or computed before this op?)");
    return *t;
  }
  const PreparedOp& op_;
};

namespace {

void AppendArgs(std::string& s, const std::vector<SlotSpec>& specs, const VarNameMap& names,
                const std::vector<std::vector<Variable*>>& vars) {
  // Fluid prints params in sorted order (std::map); VarNameMap keeps insertion order, so sort here.
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return names[a].first < names[b].first; });
  bool first = true;
  for (size_t k : order) {
    const auto& slot = names[k].first;
    int idx = -1;
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == slot) idx = static_cast<int>(i);
    if (!first) s += ", ";
    first = false;
    s += slot + "[";
    for (size_t j = 0; j < names[k].second.size(); ++j) {
      if (j) s += ", ";
      const std::string& n = names[k].second[j];
      Variable* v = (idx >= 0 && j < vars[idx].size()) ? vars[idx][j] : nullptr;
      const Tensor* t = TensorOrValue(v);
      if (!t) {
        s += n + "[uninited]";
        continue;
      }
      if (v->IsSelectedRows()) {  // Fluid prints a SelectedRows by its value's dims, without LoD
        s += n + ":" + (t->IsInitialized() ? DTypeCppName(t->dtype()) : "") + t->dims().ToString() + "()";
        continue;
      }
      s += n + ":" + (t->IsInitialized() ? DTypeCppName(t->dtype()) : "") + t->dims().ToString() + "(" +
           (t->IsInitialized() ? t->LoDString() : "{{}}") + ")";
    }
    s += "]";
  }
}

DType DefaultKernelDType(const PreparedOp& op, const OpInfo& info) {
  ExecutionContext ctx(op, Place::CPU());
  auto first_tensor = [&ctx](const std::string& slot) -> const Tensor* {
    for (int i = 0; i < ctx.InputSize(slot.c_str()); ++i) {
      if (const SelectedRows* sr = ctx.InputRowsOrNull(slot.c_str(), i)) return &sr->value;
      if (const Tensor* t = ctx.InputOrNull(slot.c_str(), i)) return t;
    }
    return nullptr;
  };
  // The preferred slot (a grad op's Out@GRAD) when it holds a tensor, else the first input that does.
  if (!info.kernel_dtype_slot.empty())
    if (const Tensor* t = first_tensor(info.kernel_dtype_slot)) return t->dtype();
  for (auto& slot : info.inputs)
    if (const Tensor* t = first_tensor(slot.name)) return t->dtype();
  // No input tensor: ops like fill_constant choose by their dtype attr.
  if (info.FindAttr("dtype")) return static_cast<DType>(ctx.Attr<int32_t>("dtype"));
  FL_THROW("op ", info.type, " has no initialized input tensor to choose a kernel dtype from");
}

}  // namespace

std::string PreparedOp::DebugString(const Place& place) const {
  std::string s = place.ToString() + " Op(" + info_->type + "), inputs:{";
  AppendArgs(s, info_->inputs, desc_->inputs(), ins_);
  s += "}, outputs:{";
  AppendArgs(s, info_->outputs, desc_->outputs(), outs_);
  return s + "}.";
}

// Profiler args show a level of up to 8 offsets in full, a longer one as its first 6, "..." and the last, so that a
// batch of many sequences keeps its args short.
constexpr size_t kProfiledLoDOffsets = 8;

namespace {

// A JSON string literal's body: the names and paths profiled here are plain, but a quote or backslash in one must
// not break the trace.
std::string JsonEscaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// "X":["a","b"],"Y":["w"] for the slots of one side, in declaration order.
void AppendSlotVars(std::string& out, const std::vector<SlotSpec>& specs, const OpDesc& desc, bool inputs) {
  bool first = true;
  for (const SlotSpec& spec : specs) {
    const auto& names = inputs ? desc.Input(spec.name) : desc.Output(spec.name);
    if (names.empty()) continue;
    if (!first) out += ",";
    first = false;
    out += "\"" + spec.name + "\":[";
    for (size_t j = 0; j < names.size(); ++j) out += (j ? ",\"" : "\"") + JsonEscaped(names[j]) + "\"";
    out += "]";
  }
}

}  // namespace

// The op's place in its program (block, index), found once: the profiler names it so that an event can be
// matched to the program's op.
void PreparedOp::FindPosition() {
  position_found_ = true;
  const ProgramDesc* program = desc_->program();
  if (!program) return;
  for (size_t b = 0; b < program->Size(); ++b) {
    const auto& ops = program->Block(b)->AllOps();
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].get() == desc_) {
        block_index_ = static_cast<int>(b);
        op_index_ = static_cast<int>(i);
        return;
      }
  }
}

const char* PreparedOp::ProfileArgs() {
  // Fast path: compare the current dims and LoDs with those the cached string was built from.
  if (profile_args_) {
    size_t k = 0;
    bool same = true;
    for (const auto* side : {&ins_, &outs_})
      for (const auto& slot : *side)
        for (Variable* v : slot) {
          const Tensor* t = TensorOrValue(v);
          if (k >= profiled_dims_.size() || !(t ? t->dims() == profiled_dims_[k] : profiled_dims_[k] == kNoTensor) ||
              (t ? t->lod_version() : 0) != profiled_lods_[k]) {
            same = false;
          }
          ++k;
        }
    if (same && k == profiled_dims_.size()) return profile_args_;
  }
  profiled_dims_.clear();
  profiled_lods_.clear();
  std::string parts[2] = {"\"", "\""};
  int side_index = 0;
  for (const auto* side : {&ins_, &outs_}) {
    const auto& specs = side_index == 0 ? info_->inputs : info_->outputs;
    std::string& out = parts[side_index++];
    for (size_t s = 0; s < side->size(); ++s)
      for (Variable* v : (*side)[s]) {
        const Tensor* t = TensorOrValue(v);
        DDim d = t ? t->dims() : kNoTensor;
        profiled_dims_.push_back(d);
        profiled_lods_.push_back(t ? t->lod_version() : 0);
        if (!t) continue;
        if (out.size() > 1) out += ", ";
        out += specs[s].name + d.ToString();
        if (!t->lod().empty() && !v->IsSelectedRows()) out += "(" + LoDString(t->lod(), kProfiledLoDOffsets) + ")";
      }
  }
  // Attribution: the variables of each slot, where the user created the op, and its place in the program.
  if (!position_found_) FindPosition();
  std::string args = "\"inputs\":" + parts[0] + "\",\"outputs\":" + parts[1] + "\",\"input_vars\":{";
  AppendSlotVars(args, info_->inputs, *desc_, true);
  args += "},\"output_vars\":{";
  AppendSlotVars(args, info_->outputs, *desc_, false);
  args += "}";
  const std::string site = desc_->CreationSite();
  if (!site.empty()) args += ",\"site\":\"" + JsonEscaped(site) + "\"";
  // An op an IR pass made from others (fused_reduce, ...) names them: one profiler row, the ops it stands for.
  if (desc_->HasAttr("fused_ops"))
    if (auto* fused = std::get_if<std::vector<std::string>>(&desc_->GetAttr("fused_ops"))) {
      args += ",\"fused_ops\":[";
      for (size_t j = 0; j < fused->size(); ++j) args += (j ? ",\"" : "\"") + JsonEscaped((*fused)[j]) + "\"";
      args += "]";
    }
  if (op_index_ >= 0) args += Str(",\"block\":", block_index_, ",\"index\":", op_index_);
  profile_args_ = Intern(args);
  return profile_args_;
}

std::string PreparedOp::ArgumentHolding(const void* p) const {
  int side_index = 0;
  for (const auto* side : {&ins_, &outs_}) {
    const auto& specs = side_index++ == 0 ? info_->inputs : info_->outputs;
    for (size_t s = 0; s < side->size(); ++s)
      for (size_t j = 0; j < (*side)[s].size(); ++j) {
        const Tensor* t = TensorOrValue((*side)[s][j]);
        if (!t || !t->IsInitialized()) continue;
        const char* begin = static_cast<const char*>(t->raw_data());
        if (p < begin || p >= begin + std::max<size_t>(t->nbytes(), 1)) continue;
        const auto& names = side == &ins_ ? desc_->Input(specs[s].name) : desc_->Output(specs[s].name);
        return j < names.size() ? names[j] : "";
      }
  }
  return "";
}

// ------------------------------------------------------------------ copy attribution

namespace {

// A copy's cause when the code making it did not say: from the type of the op running it.
const char* CauseOfOp(const std::string& type) {
  static const std::unordered_map<std::string, const char*> causes = {
      {"feed", "feed"},
      {"fetch", "fetch"},
      {"assign", "assign"},
      {"select_input", "assign"},
      {"select_output", "assign"},
      {"split_lod_tensor", "assign"},
      {"merge_lod_tensor", "assign"},
      {"reorder_lod_tensor_by_rank", "assign"},
      {"write_to_array", "array"},
      {"read_from_array", "array"},
      {"lod_tensor_to_array", "array"},
      {"array_to_lod_tensor", "array"},
      {"tensor_array_to_tensor", "array"},
      {"rnn_memory_helper", "memory_link"},
      {"rnn_memory_helper_grad", "memory_link"},
      {"shrink_rnn_memory", "memory_link"},
      {"sum", "gradient"},
  };
  auto it = causes.find(type);
  if (it != causes.end()) return it->second;
  if (type.size() > 5 && type.compare(type.size() - 5, 5, "_grad") == 0) return "gradient";
  return "other";
}

}  // namespace

CopyAttribution DescribeCopy(const void* src, const void* dst) {
  CopyAttribution a;
  const PreparedOp* op = CurrentOp();
  const CopyCause* given = CopyCause::Current();
  if (op) a.op = op->info()->type;
  a.cause = given ? given->cause : (op ? CauseOfOp(a.op) : "other");
  if (given && given->src) a.src = *given->src;
  else if (op) a.src = op->ArgumentHolding(src);
  if (given && given->dst) a.dst = *given->dst;
  else if (op) a.dst = op->ArgumentHolding(dst);
  // A feed reads from, and a fetch writes into, a list variable (no tensor of its own holds the bytes): name it.
  if (op && a.src.empty() && a.op == "feed") a.src = op->desc()->Input("X").at(0);
  if (op && a.dst.empty() && a.op == "fetch") a.dst = op->desc()->Output("Out").at(0);
  a.step = given ? given->step : -1;
  return a;
}

std::string CopyAttribution::Json() const {
  std::string s = Str("\"cause\":\"", cause, "\",\"op\":\"", JsonEscaped(op), "\",\"src\":\"", JsonEscaped(src),
                      "\",\"dst\":\"", JsonEscaped(dst), "\"");
  if (step >= 0) s += Str(",\"step\":", step);
  return s;
}

std::string CopyAttribution::Text() const {
  std::string s = Str(" for ", cause);
  if (!src.empty() || !dst.empty()) s += Str(" ", src.empty() ? "?" : src, " -> ", dst.empty() ? "?" : dst);
  if (step >= 0) s += Str(" at step ", step);
  if (!op.empty()) s += Str(" (op ", op, ")");
  return s;
}

bool PreparedOp::InputDimsChanged(const std::vector<DDim>& dims) const {
  size_t k = 0;
  for (const auto& slot : ins_)
    for (Variable* v : slot) {
      const Tensor* t = TensorOrValue(v);
      const DDim& d = t && t->IsInitialized() ? t->dims() : kNoTensor;
      if (k >= dims.size() || !(d == dims[k])) return true;
      ++k;
    }
  return k != dims.size();
}

void PreparedOp::RecordInputDims(std::vector<DDim>& dims) const {
  dims.clear();
  for (const auto& slot : ins_)
    for (Variable* v : slot) {
      const Tensor* t = TensorOrValue(v);
      dims.push_back(t && t->IsInitialized() ? t->dims() : kNoTensor);
    }
}

void PreparedOp::Run(const Place& place) {
  // An op that computes on a SelectedRows X's value (sparse_rows.h): its kernel runs on the value (merged
  // first where the op needs it) and Out becomes SelectedRows with X's rows and height.
  if (!ins_.empty() && ins_[0].size() == 1 && ins_[0][0] && ins_[0][0]->IsSelectedRows() && !outs_.empty() &&
      outs_[0].size() == 1 && outs_[0][0]) {
    if (const bool* merge = FindSelectedRowsValueOp(info_->type)) {
      Variable* xv = ins_[0][0];
      Variable* ov = outs_[0][0];
      const std::string what = Str("op ", info_->type, ": input ", info_->inputs[0].name, " '",
                                   desc_->Input(info_->inputs[0].name).at(0), "'");
      SelectedRows in = *merge ? MergeAdd(*xv->GetSelectedRows(), what) : *xv->GetSelectedRows();
      Variable value_in, value_out;
      *value_in.GetMutableTensor() = in.value;
      ins_[0][0] = &value_in;
      outs_[0][0] = &value_out;
      try {
        Run(place);
      } catch (...) {
        ins_[0][0] = xv;
        outs_[0][0] = ov;
        throw;
      }
      ins_[0][0] = xv;
      outs_[0][0] = ov;
      SelectedRows out;
      out.rows = std::move(in.rows);
      out.height = in.height;
      out.value = *value_out.GetTensor();
      *ov->GetMutableSelectedRows() = std::move(out);
      return;
    }
  }
  ExecutionContext ctx(*this, place);
  if (info_->run) {
    info_->run(ctx);
    return;
  }
  // Fluid's OpDetail: the kernel and the shape inference as children of the op's event.
  const bool detail = ProfilerEnabled() && ProfilerOpDetail();
  if (detail && !detail_names_[0]) {
    detail_names_[0] = Intern(info_->type + "/infer_shape");
    detail_names_[1] = Intern(info_->type + "/compute");
  }
  if (info_->infer_shape) {
    RecordEvent infer_event(detail ? detail_names_[0] : nullptr, "OperatorInner", detail);
    RuntimeInferShapeContext isc(*this);
    if (check_forward_ && InputDimsChanged(forward_checked_dims_)) {
      check_forward_ = CheckAgainstForward(isc);
      RecordInputDims(forward_checked_dims_);  // only once it passed: a failing op fails again next run
    }
    if (inplace_.empty()) {
      info_->infer_shape(isc);
    } else {
      // An in-place output must keep its input's shape: elementwise_add(X=[4], Y=[3, 4], Out=X) cannot
      // write 12 values over the 4 it reads. InferShape already resized the shared tensor: restore it.
      for (auto& a : inplace_) {
        const Tensor* t = a.var->GetTensor();
        a.before = t && t->IsInitialized() ? t->dims() : kNoTensor;
      }
      info_->infer_shape(isc);
      for (auto& a : inplace_) {
        const Tensor* t = a.var->GetTensor();
        if (a.before == kNoTensor || t->dims() == a.before) continue;
        DDim now = t->dims();
        a.var->GetMutableTensor()->Resize(a.before);
        FL_THROW("op ", info_->type, ": output ", *a.out_slot, " is input ", *a.in_slot, "'s variable '", *a.name,
                 "' (in place), but its shape would change from ", a.before, " to ", now,
                 "; give the output a variable of its own");
      }
    }
  }
  DType dt = info_->kernel_dtype ? info_->kernel_dtype(ctx) : DefaultKernelDType(*this, *info_);
  if (kernel_ == nullptr || dt != kernel_dtype_ || place != requested_place_) {
    const Place kp = KernelPlaceFor(place, dt);
    kernel_ = info_->FindKernel(kp.kind, dt);
    FL_ENFORCE(kernel_ != nullptr, "op ", info_->type, " does not have a kernel for data_type[", DTypeCppName(dt),
               "] on ", place.ToString(), " (registered: ", info_->KernelListString(), ")");
    kernel_dtype_ = dt;
    kernel_place_ = kp;
    requested_place_ = place;
    FL_VLOG(3) << "expected_kernel_key:data_type[" << DTypeCppName(dt) << "]:data_layout[ANY_LAYOUT]:place["
               << kp.ToString() << "]:library_type[PLAIN]";
  }
  {
    // Tensors can only be elsewhere once a GPU was used: a CPU program in a CPU process pays one load here. The
    // kernel reads the copies; the op's own inputs are back when it returns or throws.
    struct Restore {
      PreparedOp* op;
      size_t n;
      ~Restore() {
        if (n) op->RestoreInputs(n);
      }
    } restore{this, kernel_place_.is_gpu() || DeviceMemoryUsed() ? TransferInputs(kernel_place_) : 0};
    RecordEvent compute_event(detail ? detail_names_[1] : nullptr, "OperatorInner", detail);
    // Profiled on a GPU: the op's kernels are a span on the device's stream track.
    const int64_t span = kernel_place_.is_gpu() && ProfilerEnabled() ? Cuda()->span_begin(kernel_place_.device) : -1;
    (*kernel_)(kernel_place_ == place ? ctx : ExecutionContext(*this, kernel_place_));
    if (span >= 0) Cuda()->span_end(kernel_place_.device, span, info_->type.c_str(), "GPUKernel", nullptr, -1);
  }
  if (!grad_lod_.empty()) ShareForwardLoDWithGrads();
}

Place PreparedOp::KernelPlaceFor(const Place& place, DType dt) const {
  if (!place.is_gpu()) return place;
  if (!force_cpu_ && info_->FindKernel(PlaceKind::CUDA, dt)) return place;
  if (info_->FindKernel(PlaceKind::CPU, dt)) {
    FL_VLOG(3) << "op " << info_->type << " runs its CPU kernel in a " << place.ToString() << " program ("
               << (force_cpu_ ? "force_cpu is set" : "it has no CUDA kernel for " + std::string(DTypeName(dt)))
               << "): its inputs on the GPU are copied to the CPU";
    return Place::CPU();
  }
  return place;  // neither: the caller reports the missing kernel
}

size_t PreparedOp::TransferInputs(const Place& kernel_place) {
  size_t n = 0;
  for (size_t s = 0; s < ins_.size(); ++s)
    for (size_t i = 0; i < ins_[s].size(); ++i) {
      Variable* v = ins_[s][i];
      const Tensor* t = v && v->IsTensor() ? v->GetTensor() : nullptr;
      if (!t || !t->IsInitialized()) continue;
      const bool elsewhere = kernel_place.is_gpu() ? t->place() != kernel_place : !t->place().is_host();
      if (!elsewhere) continue;
      if (n == transfers_.size()) transfers_.push_back(Transfer{s, i, nullptr, std::make_shared<Variable>()});
      Transfer& tr = transfers_[n++];
      tr.slot = s;
      tr.index = i;
      tr.original = v;
      const std::string& name = desc_->Input(info_->inputs[s].name).at(i);
      CopyCause why("place_transform", &name, &name);
      Tensor* copy = tr.copy->GetMutableTensor();
      TensorCopy(*t, kernel_place, copy);
      ins_[s][i] = tr.copy.get();
    }
  return n;
}

void PreparedOp::RestoreInputs(size_t n) {
  for (size_t k = 0; k < n; ++k) ins_[transfers_[k].slot][transfers_[k].index] = transfers_[k].original;
}

// ------------------------------------------------------------------ ExecutionContext

const std::vector<Variable*>& ExecutionContext::InVars(const char* slot) const {
  int i = op_.info_->InputIndex(slot);
  FL_ENFORCE(i >= 0, "op ", op_.info_->type, " has no input slot '", slot, "'");
  return op_.ins_[i];
}

const std::vector<Variable*>& ExecutionContext::OutVars(const char* slot) const {
  int i = op_.info_->OutputIndex(slot);
  FL_ENFORCE(i >= 0, "op ", op_.info_->type, " has no output slot '", slot, "'");
  return op_.outs_[i];
}

Variable* ExecutionContext::InputVar(const char* slot, int i) const {
  const auto& vars = InVars(slot);
  FL_ENFORCE(i >= 0 && i < static_cast<int>(vars.size()) && vars[i] != nullptr, "op ", op_.info_->type, ": input ",
             slot, "[", i, "] is not given (or is ", kEmptyVarName, ")");
  return vars[i];
}

Variable* ExecutionContext::OutputVar(const char* slot, int i) const {
  const auto& vars = OutVars(slot);
  FL_ENFORCE(i >= 0 && i < static_cast<int>(vars.size()) && vars[i] != nullptr, "op ", op_.info_->type, ": output ",
             slot, "[", i, "] is not given (or is ", kEmptyVarName, ")");
  return vars[i];
}

bool ExecutionContext::HasInput(const char* slot) const {
  int i = op_.info_->InputIndex(slot);
  return i >= 0 && !op_.ins_[i].empty() && op_.ins_[i][0] != nullptr;
}

bool ExecutionContext::HasOutput(const char* slot) const {
  int i = op_.info_->OutputIndex(slot);
  return i >= 0 && !op_.outs_[i].empty() && op_.outs_[i][0] != nullptr;
}

const std::string& ExecutionContext::InputName(const char* slot, int i) const { return op_.desc_->Input(slot).at(i); }
const std::string& ExecutionContext::OutputName(const char* slot, int i) const { return op_.desc_->Output(slot).at(i); }

const Tensor* ExecutionContext::InputOrNull(const char* slot, int i) const {
  const auto& vars = InVars(slot);
  if (i >= static_cast<int>(vars.size()) || !vars[i]) return nullptr;
  // Only ops that handle sparse gradients read SelectedRows (InputRowsOrNull, first): any other op gets an error.
  FL_ENFORCE(!vars[i]->IsSelectedRows(), "op ", op_.info_->type, ": input ", slot, " variable '",
             op_.desc_->Input(slot).at(i), "' holds a SelectedRows (a sparse gradient), but ", op_.info_->type,
             " reads a dense LoDTensor there");
  const Tensor* t = vars[i]->GetTensor();
  if (!t && vars[i]->IsTensorList()) ThrowArrayWhereTensor(op_.info_->type, slot, op_.desc_->Input(slot).at(i));
  return t && t->IsInitialized() ? t : nullptr;
}

const SelectedRows* ExecutionContext::InputRowsOrNull(const char* slot, int i) const {
  const auto& vars = InVars(slot);
  if (i >= static_cast<int>(vars.size()) || !vars[i]) return nullptr;
  const SelectedRows* sr = vars[i]->GetSelectedRows();
  return sr && sr->value.IsInitialized() ? sr : nullptr;
}

const Tensor& ExecutionContext::Input(const char* slot, int i) const {
  const Tensor* t = InputOrNull(slot, i);
  if (!t) {
    const auto& names = op_.desc_->Input(slot);
    FL_THROW("op ", op_.info_->type, ": input ", slot, " variable '",
             i < static_cast<int>(names.size()) ? names[i] : std::string("?"),
             "' is not initialized (was it fed or computed before this op?)");
  }
  return *t;
}

std::vector<const Tensor*> ExecutionContext::MultiInput(const char* slot) const {
  std::vector<const Tensor*> r;
  const auto& vars = InVars(slot);
  for (size_t i = 0; i < vars.size(); ++i) r.push_back(InputOrNull(slot, static_cast<int>(i)));
  return r;
}

Tensor* ExecutionContext::OutputOrNull(const char* slot, int i) const {
  int idx = op_.info_->OutputIndex(slot);
  if (idx < 0 || i >= static_cast<int>(op_.outs_[idx].size()) || !op_.outs_[idx][i]) return nullptr;
  return op_.outs_[idx][i]->GetMutableTensor();
}

Tensor* ExecutionContext::Output(const char* slot, int i) const {
  Tensor* t = OutputOrNull(slot, i);
  FL_ENFORCE(t != nullptr, "op ", op_.info_->type, " has no output ", slot, "[", i, "]");
  return t;
}

std::vector<Tensor*> ExecutionContext::MultiOutput(const char* slot) const {
  std::vector<Tensor*> r;
  const auto& vars = OutVars(slot);
  for (Variable* v : vars) r.push_back(v ? v->GetMutableTensor() : nullptr);
  return r;
}

const Attribute& ExecutionContext::GetAttr(const char* name) const {
  const auto& specs = op_.info_->attrs;
  for (size_t i = 0; i < specs.size(); ++i)
    if (std::strcmp(specs[i].name.c_str(), name) == 0) return *op_.attrs_[i];
  return op_.desc_->GetAttr(name);
}

}  // namespace fl
