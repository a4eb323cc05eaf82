#include "executor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "comm.h"
#include "cuda_api.h"
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
  for (Variable* v : (*release)[i]) ReleaseTensor(v);
}

}  // namespace

void ReleaseTensor(Variable* v) {
  if (!v->IsTensor()) return;
  Tensor* t = v->GetMutableTensor();
  if (t->holder() && t->holder()->size() >= kEagerReleaseBytes) t->Clear();
}

// Fluid's FLAGS_eager_delete_tensor_gb: negative turns eager deletion off (default 0: on).
bool EagerDeletion() {
  const char* env = std::getenv("FLAGS_eager_delete_tensor_gb");
  return !env || std::atof(env) >= 0;
}

// ------------------------------------------------------------------ FLAGS_check_nan_inf

namespace {

bool FlagFromEnv(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "True") == 0);
}

std::atomic<bool> g_check_nan_inf{FlagFromEnv("FLAGS_check_nan_inf")};

// Index of the first element whose exponent bits are all ones (NaN or +-Inf), or -1. Chunks OR a
// compare over the bits, a loop GCC vectorises; only a chunk that has one is scanned again.
template <typename Bits>
int64_t FirstNonFinite(const void* data, int64_t n, Bits exp_mask) {
  typedef Bits __attribute__((may_alias)) AliasBits;
  const AliasBits* p = static_cast<const AliasBits*>(data);
  constexpr int64_t kChunk = 4096;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t e = std::min(n, b + kChunk);
    Bits bad = 0;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<Bits>((p[i] & exp_mask) == exp_mask);
    if (!bad) continue;
    for (int64_t i = b; i < e; ++i)
      if ((p[i] & exp_mask) == exp_mask) return i;
  }
  return -1;
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::FP32: return static_cast<const float*>(t.raw_data())[i];
    case DType::FP64: return static_cast<const double*>(t.raw_data())[i];
    default: {  // FP16: all exponent bits set; NaN when the mantissa is not zero
      uint16_t bits = static_cast<const uint16_t*>(t.raw_data())[i];
      if (bits & 0x3ff) return NAN;
      return (bits & 0x8000) ? -INFINITY : INFINITY;
    }
  }
}

void CheckOutputsFinite(const PreparedOp& op) {
  RecordEvent ev("check_nan_inf", "Executor");
  const OpInfo& info = *op.info();
  for (size_t s = 0; s < info.outputs.size(); ++s) {
    const auto& vars = op.outputs()[s];
    for (size_t j = 0; j < vars.size(); ++j) {
      const Tensor* t = TensorOrValue(vars[j]);  // a SelectedRows: its value
      if (!t || !t->IsInitialized() || !t->place().is_cpu()) continue;
      int64_t bad;
      switch (t->dtype()) {
        case DType::FP32: bad = FirstNonFinite<uint32_t>(t->raw_data(), t->numel(), 0x7f800000u); break;
        case DType::FP64: bad = FirstNonFinite<uint64_t>(t->raw_data(), t->numel(), 0x7ff0000000000000ull); break;
        case DType::FP16: bad = FirstNonFinite<uint16_t>(t->raw_data(), t->numel(), uint16_t(0x7c00)); break;
        default: continue;
      }
      if (bad < 0) continue;
      std::string index = "[";  // the element's index in every dimension
      int64_t rest = bad;
      std::vector<int64_t> idx(t->dims().size());
      for (int d = t->dims().size() - 1; d >= 0; --d) {
        const int64_t extent = t->dims()[d];
        idx[d] = extent > 0 ? rest % extent : 0;
        rest = extent > 0 ? rest / extent : rest;
      }
      for (size_t d = 0; d < idx.size(); ++d) index += (d ? ", " : "") + std::to_string(idx[d]);
      const double v = ElementAsDouble(*t, bad);
      FL_THROW("op ", info.type, ": output ", info.outputs[s].name, " variable '",
               op.desc()->Output(info.outputs[s].name.c_str()).at(j), "' ", t->dims().ToString(), " contains ",
               std::isnan(v) ? "NaN" : "Inf", ": first at flat index ", bad, " (element ", index, "], value ",
               std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"), ") (FLAGS_check_nan_inf)");
    }
  }
}

