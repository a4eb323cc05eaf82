// Variables and hierarchical scopes. `Var` creates locally, `FindVar` walks up the parents, kids are
// owned by their parent. Each scope keeps a generation counter that changes whenever variables or
// kids are removed, so executors holding resolved Variable pointers know when to re-resolve.
//
// Threads: a scope's variable map and kid list have their own locks, so lookups and creations may come
// from several threads (Python handles, executors running without the GIL, recurrent steps). A running
// program pins its scopes (ScopePin): while pinned, removing what the run may be using -- DropKids or
// EraseVars on a pinned scope, DeleteScope of a pinned kid -- raises instead of freeing it under the
// run. Structural changes (pins, kid deletion, liveness) are serialised by one process-wide mutex.
#pragma once
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tensor.h"

namespace fl {

class Scope;

using TensorList = std::vector<Tensor>;  // FEED_MINIBATCH / LOD_TENSOR_ARRAY
using StepScopes = std::vector<Scope*>;  // STEP_SCOPES (owned by the scope that created them)
// FETCH_LIST: one value per fetch target, a LoDTensor or a LoDTensorArray (Fluid 1.8's FetchList of FetchType).
using FetchValue = std::variant<Tensor, TensorList>;
using FetchList = std::vector<FetchValue>;

// SELECTED_ROWS (Fluid's sparse gradient): some rows of a [height, ...] tensor. value[i] is row rows[i];
// rows may repeat (a lookup's grad lists each id as seen), and repeated rows add up.
struct SelectedRows {
  std::vector<int64_t> rows;
  int64_t height = 0;
  Tensor value;  // [rows.size(), ...]
  // The dense tensor's dims: [height] + value's dims after the first.
  DDim CompleteDims() const {
    DDim d = value.dims();
    if (d.size() == 0) return DDim{height};
    d[0] = height;
    return d;
  }
};

// LOD_RANK_TABLE (lod_rank_table): the sequences of one LoD level ordered by length, longest first (a stable sort:
// equal lengths keep their order), as (index, length) items, and the coarser levels above that one.
struct LoDRankTable {
  struct Item {
    size_t index;   // the sequence's position in its level
    size_t length;  // its length, in entries of the next level (rows for the last level)
  };
  LoD coarse_lod;  // levels [0, level) of the LoD the table was built from
  std::vector<Item> items;
};

// Shared by its scope and by Python handles (`scope.var(...)`): erasing the variable or dropping its
// scope only detaches it, so a handle kept in Python stays valid instead of dangling.
class Variable : public std::enable_shared_from_this<Variable> {
 public:
  bool IsInitialized() const { return !std::holds_alternative<std::monostate>(value_); }
  bool IsTensor() const { return std::holds_alternative<Tensor>(value_); }
  bool IsTensorList() const { return std::holds_alternative<TensorList>(value_); }
  bool IsStepScopes() const { return std::holds_alternative<StepScopes>(value_); }
  bool IsSelectedRows() const { return std::holds_alternative<SelectedRows>(value_); }
  bool IsRankTable() const { return std::holds_alternative<LoDRankTable>(value_); }

  // Get-or-create accessors: a fresh variable becomes the requested kind; a variable of another kind
  // is an error (names are reused across kinds only by mistake).
  Tensor* GetMutableTensor() { return GetMutable<Tensor>("LoDTensor"); }
  TensorList* GetMutableTensorList() { return GetMutable<TensorList>("tensor list"); }
  const TensorList* GetTensorList() const { return std::get_if<TensorList>(&value_); }
  FetchList* GetMutableFetchList() { return GetMutable<FetchList>("fetch list"); }
  LoDRankTable* GetMutableRankTable() { return GetMutable<LoDRankTable>("LoDRankTable"); }
  const LoDRankTable* GetRankTable() const { return std::get_if<LoDRankTable>(&value_); }
  StepScopes* GetMutableStepScopes() { return GetMutable<StepScopes>("step scopes"); }
  const Tensor* GetTensor() const { return std::get_if<Tensor>(&value_); }
  // A fresh variable, or one holding a tensor without memory (shape inference resized it), becomes
  // SelectedRows: a sparse grad op's output is declared with its dense dims at build time.
  SelectedRows* GetMutableSelectedRows() {
    if (const Tensor* t = std::get_if<Tensor>(&value_); t && !t->IsInitialized()) value_ = SelectedRows();
    return GetMutable<SelectedRows>("SelectedRows");
  }
  const SelectedRows* GetSelectedRows() const { return std::get_if<SelectedRows>(&value_); }
  // A sparse op writing a dense result where an earlier run left SelectedRows: the variable becomes a tensor.
  Tensor* ResetToTensor() {
    if (!std::holds_alternative<Tensor>(value_)) value_ = Tensor();
    return std::get_if<Tensor>(&value_);
  }
  const char* KindName() const;

