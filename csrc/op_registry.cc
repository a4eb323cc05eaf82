#include "op_registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "enforce.h"
#include "grad_op_maker.h"

namespace fl {

namespace {
template <typename V>
const typename V::value_type* FindByName(const V& v, const std::string& n) {
  for (auto& s : v)
    if (s.name == n) return &s;
  return nullptr;
}
template <typename V>
int IndexByName(const V& v, const char* n) {
  for (size_t i = 0; i < v.size(); ++i)
    if (std::strcmp(v[i].name.c_str(), n) == 0) return static_cast<int>(i);
  return -1;
}
}  // namespace

const SlotSpec* OpInfo::FindInput(const std::string& n) const { return FindByName(inputs, n); }
const SlotSpec* OpInfo::FindOutput(const std::string& n) const { return FindByName(outputs, n); }
const AttrSpec* OpInfo::FindAttr(const std::string& n) const { return FindByName(attrs, n); }
int OpInfo::InputIndex(const char* n) const { return IndexByName(inputs, n); }
int OpInfo::OutputIndex(const char* n) const { return IndexByName(outputs, n); }
bool OpInfo::AllowsInplace(const std::string& out, const std::string& in) const {
  for (auto& p : inplace)
    if (p.first == out && p.second == in) return true;
  return false;
}

bool OpInfo::HasAnyKernel() const {
  for (auto& per_place : kernels)
    for (auto& k : per_place)
      if (k) return true;
  return false;
}

std::string OpInfo::KernelListString() const {
  std::string s;
  const char* places[] = {"CPU", "CUDA"};
  for (int p = 0; p < kNumPlaceKinds; ++p) {
    std::string l;
    for (int d = 0; d < kNumDTypeSlots; ++d)
      if (kernels[p][d]) l += (l.empty() ? "" : ",") + std::string(DTypeName(static_cast<DType>(d)));
    if (!l.empty()) s += (s.empty() ? "" : "; ") + std::string(places[p]) + ":" + l;
  }
  return s.empty() ? "none" : s;
}

const char* GradKindName(GradKind k) {
  switch (k) {
    case GradKind::kComposed: return "composed";
    case GradKind::kGradOp: return "grad_op";
    case GradKind::kNoGradient: return "no_gradient";
    default: return "none";
  }
}

// ------------------------------------------------------------------ attribute rules

std::string AttrSpec::Violation(const Attribute& value) const {
  for (auto& check : checks) {
    std::string why = check(value);
    if (!why.empty()) return why;
  }
  return "";
}

namespace {

// The first number of an INT, LONG or FLOAT, or of an INTS, LONGS or FLOATS list, that `ok` rejects, as
// "" when all pass (or the attribute holds no numbers), else "must be ..." / "element i (v) must be ...".
template <typename F>
std::string FirstBadNumber(const Attribute& a, F ok, const std::string& rule) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
          return ok(static_cast<double>(v)) ? "" : "must be " + rule;
        } else if constexpr (std::is_same_v<T, std::vector<int32_t>> || std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<float>>) {
          for (size_t i = 0; i < v.size(); ++i)
            if (!ok(static_cast<double>(v[i]))) return Str("element ", i, " (", v[i], ") must be ", rule);
          return "";
        } else {
          return "";
        }
      },
      a);
}

bool IsList(const Attribute& a) {
  switch (TypeOf(a)) {
    case AttrType::INTS:
    case AttrType::FLOATS:
    case AttrType::STRINGS:
    case AttrType::BOOLEANS:
    case AttrType::BLOCKS:
    case AttrType::LONGS: return true;
    default: return false;
  }
}

size_t ListSize(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string> || !std::is_class_v<T> || std::is_same_v<T, BlockRef>) return 0;
        else return v.size();
      },
      a);
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return Str(v);
}

}  // namespace

OpBuilder& OpBuilder::Constrain(const std::string& text, AttrCheckFn fn) {
  FL_ENFORCE(!info_->attrs.empty(), "op ", info_->type, ": a rule on attribute values follows an Attr declaration");
  AttrSpec& a = info_->attrs.back();
  a.checks.push_back(std::move(fn));
  a.constraint += (a.constraint.empty() ? "" : "; ") + text;
  return *this;
}

