#include "scope.h"

#include <algorithm>
#include <unordered_set>

#include "logging.h"
#include "profiler.h"

namespace fl {

namespace {
std::atomic<int64_t> g_live_scopes{0};

struct AliveSet {
  std::mutex mu;
  std::unordered_set<const Scope*> scopes;
};
AliveSet& Alive() {
  static AliveSet* a = new AliveSet();  // never destroyed: scopes may be deleted during exit
  return *a;
}
}  // namespace

Scope::Scope() {
  AliveSet& a = Alive();
  std::lock_guard<std::mutex> lock(a.mu);
  a.scopes.insert(this);
}

bool Scope::IsAlive(const Scope* s) {
  AliveSet& a = Alive();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.scopes.count(s) != 0;
}

const char* Variable::KindName() const {
  switch (value_.index()) {
    case 0: return "nothing";
    case 1: return "LoDTensor";
    case 2: return "tensor list";
    case 3: return "step scopes";
  }
  return "?";
}

Scope::~Scope() {
  DropKids();
  if (parent_) g_live_scopes.fetch_sub(1, std::memory_order_relaxed);
  AliveSet& a = Alive();
  std::lock_guard<std::mutex> lock(a.mu);
  a.scopes.erase(this);
}

Variable* Scope::Var(const std::string& name) {
  auto it = vars_.find(name);
  if (it != vars_.end()) return it->second.get();
  FL_VLOG(3) << "Create variable " << name;
  auto& slot = vars_[name];
  slot = std::make_shared<Variable>();
  return slot.get();
}

Variable* Scope::FindLocalVar(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

Variable* Scope::FindVar(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_)
    if (Variable* v = s->FindLocalVar(name)) return v;
  return nullptr;
}

const Scope* Scope::FindScope(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_)
    if (s->FindLocalVar(name)) return s;
  return nullptr;
}

void Scope::EraseVars(const std::vector<std::string>& names) {
  for (auto& n : names) vars_.erase(n);
  ++generation_;
}

std::vector<std::string> Scope::LocalVarNames() const {
  std::vector<std::string> r;
  r.reserve(vars_.size());
  for (auto& kv : vars_) r.push_back(kv.first);
  std::sort(r.begin(), r.end());
  return r;
}

Scope& Scope::NewScope() {
  RecordEvent ev("scope::new", "Scope");
  Scope* kid = new Scope();
  kid->parent_ = this;
  g_live_scopes.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  kids_.push_back(kid);
  return *kid;
}

void Scope::DeleteScope(Scope* kid) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(kids_.begin(), kids_.end(), kid);
    FL_ENFORCE(it != kids_.end(), "DeleteScope: the scope is not a kid of this scope");
    kids_.erase(it);
    ++generation_;
  }
  RecordEvent ev("scope::delete", "Scope");
  delete kid;
}

void Scope::DropKids() {
  std::list<Scope*> kids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kids.swap(kids_);
    ++generation_;
  }
  if (kids.empty()) return;
  RecordEvent ev("scope::delete", "Scope");
  for (Scope* k : kids) delete k;
}

const Scope* Scope::Root() const {
  const Scope* s = this;
  while (s->parent_) s = s->parent_;
  return s;
}

uint64_t Scope::generation() const {
  uint64_t g = 0;
  for (const Scope* s = this; s; s = s->parent_) g += s->generation_;
  return g;
}

uint64_t Scope::NextUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool Scope::HasKid(const Scope* kid, uint64_t uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Scope* k : kids_)
    if (k == kid) return k->uid_ == uid;
  return false;
}

int64_t Scope::LiveScopes() { return g_live_scopes.load(std::memory_order_relaxed); }

}  // namespace fl