// ------------------------------------------------------------------ interrupts

std::atomic<bool> g_sigint{false};
thread_local bool t_interruptible = false;
struct sigaction g_prev_sigint;  // the handler ours chains to (Python's)

void OnSigint(int sig, siginfo_t* info, void* ctx) {
  g_sigint.store(true, std::memory_order_relaxed);
  if (g_prev_sigint.sa_flags & SA_SIGINFO) {
    if (g_prev_sigint.sa_sigaction) g_prev_sigint.sa_sigaction(sig, info, ctx);
  } else if (g_prev_sigint.sa_handler != SIG_DFL && g_prev_sigint.sa_handler != SIG_IGN) {
    g_prev_sigint.sa_handler(sig);
  }
}

[[noreturn]] void ThrowInterrupted() {
  g_sigint.store(false, std::memory_order_relaxed);
  throw Interrupted();
}

}  // namespace

void SetCheckNanInf(bool on) { g_check_nan_inf.store(on, std::memory_order_relaxed); }
bool CheckNanInf() { return g_check_nan_inf.load(std::memory_order_relaxed); }

InterruptibleRun::InterruptibleRun() {
  // Python installs its handler again on signal.signal(SIGINT, f): check ours is still in front (one
  // syscall). SIG_DFL/SIG_IGN (no Python handler) are left alone.
  struct sigaction cur;
  if (sigaction(SIGINT, nullptr, &cur) == 0 &&
      (cur.sa_flags & SA_SIGINFO ? cur.sa_sigaction != OnSigint
                                 : cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)) {
    struct sigaction ours = cur;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = OnSigint;
    g_prev_sigint = cur;
    sigaction(SIGINT, &ours, nullptr);
  }
  g_sigint.store(false, std::memory_order_relaxed);  // a Ctrl-C Python already handled
  t_interruptible = true;
}

InterruptibleRun::~InterruptibleRun() { t_interruptible = false; }

int64_t PreparedProgram::NumPrepared() { return g_num_prepared.load(); }

namespace {

// A new variable takes the kind its desc declares where ops may read it before any op writes it: an empty
// LOD_TENSOR_ARRAY (create_array) has length 0 and fetches as an empty list. The other kinds become what their
// first writer makes them.
void InitVariableKind(const VarDesc& desc, Variable* var) {
  if (desc.kind() == VarKind::LOD_TENSOR_ARRAY && !var->IsInitialized()) var->GetMutableTensorList();
}

}  // namespace

void CreateBlockVariables(const BlockDesc& block, Scope* persist_scope, Scope* local) {
  RecordEvent ev("Executor::create_variables", "Executor");
  for (auto& v : block.AllVars()) {
    if (v->persistable()) {
      if (!persist_scope->FindVar(v->name())) {
        InitVariableKind(*v, persist_scope->Var(v->name()));
        FL_VLOG(3) << "Create Variable " << v->name() << " global";
      }
    } else if (!local->FindLocalVar(v->name())) {
      InitVariableKind(*v, local->Var(v->name()));
      FL_VLOG(3) << "Create Variable " << v->name() << " locally";
    }
  }
}