 private:
  template <typename T>
  T* GetMutable(const char* what) {
    if (std::holds_alternative<std::monostate>(value_)) value_ = T();
    T* p = std::get_if<T>(&value_);
    FL_ENFORCE(p != nullptr, "variable holds a ", KindName(), ", not a ", what);
    return p;
  }
  std::variant<std::monostate, Tensor, TensorList, StepScopes, SelectedRows, FetchList, LoDRankTable> value_;
};

// The tensor a variable holds, or the value of its SelectedRows (debug strings, profiler, nan/inf checks).
inline const Tensor* TensorOrValue(const Variable* v) {
  if (!v) return nullptr;
  if (const SelectedRows* sr = v->GetSelectedRows()) return &sr->value;
  return v->GetTensor();
}

class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  Variable* Var(const std::string& name);                 // find locally or create here (VLOG3 "Create variable n")
  Variable* FindVar(const std::string& name) const;       // this scope, then parents
  Variable* FindLocalVar(const std::string& name) const;  // this scope only
  const Scope* FindScope(const std::string& name) const;  // the scope that holds name, or null
  void EraseVars(const std::vector<std::string>& names);
  std::vector<std::string> LocalVarNames() const;

  Scope& NewScope();
  void DeleteScope(Scope* kid);  // raises if a running program pinned the kid
  void DropKids();               // raises if a running program pinned this scope (it uses a kid)
  size_t NumKids() const;
  const Scope* parent() const { return parent_; }
  const Scope* Root() const;
  Scope* Root() { return const_cast<Scope*>(static_cast<const Scope*>(this)->Root()); }

  // Changes when this scope or any ancestor loses variables or kids (pointers may dangle).
  uint64_t generation() const;
  // Changes when this scope (only) loses variables.
  uint64_t vars_generation() const { return vars_generation_.load(std::memory_order_relaxed); }

  static int64_t LiveScopes();  // process-wide count, for leak tests and the scope summary
  // Whether `s` points at a Scope that has not been deleted (the bindings check Python handles to kid
  // scopes with it: a parent's drop_kids() deletes kids that Python may still reference).
  static bool IsAlive(const Scope* s);
  // Process-unique id: tells a kid apart from a later one that reuses a deleted kid's address.
  uint64_t uid() const { return uid_; }
  // True if `kid` (compared by address, never dereferenced unless found) is a live kid with `uid`.
  bool HasKid(const Scope* kid, uint64_t uid) const;
  // Whether `s` is a live scope with this uid (a new scope may reuse a deleted one's address).
  static bool IsAlive(const Scope* s, uint64_t uid);

  // The process-wide mutex of structural changes: pins, DropKids/DeleteScope/EraseVars checks, the
  // set of live scopes. Recursive: deleting a scope deletes its kids under it.
  static std::recursive_mutex& TreeMutex();
  // Runs writing persistable variables hold their root scope's run lock exclusively, other runs shared
  // (PreparedProgram::Run), so a training step never races another program's reads of the parameters.
  std::shared_mutex& run_lock() { return run_lock_; }
  int pins() const { return pins_.load(std::memory_order_relaxed); }

 private:
  friend class ScopePin;
  void DropKidsLocked();  // TreeMutex held; no pin check (the destructor)

  std::unordered_map<std::string, std::shared_ptr<Variable>> vars_;
  std::list<Scope*> kids_;
  Scope* parent_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> vars_generation_{0};
  // Pins held on this scope or a descendant by running programs (ScopePin).
  std::atomic<int> pins_{0};
  uint64_t uid_ = NextUid();
  static uint64_t NextUid();
  mutable std::mutex vars_mu_;  // guards vars_
  mutable std::mutex mu_;       // guards kids_
  std::shared_mutex run_lock_;
};

// Pins a scope and its ancestors for the lifetime of a run: DropKids, EraseVars and DeleteScope on a
// pinned scope raise a clear error naming the running program instead of freeing its variables.
// Construct with Scope::TreeMutex() held, after checking the scope is alive; releasing is lock-free.
class ScopePin {
 public:
  ScopePin() = default;
  explicit ScopePin(Scope* s) { Pin(s); }
  ~ScopePin() { Release(); }
  ScopePin(const ScopePin&) = delete;
  ScopePin& operator=(const ScopePin&) = delete;
  void Pin(Scope* s);
  void Release();

 private:
  Scope* scope_ = nullptr;
};

}  // namespace fl
