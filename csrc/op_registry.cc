#include "op_registry.h"

#include <cstring>

#include "enforce.h"

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