PreparedProgram::PreparedProgram(const ProgramDesc& program, int block_id, Scope* scope, const Place& place,
                                 const std::vector<std::string>& feed_names,
                                 const std::vector<std::string>& fetch_names, const std::vector<std::string>& passes,
                                 bool fetch_on_device)
    : program_(std::make_unique<ProgramDesc>(program)),
      block_id_(block_id),
      scope_(scope),
      place_(place),
      num_fetch_(fetch_names.size()) {
  RecordEvent ev("Executor::prepare", "Executor");
  FL_ENFORCE(scope_ != nullptr, "Executor: no scope to run in (got None)");
  g_num_prepared.fetch_add(1);
  BlockDesc* block = program_->Block(block_id);
  // The profiler names an op by its index in the user's block: remember it before the passes move ops around
  // (an op a pass made has none).
  std::unordered_map<const OpDesc*, int> user_index;
  for (size_t i = 0; i < block->OpSize(); ++i) user_index[block->Op(i)] = static_cast<int>(i);
  if (!passes.empty()) {
    RecordEvent pass_ev("Executor::apply_passes", "Executor");
    PassContext ctx;
    ctx.protected_vars.insert(feed_names.begin(), feed_names.end());
    ctx.protected_vars.insert(fetch_names.begin(), fetch_names.end());
    ctx.scope = scope_;
    ctx.place = place_;
    pass_results_ = ApplyPasses(*program_, passes, ctx);
  }
  // Fluid's layout: feed ops first (X=[feed], col=i), fetch ops last (Out=[fetch], col=i).
  // The feed/fetch holders are temporaries of this prepared program (its kid scope), not persistable
  // variables of the user's scope: programs prepared on one scope with other fetch lists run
  // concurrently, each with its own holders (Fluid kept them in the scope, shared by all).
  for (auto [name, kind] : {std::pair{kFeedVar, VarKind::FEED_MINIBATCH}, std::pair{kFetchVar, VarKind::FETCH_LIST}}) {
    VarDesc* v = block->FindVar(name);
    FL_ENFORCE(!v || v->kind() == kind, "Executor: the program has a ", v ? VarKindName(v->kind()) : "",
               " variable named '", name, "', a name reserved for the executor's ", name, " list; rename it");
    v = block->Var(name);
    v->set_kind(kind);
    v->set_persistable(false);
  }
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
    feed_targets_.push_back(
        {feed_names[i], target->dtype(), target->shape(), site, target->need_check_feed(), target->lod_level()});
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
    if (fetch_on_device) op->SetAttr("keep_place", true);
  }
  comm::InsertMissingSyncs(*block);  // no op (a fetch included) reads what a collective still carries
  for (auto& op : block->AllOps()) {
    ops_.push_back(std::make_unique<PreparedOp>(&OpRegistry::Instance().Get(op->type()), op.get()));
    // The feed and fetch ops added here and the ops passes made have no index in the user's block.
    auto found = user_index.find(op.get());
    ops_.back()->SetPosition(block_id, found == user_index.end() ? -1 : found->second);
    for (auto& n : op->OutputArgumentNames()) {
      const VarDesc* v = block->FindVarRecursive(n);
      writes_persistables_ = writes_persistables_ || (v && v->persistable());
    }
  }
  scope_uid_ = scope_->uid();
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
  std::lock_guard<std::recursive_mutex> tree(Scope::TreeMutex());
  if (local_ && Scope::IsAlive(scope_, scope_uid_) && scope_->HasKid(local_, local_uid_) && local_->pins() == 0)
    scope_->DeleteScope(local_);
}