OpBuilder& OpBuilder::Range(double lo, double hi) {
  const bool list = !info_->attrs.empty() && IsList(info_->attrs.back().default_value);
  const std::string rule = std::isinf(hi)   ? ">= " + Num(lo)
                           : std::isinf(lo) ? "<= " + Num(hi)
                                            : "in [" + Num(lo) + ", " + Num(hi) + "]";
  return Constrain((list ? "each " : "") + rule, [lo, hi, rule](const Attribute& a) {
    return FirstBadNumber(a, [lo, hi](double v) { return v >= lo && v <= hi; }, rule);
  });
}

OpBuilder& OpBuilder::Min(double lo) { return Range(lo, std::numeric_limits<double>::infinity()); }

OpBuilder& OpBuilder::Size(size_t lo, size_t hi) {
  const std::string text = lo == hi ? Str(lo, lo == 1 ? " value" : " values") : Str(lo, " to ", hi, " values");
  return Constrain(text, [lo, hi, text](const Attribute& a) -> std::string {
    const size_t n = ListSize(a);
    return !IsList(a) || (n >= lo && n <= hi) ? "" : Str("must have ", text, ", not ", n);
  });
}

OpBuilder& OpBuilder::OneOf(std::vector<std::string> values) {
  std::string text;
  for (auto& v : values) text += (text.empty() ? "'" : ", '") + v + "'";
  text = "one of " + text;
  return Constrain(text, [values, text](const Attribute& a) -> std::string {
    const std::string* s = std::get_if<std::string>(&a);
    return !s || std::find(values.begin(), values.end(), *s) != values.end() ? "" : "must be " + text;
  });
}

OpBuilder& OpBuilder::Axis() {
  Range(-DDim::kMaxRank, DDim::kMaxRank - 1);
  if (!info_->attrs.empty() && IsList(info_->attrs.back().default_value)) Size(0, DDim::kMaxRank);
  return *this;
}

OpBuilder& OpBuilder::DTypeValue(bool allow_unset) {
  return Constrain(allow_unset ? "a VarType dtype value or -1" : "a VarType dtype value",
                   [allow_unset](const Attribute& a) -> std::string {
                     const int32_t* v = std::get_if<int32_t>(&a);
                     if (!v || (allow_unset && *v == -1) || IsKnownDType(static_cast<DType>(*v))) return "";
                     std::string known;
#define FL_DTYPE_LIST(name, value, type, fluid_name, cpp_name, format) \
  known += Str(known.empty() ? "" : ", ", value, " (", fluid_name, ")");
                     FL_FOR_EACH_DTYPE(FL_DTYPE_LIST)
#undef FL_DTYPE_LIST
                     return "must be a dtype: " + known + (allow_unset ? ", or -1" : "");
                   });
}

// ------------------------------------------------------------------ OpCheckContext

const Attribute& OpCheckContext::GetAttr(const std::string& name) const {
  auto it = desc_.attrs().find(name);
  if (it != desc_.attrs().end()) return it->second;
  const AttrSpec* spec = info_.FindAttr(name);
  FL_ENFORCE(spec != nullptr, "op ", info_.type, " has no attribute '", name, "'");
  return spec->default_value;
}

int OpCheckContext::InputSize(const char* slot) const {
  return info_.InputIndex(slot) < 0 ? -1 : static_cast<int>(desc_.Input(slot).size());
}

int OpCheckContext::OutputSize(const char* slot) const {
  return info_.OutputIndex(slot) < 0 ? -1 : static_cast<int>(desc_.Output(slot).size());
}

// ------------------------------------------------------------------ the gradient clause

OpBuilder& OpBuilder::NonDifferentiable(std::initializer_list<const char*> inputs) {
  for (const char* n : inputs) {
    bool found = false;
    for (auto& s : info_->inputs)
      if (s.name == n) s.no_grad = found = true;
    FL_ENFORCE(found, "op ", info_->type, ": NonDifferentiable names no input '", n, "' (declare inputs first)");
  }
  return *this;
}

