#include "scope.h"

#include <algorithm>
#include <unordered_set>

#include "logging.h"
#include "profiler.h"

namespace fl {

namespace {
std::atomic<int64_t> g_live_scopes{0};

// The scopes not yet deleted (guarded by Scope::TreeMutex()).
std::unordered_set<const Scope*>& AliveSet() {
  static auto* a = new std::unordered_set<const Scope*>();  // never destroyed: scopes may be deleted during exit
  return *a;
}
}  // namespace

std::recursive_mutex& Scope::TreeMutex() {
  static auto* mu = new std::recursive_mutex();
  return *mu;
}

Scope::Scope() {
  std::lock_guard<std::recursive_mutex> lock(TreeMutex());
  AliveSet().insert(this);
}

bool Scope::IsAlive(const Scope* s) {
  std::lock_guard<std::recursive_mutex> lock(TreeMutex());
  return AliveSet().count(s) != 0;
}

bool Scope::IsAlive(const Scope* s, uint64_t uid) {
  std::lock_guard<std::recursive_mutex> lock(TreeMutex());
  return AliveSet().count(s) != 0 && s->uid_ == uid;
}

const char* Variable::KindName() const {
  switch (value_.index()) {
    case 0: return "nothing";
    case 1: return "LoDTensor";
    case 2: return "tensor list";
    case 3: return "step scopes";
    case 4: return "SelectedRows";
    case 5: return "fetch list";
    case 6: return "LoDRankTable";
  }
  return "?";
}

Scope::~Scope() {
  std::lock_guard<std::recursive_mutex> lock(TreeMutex());
  DropKidsLocked();
  if (parent_) g_live_scopes.fetch_sub(1, std::memory_order_relaxed);
  AliveSet().erase(this);
}

Variable* Scope::Var(const std::string& name) {
  std::lock_guard<std::mutex> lock(vars_mu_);
  auto it = vars_.find(name);
  if (it != vars_.end()) return it->second.get();
  FL_VLOG(3) << "Create variable " << name;
  auto& slot = vars_[name];
  slot = std::make_shared<Variable>();
  return slot.get();
}

Variable* Scope::FindLocalVar(const std::string& name) const {
  std::lock_guard<std::mutex> lock(vars_mu_);
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

namespace {
const char* kInUse =
    " while a program runs in it in another thread (Executor.run pins the scope it runs in, its kid scopes "
    "and their ancestors); do it when no run uses the scope";
}

void Scope::EraseVars(const std::vector<std::string>& names) {
  std::lock_guard<std::recursive_mutex> tree(TreeMutex());
  FL_ENFORCE(pins_.load(std::memory_order_acquire) == 0, "erase_vars: cannot erase variables of this scope", kInUse);
  {
    std::lock_guard<std::mutex> lock(vars_mu_);
    for (auto& n : names) vars_.erase(n);
  }
  generation_.fetch_add(1, std::memory_order_relaxed);
  vars_generation_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::string> Scope::LocalVarNames() const {
  std::vector<std::string> r;
  {
    std::lock_guard<std::mutex> lock(vars_mu_);
    r.reserve(vars_.size());
    for (auto& kv : vars_) r.push_back(kv.first);
  }
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
  std::lock_guard<std::recursive_mutex> tree(TreeMutex());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(kids_.begin(), kids_.end(), kid);
    FL_ENFORCE(it != kids_.end(), "DeleteScope: the scope is not a kid of this scope");
    FL_ENFORCE(kid->pins_.load(std::memory_order_acquire) == 0, "DeleteScope: cannot delete a scope", kInUse);
    kids_.erase(it);
  }
  generation_.fetch_add(1, std::memory_order_relaxed);
  RecordEvent ev("scope::delete", "Scope");
  delete kid;
}

void Scope::DropKids() {
  std::lock_guard<std::recursive_mutex> tree(TreeMutex());
  FL_ENFORCE(pins_.load(std::memory_order_acquire) == 0, "drop_kids: cannot delete the kid scopes of this scope",
             kInUse);
  DropKidsLocked();
}

void Scope::DropKidsLocked() {
  std::list<Scope*> kids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kids.swap(kids_);
  }
  generation_.fetch_add(1, std::memory_order_relaxed);
  if (kids.empty()) return;
  RecordEvent ev("scope::delete", "Scope");
  for (Scope* k : kids) delete k;
}

size_t Scope::NumKids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kids_.size();
}

void ScopePin::Pin(Scope* s) {
  Release();
  scope_ = s;
  for (Scope* p = s; p; p = p->parent_) p->pins_.fetch_add(1, std::memory_order_relaxed);
}

void ScopePin::Release() {
  if (!scope_) return;
  for (Scope* p = scope_; p; p = p->parent_) p->pins_.fetch_sub(1, std::memory_order_release);
  scope_ = nullptr;
}

const Scope* Scope::Root() const {
  const Scope* s = this;
  while (s->parent_) s = s->parent_;
  return s;
}

uint64_t Scope::generation() const {
  uint64_t g = 0;
  for (const Scope* s = this; s; s = s->parent_) g += s->generation_.load(std::memory_order_relaxed);
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