void PreparedProgram::CreateVariablesAndBind() {
  if (!local_ || !scope_->HasKid(local_, local_uid_)) {
    local_ = &scope_->NewScope();
    local_uid_ = local_->uid();
  }
  const BlockDesc& block = *program_->Block(block_id_);
  CreateBlockVariables(block, scope_, local_);
  for (auto& op : ops_) op->Bind(*local_);
  local_arrays_.clear();
  for (auto& v : block.AllVars())
    if (!v->persistable() && v->kind() == VarKind::LOD_TENSOR_ARRAY)
      if (Variable* var = local_->FindLocalVar(v->name())) local_arrays_.push_back(var);
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
  // An op with keep_outputs = true (a pass's cache of values derived from parameters, e.g. batch_norm_fold's folded
  // weights) keeps its outputs between runs.
  for (auto& op : ops)
    if (op->HasAttr("keep_outputs") && std::get_if<bool>(&op->GetAttr("keep_outputs")) &&
        std::get<bool>(op->GetAttr("keep_outputs")))
      for (auto& n : op->OutputArgumentNames()) keep.insert(n);
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

namespace {

// Fluid's rule (check_feed_shape_type): same rank, and each dim equal unless either is negative. A fed tensor that
// holds a LoD has any number of rows (Fluid's DiffTensorShapeWithVarDesc skips dim 0 then).
bool FeedShapeFits(const DDim& fed, const std::vector<int64_t>& want, bool has_lod) {
  if (fed.size() != static_cast<int>(want.size())) return false;
  for (int d = has_lod ? 1 : 0; d < fed.size(); ++d)
    if (want[d] >= 0 && want[d] != fed[d]) return false;
  return true;
}

}  // namespace

void PreparedProgram::CheckFeeds(std::vector<Tensor>& feeds) const {
  FL_ENFORCE(feeds.size() == feed_targets_.size(), "feed: expected ", feed_targets_.size(), " tensors, got ",
             feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const FeedTarget& t = feed_targets_[i];
    Tensor& f = feeds[i];
    const bool has_lod = !f.lod().empty();
    // A fed LoD must fit the fed rows: ops read sequences through it (LoDTensor.set after set_lod can leave one
    // that does not).
    if (__builtin_expect(has_lod, 0)) {
      const std::string problem = LoDProblem(f.lod(), f.rank() ? f.dims()[0] : 0);
      if (!problem.empty())
        throw FeedError(Str("feed: variable '", t.name, "' ", f.dims(), " is fed the invalid LoD ", f.LoDString(), ": ",
                            problem, t.site));
    }
    bool shape_ok = FeedShapeFits(f.dims(), t.shape, has_lod);
    // Fluid's create_lod_tensor gives list data a trailing dim of 1 ([T] ids become [T, 1]), and Fluid's feed check
    // never compares ranks, so the book feeds such a tensor to fluid.data(shape=[None], lod_level=1). The rows are
    // the declared shape: the feed is viewed without that dim (a view, the data is untouched).
    if (!shape_ok && has_lod && t.lod_level > 0 && f.rank() == static_cast<int>(t.shape.size()) + 1 &&
        f.dims()[f.rank() - 1] == 1) {
      const DDim squeezed(f.dims().data(), static_cast<size_t>(f.rank() - 1));
      if (FeedShapeFits(squeezed, t.shape, has_lod)) {
        FL_VLOG(1) << "feed: variable '" << t.name << "' declared " << DDim(t.shape).ToString() << " is fed "
                   << f.dims().ToString() << " with a LoD; viewed as " << squeezed.ToString();
        f.Resize(squeezed);
        shape_ok = true;
      }
    }
    if (__builtin_expect(shape_ok && f.dtype() == t.dtype, 1)) continue;
    const std::string want = DDim(t.shape).ToString();
    if (t.need_check) {  // Fluid's wording, so that code matching its messages keeps working
      if (!shape_ok)
        throw FeedError(Str("The fed Variable '", t.name, "' should have dimensions = ", t.shape.size(), ", shape = ",
                            want, ", but received fed shape ", f.dims().ToString(), " on each device", t.site));
      throw FeedError(Str("The data type of fed Variable '", t.name, "' must be ", DTypeName(t.dtype),
                          ", but received ", DTypeName(f.dtype()), t.site));
    }
    FL_VLOG(1) << "feed: variable '" << t.name << "' (layers.data, not checked) is declared " << DTypeName(t.dtype)
               << " " << want << " but fed " << DTypeName(f.dtype()) << " " << f.dims().ToString()
               << "; the fed dtype and shape are used";
  }
}

// Whether any module logs at level 3 or more: only then is the op log line (PreparedOp::LogRun) worth a call.
inline bool OpLogOn() { return g_vlog_max_level.load(std::memory_order_relaxed) >= 3; }

void RunPreparedOps(std::vector<std::unique_ptr<PreparedOp>>& ops, const Place& place,
                    const std::vector<std::vector<Variable*>>* release) {
  PreparedOp* current = nullptr;
  int64_t open_token = -1;  // the profiled op event to close if the op throws
  ThreadBuffer* buffer = nullptr;
  const bool check = CheckNanInf();
  const bool interruptible = t_interruptible;
  const bool profiled = ProfilerEnabled();
  // Copies made by an op are attributed to it (profiler.h: CurrentOp) when they are recorded or logged.
  CurrentOpScope attributing(profiled || g_vlog_max_level.load(std::memory_order_relaxed) >= 4);
  try {
    if (!profiled) {
      for (size_t i = 0; i < ops.size(); ++i) {
        if (__builtin_expect(g_sigint.load(std::memory_order_relaxed), 0) && interruptible) ThrowInterrupted();
        current = ops[i].get();
        attributing.Set(current);
        if (OpLogOn()) current->LogRun(place, false);
        current->Run(place);
        if (__builtin_expect(check, 0)) CheckOutputsFinite(*current);
        if (OpLogOn()) current->LogRun(place, true);
        ReleaseAfter(release, i);
      }
      return;
    }
    // Profiled: the op event spans its Run only; the work between ops (freeing temporaries after their last use,
    // the log checks) stays outside, as the parent's self time (the "gaps" of the report).
    buffer = ProfilerThreadBuffer();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (g_sigint.load(std::memory_order_relaxed) && interruptible) ThrowInterrupted();
      PreparedOp* op = current = ops[i].get();
      attributing.Set(op);
      if (OpLogOn()) op->LogRun(place, false);
      int64_t token = OpenEventAt(buffer, op->info()->type.c_str(), "Operator", ProfilerTicks());
      open_token = token;
      op->Run(place);
      const uint64_t t = ProfilerTicks();
      const char* args = token >= 0 ? op->ProfileArgs() : nullptr;
      open_token = -1;
      if (token >= 0) CloseEventAt(buffer, token, t, args);
      if (check) CheckOutputsFinite(*op);  // its own event, after the op's
      if (OpLogOn()) op->LogRun(place, true);
      ReleaseAfter(release, i);
    }
  } catch (const Interrupted&) {
    if (open_token >= 0) CloseEventAt(buffer, open_token, ProfilerTicks(), nullptr);
    throw;
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

FetchList PreparedProgram::Run(std::vector<Tensor> feeds) {
  std::lock_guard<std::mutex> lock(run_mu_);
  RecordEvent ev("Executor::run", "Executor");
  CheckFeeds(feeds);
  // Pin the scope (and its ancestors) for the run: another thread's drop_kids()/erase_vars() on them
  // raises instead of freeing the variables under it. Checked and pinned atomically with deletions.
  ScopePin pin;
  {
    std::lock_guard<std::recursive_mutex> tree(Scope::TreeMutex());
    FL_ENFORCE(Scope::IsAlive(scope_, scope_uid_),
               "Executor: the scope this program was prepared for was deleted (its parent called drop_kids())");
    pin.Pin(scope_);
  }
  // A program that writes persistables (a training step, a startup program) runs alone on the scope
  // tree; programs that only read them run in parallel.
  std::shared_mutex& rl = scope_->Root()->run_lock();
  std::unique_lock<std::shared_mutex> exclusive(rl, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(rl, std::defer_lock);
  if (writes_persistables_) exclusive.lock();
  else shared.lock();
  if (scope_->generation() != scope_generation_) CreateVariablesAndBind();
  *feed_var_->GetMutableTensorList() = std::move(feeds);
  // Temporary arrays start each run empty, as in Fluid's fresh local scope per run: writes grow them, and a
  // shorter run must not see the entries of a longer one (nor the gradient arrays add up across runs).
  for (Variable* v : local_arrays_)
    if (v->IsTensorList()) v->GetMutableTensorList()->clear();
  FetchList* fetched = fetch_var_->GetMutableFetchList();
  fetched->assign(num_fetch_, Tensor());
  struct ClearFeeds {  // borrowed numpy memory must not outlive this call, even on error
    Variable* v;
    ~ClearFeeds() { v->GetMutableTensorList()->clear(); }
  } clear{feed_var_};
  RunPreparedOps(ops_, place_, &release_);
  // Collectives still queued on a comm stream (no c_sync_comm_stream after them) finish inside this run: no
  // result lands in the scope after Run returns.
  comm::SyncAllRings("Executor::run");
  // A GPU program's kernels are queued: wait for them, so a run's time is its work and a failed kernel raises here.
  if (place_.is_gpu()) Cuda()->synchronize(place_.device);
  ++runs_;
  FetchList out = std::move(*fetched);
  fetched->clear();
  return out;
}

}  // namespace fl
