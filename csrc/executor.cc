#include "executor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "logging.h"
#include "op_builder.h"
#include "profiler.h"

namespace fl {

namespace {
std::atomic<int64_t> g_num_prepared{0};
constexpr const char* kFeedVar = "feed";
constexpr const char* kFetchVar = "fetch";
}  // namespace

namespace {

// Tensors smaller than this keep their buffers: releasing them saves little and costs an allocation
// per run (the 1000-op `overhead` chain of [16] tensors would pay it 1000 times).
constexpr size_t kEagerReleaseBytes = size_t(64) << 10;

inline void ReleaseAfter(const std::vector<std::vector<Variable*>>* release, size_t i) {
  if (!release) return;
  for (Variable* v : (*release)[i]) {
    if (!v->IsTensor()) continue;
    Tensor* t = v->GetMutableTensor();
    if (t->holder() && t->holder()->size() >= kEagerReleaseBytes) t->Clear();
  }
}

// Fluid's FLAGS_eager_delete_tensor_gb: negative turns eager deletion off (default 0: on).
bool EagerDeletion() {
  const char* env = std::getenv("FLAGS_eager_delete_tensor_gb");
  return !env || std::atof(env) >= 0;
}

}  // namespace

int64_t PreparedProgram::NumPrepared() { return g_num_prepared.load(); }

void CreateBlockVariables(const BlockDesc& block, Scope* persist_scope, Scope* local) {
  RecordEvent ev("Executor::create_variables", "Executor");
  for (auto& v : block.AllVars()) {
    if (v->persistable()) {
      if (!persist_scope->FindVar(v->name())) {
        persist_scope->Var(v->name());
        FL_VLOG(3) << "Create Variable " << v->name() << " global";
      }
    } else if (!local->FindLocalVar(v->name())) {
      local->Var(v->name());
      FL_VLOG(3) << "Create Variable " << v->name() << " locally";
    }
  }
}

PreparedProgram::PreparedProgram(const ProgramDesc& program, int block_id, Scope* scope, const Place& place,
                                 const std::vector<std::string>& feed_names,
                                 const std::vector<std::string>& fetch_names)
    : program_(std::make_unique<ProgramDesc>(program)),
      block_id_(block_id),
      scope_(scope),
      place_(place),
      num_fetch_(fetch_names.size()) {
  RecordEvent ev("Executor::prepare", "Executor");
  FL_ENFORCE(scope_ != nullptr, "Executor: no scope to run in (got None)");
  g_num_prepared.fetch_add(1);
  BlockDesc* block = program_->Block(block_id);
  // Fluid's layout: feed ops first (X=[feed], col=i), fetch ops last (Out=[fetch], col=i).
  VarDesc* feed = block->Var(kFeedVar);
  feed->set_kind(VarKind::FEED_MINIBATCH);
  feed->set_persistable(true);
  VarDesc* fetch = block->Var(kFetchVar);
  fetch->set_kind(VarKind::FETCH_LIST);
  fetch->set_persistable(true);
  for (size_t i = 0; i < feed_names.size(); ++i) {
    VarDesc* target = block->FindVarRecursive(feed_names[i]);
    FL_ENFORCE(target != nullptr, "feed: variable '", feed_names[i], "' is not in the program");
    std::string site;  // data vars have no creating op: point at the first op that reads the var
    for (auto& op : block->AllOps()) {
      auto args = op->InputArgumentNames();
      if (std::find(args.begin(), args.end(), feed_names[i]) == args.end()) continue;
      std::string where = op->CreationSite();
      site = " (read by op " + op->type() + (where.empty() ? "" : " created at " + where) + ")";
      break;
    }
    feed_targets_.push_back({feed_names[i], target->dtype(), target->shape(), site});
    OpDesc* op = block->InsertOp(i);
    op->set_type("feed");
    op->SetInput("X", {kFeedVar});
    op->SetOutput("Out", {feed_names[i]});
    op->SetAttr("col", static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < fetch_names.size(); ++i) {
    FL_ENFORCE(block->FindVarRecursive(fetch_names[i]) != nullptr, "fetch: variable '", fetch_names[i],
               "' is not in the program");
    OpDesc* op = block->AppendOp();
    op->set_type("fetch");
    op->SetInput("X", {fetch_names[i]});
    op->SetOutput("Out", {kFetchVar});
    op->SetAttr("col", static_cast<int32_t>(i));
  }
  for (auto& op : block->AllOps())
    ops_.push_back(std::make_unique<PreparedOp>(&OpRegistry::Instance().Get(op->type()), op.get()));
  try {
    CreateVariablesAndBind();
  } catch (...) {  // the destructor will not run: do not leave the kid scope behind
    if (local_ && scope_->HasKid(local_, local_uid_)) scope_->DeleteScope(local_);
    throw;
  }
}

PreparedProgram::~PreparedProgram() {
  // After scope.drop_kids() local_ is gone; a kid the user created since may sit at the same address.
  // scope_ itself may be gone when it was a kid scope whose parent dropped its kids.
  if (local_ && Scope::IsAlive(scope_) && scope_->HasKid(local_, local_uid_)) scope_->DeleteScope(local_);
}

void PreparedProgram::CreateVariablesAndBind() {
  if (!local_ || !scope_->HasKid(local_, local_uid_)) {
    local_ = &scope_->NewScope();
    local_uid_ = local_->uid();
  }
  CreateBlockVariables(*program_->Block(block_id_), scope_, local_);
  for (auto& op : ops_) op->Bind(*local_);
  feed_var_ = local_->FindVar(kFeedVar);
  fetch_var_ = local_->FindVar(kFetchVar);
  scope_generation_ = scope_->generation();
  PlanReleases();
}

// Eager deletion, as Fluid's garbage collector: a temporary of this block (not persistable, a LoDTensor,
// created in the kid scope) is released after the last op of the block that reads or writes it. Names
// that any other block mentions are kept: a sub-block (StaticRNN's step block) reads parent variables
// that its op does not list.
void PreparedProgram::PlanReleases() {
  release_.assign(ops_.size(), {});
  if (!EagerDeletion()) return;
  const BlockDesc* block = program_->Block(block_id_);
  std::unordered_set<std::string> keep{kFeedVar, kFetchVar};
  for (size_t b = 0; b < program_->Size(); ++b) {
    if (static_cast<int>(b) == block_id_) continue;
    for (auto& op : program_->Block(b)->AllOps()) {
      for (auto& n : op->InputArgumentNames()) keep.insert(n);
      for (auto& n : op->OutputArgumentNames()) keep.insert(n);
    }
  }
  std::unordered_map<std::string, size_t> last_use;
  const auto& ops = block->AllOps();
  for (size_t i = 0; i < ops.size(); ++i) {
    for (auto& n : ops[i]->InputArgumentNames()) last_use[n] = i;
    for (auto& n : ops[i]->OutputArgumentNames()) last_use[n] = i;
  }
  for (auto& [name, i] : last_use) {
    const VarDesc* v = block->FindVar(name);
    if (!v || v->persistable() || v->kind() != VarKind::LOD_TENSOR || keep.count(name)) continue;
    if (Variable* var = local_->FindLocalVar(name)) release_[i].push_back(var);
  }
}

void PreparedProgram::CheckFeeds(const std::vector<Tensor>& feeds) const {
  FL_ENFORCE(feeds.size() == feed_targets_.size(), "feed: expected ", feed_targets_.size(), " tensors, got ",
             feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const FeedTarget& t = feed_targets_[i];
    const Tensor& f = feeds[i];
    FL_ENFORCE(f.dtype() == t.dtype, "feed: variable '", t.name, "'", t.site, " expects dtype ", DTypeName(t.dtype),
               ", got ", DTypeName(f.dtype()));
    bool ok = f.dims().size() == static_cast<int>(t.shape.size());
    for (int d = 0; ok && d < f.dims().size(); ++d) ok = t.shape[d] < 0 || t.shape[d] == f.dims()[d];
    if (!ok) {
      std::string want = "[";
      for (size_t d = 0; d < t.shape.size(); ++d) want += (d ? ", " : "") + std::to_string(t.shape[d]);
      FL_THROW("feed: variable '", t.name, "'", t.site, " expects shape ", want, "] (-1 = any), got ",
               f.dims().ToString());
    }
  }
}

void RunPreparedOps(std::vector<std::unique_ptr<PreparedOp>>& ops, const Place& place,
                    const std::vector<std::vector<Variable*>>* release) {
  PreparedOp* current = nullptr;
  int64_t open_token = -1;  // the profiled op event to close if the op throws
  ThreadBuffer* buffer = nullptr;
  try {
    if (!ProfilerEnabled()) {
      for (size_t i = 0; i < ops.size(); ++i) {
        current = ops[i].get();
        FL_VLOG(4) << current->DebugString(place);
        current->Run(place);
        FL_VLOG(3) << current->DebugString(place);
        ReleaseAfter(release, i);
      }
      return;
    }
    // Profiled: consecutive op events share a timestamp (one clock read per op).
    buffer = ProfilerThreadBuffer();
    uint64_t t = ProfilerTicks();
    for (size_t i = 0; i < ops.size(); ++i) {
      PreparedOp* op = current = ops[i].get();
      FL_VLOG(4) << op->DebugString(place);
      int64_t token = OpenEventAt(buffer, op->info()->type.c_str(), "Operator", t);
      open_token = token;
      op->Run(place);
      const char* args = token >= 0 ? op->ProfileArgs() : nullptr;
      t = ProfilerTicks();
      open_token = -1;
      if (token >= 0) CloseEventAt(buffer, token, t, args);
      FL_VLOG(3) << op->DebugString(place);
      ReleaseAfter(release, i);
    }
  } catch (const std::exception& e) {
    // Close the failing op's event: never closed, it was missing from the profile (and without an
    // enclosing RAII event it would stay on the thread's nesting stack).
    if (open_token >= 0) CloseEventAt(buffer, open_token, ProfilerTicks(), nullptr);
    std::string msg = e.what();
    const std::string& type = current->info()->type;
    if (msg.rfind("op " + type, 0) != 0 && msg.rfind(type + ":", 0) != 0) msg = "op " + type + ": " + msg;
    throw EnforceNotMet(msg + CreationSuffix(*current->desc()));
  }
}

std::vector<Tensor> PreparedProgram::Run(std::vector<Tensor> feeds) {
  std::lock_guard<std::mutex> lock(run_mu_);
  RecordEvent ev("Executor::run", "Executor");
  CheckFeeds(feeds);
  if (scope_->generation() != scope_generation_) CreateVariablesAndBind();
  *feed_var_->GetMutableTensorList() = std::move(feeds);
  TensorList* fetched = fetch_var_->GetMutableTensorList();
  fetched->assign(num_fetch_, Tensor());
  struct ClearFeeds {  // borrowed numpy memory must not outlive this call, even on error
    Variable* v;
    ~ClearFeeds() { v->GetMutableTensorList()->clear(); }
  } clear{feed_var_};
  RunPreparedOps(ops_, place_, &release_);
  ++runs_;
  std::vector<Tensor> out = std::move(*fetched);
  fetched->clear();
  return out;
}

}  // namespace fl