OpBuilder& OpBuilder::Grad(GradMakerFn composed) {
  info_->grad_kind = GradKind::kComposed;
  info_->grad_maker = composed;
  return *this;
}

OpBuilder& OpBuilder::NoGradient() {
  info_->grad_kind = GradKind::kNoGradient;
  info_->grad_maker = nullptr;
  return *this;
}

OpBuilder OpBuilder::GradOp(std::vector<std::string> reads) {
  info_->grad_kind = GradKind::kGradOp;
  info_->grad_maker = MakeDerivedGradOp;
  info_->grad_op = info_->type + "_grad";
  OpInfo* grad = OpRegistry::Instance().GetOrCreate(info_->grad_op);
  grad->forward = info_;
  grad->grad_reads = std::move(reads);
  return OpBuilder(grad);
}

OpBuilder& OpBuilder::Optional(std::vector<std::string> reads) {
  for (auto& r : reads) info_->optional_reads.push_back(r);
  return *this;
}

OpBuilder& OpBuilder::AcceptsUnread(std::vector<std::string> reads) {
  for (auto& r : reads) info_->unread_reads.push_back(r);
  return *this;
}

OpBuilder& OpBuilder::ShapeLike(const std::string& input, const std::string& read) {
  info_->shape_like.emplace_back(input, read);
  return *this;
}

// ------------------------------------------------------------------ the registry

OpRegistry& OpRegistry::Instance() {
  static OpRegistry* r = new OpRegistry();
  return *r;
}

OpInfo* OpRegistry::GetOrCreate(const std::string& type) {
  auto& slot = ops_[type];
  if (!slot) {
    slot = std::make_unique<OpInfo>();
    slot->type = type;
  }
  return slot.get();
}

