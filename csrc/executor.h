// The executor. Prepare turns (program, block, feed names, fetch names, scope) into a PreparedProgram
// once: a private copy of the program with feed/fetch ops, one PreparedOp per op with its kernel
// cached and its variables resolved, persistable vars created in the given scope and temporaries in a
// kid scope that lives as long as the PreparedProgram and is reused by every run. Temporaries of 64 KiB
// and more are released after their last use (eager deletion) into the allocator's cache, smaller ones
// keep their buffers, so a steady-state run takes no new memory from the system. Run executes the whole
// block in C++ and is safe to call with the GIL released.
#pragma once
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "desc.h"
#include "op_context.h"
#include "pass.h"
#include "scope.h"

namespace fl {

struct FeedTarget {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // -1 = any
  std::string site;            // " (read by op T created at f.py:N)" for error messages, or ""
  // fluid.data vars are checked (FeedError on a mismatch); layers.data vars are not, as in Fluid: the fed
  // value's shape and dtype win and a mismatch is only logged (VLOG 1).
  bool need_check = false;
  int lod_level = 0;  // the variable's declared lod_level
};

class PreparedProgram {
 public:
  PreparedProgram(const ProgramDesc& program, int block_id, Scope* scope, const Place& place,
                  const std::vector<std::string>& feed_names, const std::vector<std::string>& fetch_names,
                  const std::vector<std::string>& passes = {}, bool fetch_on_device = false);
  ~PreparedProgram();
  PreparedProgram(const PreparedProgram&) = delete;
  PreparedProgram& operator=(const PreparedProgram&) = delete;

  // feeds[i] goes to feed_names[i]; returns one value per fetch name, a tensor or a tensor array (fresh buffers
  // owned by them).
  FetchList Run(std::vector<Tensor> feeds);

  const std::vector<FeedTarget>& feed_targets() const { return feed_targets_; }
  const ProgramDesc& program() const { return *program_; }
  // What the IR passes named at construction did to the program copy (pass.h), in the order they ran.
  const std::vector<PassResult>& pass_results() const { return pass_results_; }
  Scope* local_scope() const { return local_; }
  Scope* scope() const { return scope_; }
  int64_t num_runs() const { return runs_; }

  static int64_t NumPrepared();  // process-wide count of PreparedProgram constructions

 private:
  void CreateVariablesAndBind();
  void CheckFeeds(std::vector<Tensor>& feeds) const;  // may drop a LoD feed's trailing 1 (see executor.cc)
  void RunOps();
  void PlanReleases();

  std::unique_ptr<ProgramDesc> program_;
  std::vector<PassResult> pass_results_;
  int block_id_;
  Scope* scope_;
  Scope* local_ = nullptr;
  uint64_t scope_uid_ = 0;            // scope_ is alive while a live scope at that address has this uid
  uint64_t local_uid_ = 0;            // local_ is ours only while scope_ has a kid at that address with this uid
  bool writes_persistables_ = false;  // some op outputs a persistable variable (Run locks the scope tree)
  Place place_;
  std::vector<FeedTarget> feed_targets_;
  size_t num_fetch_;
  std::vector<std::unique_ptr<PreparedOp>> ops_;
  // Eager deletion: release_[i] are the temporaries whose last use in the block is op i; after it runs,
  // their memory goes back to the allocator (when a tensor holds at least kEagerReleaseBytes).
  std::vector<std::vector<Variable*>> release_;
  std::vector<Variable*> local_arrays_;  // temporary LOD_TENSOR_ARRAYs of the block: emptied at the start of a run
  Variable* feed_var_ = nullptr;
  Variable* fetch_var_ = nullptr;
  uint64_t scope_generation_ = 0;
  int64_t runs_ = 0;
  // Run releases the GIL: two Python threads running one program would share the kid scope's
  // tensors (reallocating them under each other). Runs of one PreparedProgram are serialised; runs of
  // different ones on one scope tree hold its root's run_lock (shared, or exclusive when they write
  // persistables) and pin their scope (ScopePin).
  std::mutex run_mu_;
};

// Runs an already prepared op list in `scope` (used by the executor and by sub-block ops such as
// recurrent). Errors are rethrown naming the op type and its creation site.
// `release`, when given, lists per op the variables whose tensors to release after it (eager deletion).
void RunPreparedOps(std::vector<std::unique_ptr<PreparedOp>>& ops, const Place& place,
                    const std::vector<std::vector<Variable*>>* release = nullptr);

// Eager deletion (Fluid's FLAGS_eager_delete_tensor_gb: negative turns it off, the default 0 leaves it on), read from
// the environment on each call: whether temporaries are released after their last use. ReleaseTensor is the
// release itself: a tensor holding a buffer of 64 KiB or more drops it (into the allocator's cache); smaller ones
// keep theirs, and a variable that holds no tensor is left alone.
bool EagerDeletion();
void ReleaseTensor(Variable* v);

// Fluid's FLAGS_check_nan_inf (env FLAGS_check_nan_inf=1 or fluid.set_flags): after each op, its float
// outputs are checked and a NaN/Inf raises naming the op, the output, its creation site and the first
// bad element. Read once per block run; off by default.
void SetCheckNanInf(bool on);
bool CheckNanInf();

// Interruptible runs: Ctrl-C sets a flag (a SIGINT handler chained in front of Python's) that runs on
// the thread that called EnableInterrupts check between ops (also between the ops of each recurrent
// step); they stop by throwing Interrupted, which the bindings turn into KeyboardInterrupt.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted (SIGINT)"; }
};
// For one run on the calling thread (Python's main thread): (re)installs the chained handler when
// Python's own is in place and clears the flag (the caller then runs Python's pending signal handlers:
// a Ctrl-C from before is Python's to raise). Destroying it makes the thread uninterruptible.
class InterruptibleRun {
 public:
  InterruptibleRun();
  ~InterruptibleRun();
  InterruptibleRun(const InterruptibleRun&) = delete;
  InterruptibleRun& operator=(const InterruptibleRun&) = delete;
};

// Creates the variables that block `block` declares: persistable ones in `persist_scope` (unless a
// parent already has them), the rest in `local`.
void CreateBlockVariables(const BlockDesc& block, Scope* persist_scope, Scope* local);

}  // namespace fl