const OpInfo* OpRegistry::Find(const std::string& type) const {
  auto it = ops_.find(type);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpInfo& OpRegistry::Get(const std::string& type) const {
  const OpInfo* i = Find(type);
  FL_ENFORCE(i != nullptr, "unknown op type '", type, "' (", ops_.size(),
             " ops are registered; fluidlite.core.op_types() lists them)");
  return *i;
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The grad op's slots, attributes and defaults, from its forward op and its list of reads.
void DeriveGradOp(OpInfo& grad) {
  const OpInfo& fwd = *grad.forward;
  const std::string& type = grad.type;
  FL_ENFORCE(grad.inputs.empty() && grad.outputs.empty(), "grad op ", type,
             " declares its own slots: they are derived from ", fwd.type, "'s registration");
  for (const std::string& r : grad.grad_reads) {
    const bool optional = Contains(grad.optional_reads, r) || Contains(grad.unread_reads, r);
    const SlotSpec* s = fwd.FindInput(r);
    if (s == nullptr) s = fwd.FindOutput(r);
    if (s != nullptr) {
      grad.inputs.push_back(SlotSpec{r, "forward " + r + ": " + s->doc, s->duplicable, optional || s->dispensable});
      continue;
    }
    const std::string base = SlotOfGrad(r);
    const SlotSpec* out = fwd.FindOutput(base);
    FL_ENFORCE(out != nullptr, "grad op ", type, " reads ", r, ", which is neither a slot of ", fwd.type,
               " nor the gradient of one of its outputs");
    grad.inputs.push_back(SlotSpec{r, "gradient of " + base, out->duplicable, optional || out->dispensable});
  }
  for (auto& r : grad.optional_reads)
    FL_ENFORCE(Contains(grad.grad_reads, r), "grad op ", type, ": optional read ", r, " is not read");
  for (auto& r : grad.unread_reads)
    FL_ENFORCE(Contains(grad.grad_reads, r), "grad op ", type, ": unread read ", r, " is not in its reads");
  for (const SlotSpec& in : fwd.inputs) {
    if (in.no_grad) continue;
    grad.outputs.push_back(SlotSpec{GradName(in.name), "gradient of " + in.name, in.duplicable, true});
    std::string source = grad.FindInput(in.name) ? in.name : "";
    for (auto& [x, like] : grad.shape_like) {
      if (x != in.name) continue;
      FL_ENFORCE(grad.FindInput(like) != nullptr, "grad op ", type, ": ", GradName(x), " takes the shape of ", like,
                 ", which it does not read");
      source = like;
    }
    FL_ENFORCE(grad.infer_shape != nullptr || !source.empty(), "grad op ", type, " does not read ", in.name,
               ": say with ShapeLike whose shape ", GradName(in.name), " takes, or give an InferShape");
    grad.grad_shape_sources.emplace_back(GradName(in.name), source);
  }
  std::vector<AttrSpec> attrs = fwd.attrs;  // inherited, never restated
  for (auto& a : grad.attrs) {
    FL_ENFORCE(fwd.FindAttr(a.name) == nullptr, "grad op ", type, " restates ", fwd.type, "'s attribute '", a.name,
               "': grad ops inherit the forward attributes");
    attrs.push_back(a);
  }
  grad.attrs = std::move(attrs);
  if (!grad.check) grad.check = fwd.check;
  // Where CheckAgainstForward finds each forward slot among the grad op's inputs.
  for (const SlotSpec& in : fwd.inputs) {
    OpInfo::ForwardSlot f;
    f.same = grad.InputIndex(in.name.c_str());
    for (auto& [x, like] : grad.shape_like)
      if (x == in.name) f.alt = grad.InputIndex(like.c_str());
    grad.forward_inputs.push_back(f);
  }
  for (const SlotSpec& out : fwd.outputs)
    grad.forward_outputs.push_back({grad.InputIndex(out.name.c_str()), grad.InputIndex(GradName(out.name).c_str())});
  if (grad.doc.empty()) grad.doc = "Gradient of " + fwd.type + ".";
  if (!grad.infer_shape) grad.infer_shape = DefaultGradInferShape;
  if (grad.kernel_dtype_slot.empty() && !grad.kernel_dtype) {
    for (auto& r : grad.grad_reads)
      if (!fwd.FindInput(r) && !fwd.FindOutput(r)) {
        grad.kernel_dtype_slot = r;
        break;
      }
  }
}

}  // namespace

void OpRegistry::Finalize() {
  if (finalized_) return;
  for (auto& kv : ops_) {
    OpInfo& info = *kv.second;
    // Kernels added to a type nothing defines (a typo in a .cu file's FL_REGISTER_CUDA_KERNELS) fail the import.
    FL_ENFORCE(info.forward || info.run || !info.inputs.empty() || !info.outputs.empty() || !info.doc.empty(), "op ",
               info.type, " has kernels (", info.KernelListString(),
               ") but no definition: no .cc registers it with FL_REGISTER_OP");
    if (info.forward) DeriveGradOp(info);
    FL_ENFORCE(info.grad_kind != GradKind::kGradOp || Find(info.grad_op) != nullptr, "op ", info.type,
               " names grad op ", info.grad_op, ", which is not registered");
    for (auto& [out, in] : info.inplace)
      FL_ENFORCE(info.FindOutput(out) && info.FindInput(in), "op ", info.type, " declares Inplace(", out, ", ", in,
                 ") but has no such output or input slot");
  }
  finalized_ = true;
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> r;
  for (auto& kv : ops_) r.push_back(kv.first);
  return r;
}

const std::vector<AttrSpec>& CommonAttrs() {
  static const std::vector<AttrSpec> attrs = {
      {"op_role", Attribute(int32_t(0)), "Forward 0, Backward 1, Optimize 2, LRSched 16, Loss 0x100", false},
      {"op_role_var", Attribute(std::vector<std::string>{}), "parameter/gradient pairs this op updates", false},
      {"op_namescope", Attribute(std::string("/")), "name scope the op was created in", false},
      {"op_callstack", Attribute(std::vector<std::string>{}), "Python frames that created the op", false},
      {"op_device", Attribute(std::string("")), "device placement hint", false},
  };
  return attrs;
}

}  // namespace fl
