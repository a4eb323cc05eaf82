// The step-block runner: the runtime of the recurrent / recurrent_grad ops (layers.StaticRNN), a small
// executor for a sub-block run once per step of a sequence. kernels/recurrent.cc declares the ops and
// reads their slots into a StepBlockIO; everything else happens here.
//
// Fluid re-created its step scopes, operators and variables on every run, copied memories between steps
// with rnn_memory_helper, and aggregated parameter gradients with a sum op per parameter per step.
// Here:
// - the step block is prepared once per step scope and the step scopes (kids of the running scope,
//   held by the `step_scopes` variable) are reused across runs, so their tensors keep their buffers;
// - step inputs are zero-copy slices of the outer input, memories are linked by sharing the previous
//   step's buffer (rnn_memory_helper shares, it does not copy), outputs are copied once into the outer
//   [seq_len, ...] tensor;
// - both run each step with eager deletion, as the executor runs a block: a variable the step's block
//   declares is released after its last use in it unless another block reads it (the forward values the
//   gradient needs stay), and each parameter's gradient is added into the outer gradient right after its
//   step, then released, so the steps reuse one set of temporaries (cache-hot) instead of each step scope
//   keeping its own.
// Profiler events: "recurrent::step" / "recurrent_grad::step" per step, "recurrent::prepare_step" when a
// step scope's block is (re)prepared, "sum" per parameter-gradient addition (per parameter per step).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "desc.h"
#include "op_context.h"
#include "place.h"
#include "scope.h"
#include "tensor.h"

namespace fl {

// Fluid mode: Fluid 1.x's strategy, kept as a comparison switch so the profiler can show the difference
// (fluid.core.set_recurrent_fluid_mode(True); docs/profiling.md). When on: the step scopes are deleted and
// made anew on every forward run (so every step block is prepared again), memories are copied from the
// previous step instead of shared, rnn_memory_helper and rnn_memory_helper_grad copy instead of sharing,
// and each parameter gradient is added into the outer gradient after every step (a "sum" event per
// parameter per step). Results are the same either way (up to the order of the gradient additions).
// Process-wide; off by default.
void SetRecurrentFluidMode(bool on);
bool RecurrentFluidMode();

// What one run of a step block links: names in the step block and the outer tensors they stand for.
// Step t (t = 0 .. seq_len-1) works on slice `off` = t of every [seq_len, ...] tensor, or seq_len-1-t
// when `reverse`. Null tensors in the gradient lists mean "not wanted" (outputs) or "zeros" (inputs).
struct StepBlockIO {
  using Names = std::vector<std::string>;
  const BlockDesc* block = nullptr;  // the step block (the grad block for Backward)
  int64_t seq_len = 0;
  bool reverse = false;
  const Names* input_names = nullptr;  // step inputs: each step sees its slice of inputs[i], shared
  std::vector<const Tensor*> inputs;
  const Names* ex_states = nullptr;  // memories: ex_states[j] at step t is states[j] of step t-1,
  const Names* states = nullptr;     // initial_states[j] at the first step
  std::vector<const Tensor*> initial_states;
  const Names* output_names = nullptr;  // step outputs, stacked to [seq_len, ...]
  std::vector<Tensor*> outputs;         // Forward only
  // Backward only:
  const Names* parameter_names = nullptr;   // outer variables the step block reads
  std::vector<const Tensor*> parameters;    // null where not initialized (read only when needed)
  std::vector<const Tensor*> output_grads;  // per output; null: zeros
  std::vector<Tensor*> input_grads, initial_state_grads, parameter_grads;  // null: not wanted
  // The grad op's own argument names of the output, input and parameter gradients (outer variables; fewer, or
  // "@EMPTY@", where not given). Each names the gradient inside the step too when the grad block declares it (a
  // second fluid.gradients call's block uses its "@GRAD_0" names); otherwise (the outer one renamed later, e.g.
  // to "@RENAME@") the step's is GradName(the variable).
  const Names* output_grad_args = nullptr;
  const Names* input_grad_args = nullptr;
  const Names* parameter_grad_args = nullptr;
};

// Per op of a block, the names of the variables to release after it runs (eager deletion inside a block).
using ReleaseNames = std::vector<std::vector<std::string>>;

// The ops of a block prepared and bound for each of several scopes (slot i: step i's scope), rebuilt only
// for a new or replaced scope (compared by the scope's unique id: a new scope may reuse a deleted one's
// address). Sub-block ops (recurrent, while, conditional_block) keep one in their State, so a block is
// prepared once per step scope, not once per run or per step. `event` names the profiler event recorded
// when a slot is (re)prepared.
class PreparedBlocks {
 public:
  std::vector<std::unique_ptr<PreparedOp>>& Get(size_t slot, Scope* scope, const BlockDesc& block, const char* event);
  size_t size() const { return ops_.size(); }
  // `names` (one list per op of the block) resolved to the variables of the scope that slot `slot` was last
  // prepared for (Get first), as RunPreparedOps's `release` takes them; names that are not local variables of that
  // scope are left out. Resolved once per (re)prepared slot.
  const std::vector<std::vector<Variable*>>* Releases(size_t slot, const ReleaseNames& names);

 private:
  std::vector<uint64_t> scope_uids_;
  std::vector<Scope*> scopes_;
  std::vector<std::vector<std::unique_ptr<PreparedOp>>> ops_;
  std::vector<std::vector<std::vector<Variable*>>> releases_;
  std::vector<bool> releases_resolved_;
};

// Runs a step block over the steps of a sequence in step scopes kept across runs. One per op (the op's
// State): it caches the block prepared and bound for each step scope.
class StepBlockRunner {
 public:
  // Makes `scopes` hold seq_len step scopes (kids of `parent`, reused from earlier runs; in Fluid mode
  // new ones) and runs the block once per step, linking inputs, memories and outputs as `io` says. With eager
  // deletion on (and not in Fluid mode) what no other block reads is released after its last use in the step.
  void Forward(const StepBlockIO& io, Scope& parent, StepScopes* scopes, const Place& place);
  // Runs the grad block over the forward op's step scopes from the last step to the first: each step
  // gets its slice of the output gradients and the memory gradients of the step after it; input,
  // initial-state and parameter gradients go to the outer tensors (parameters: added up step by step).
  // With eager deletion on (and not in Fluid mode) each step's variables are released after their last use.
  void Backward(const StepBlockIO& io, const StepScopes& scopes, const Place& place);

 private:
  // Forward's eager-deletion plan, made on the first run (the op's desc does not change under it).
  const ReleaseNames& PlanForward(const StepBlockIO& io);
  // Backward's names and eager-deletion plan, made on the first run.
  struct GradPlan {
    std::vector<std::string> output_grads, input_grads, parameter_grads;  // their names in the step scopes
    std::vector<char> accumulate;  // per parameter: its one writer adds into the outer gradient (grad_accumulate.h)
    ReleaseNames releases;         // per grad-block op, what to release after it (empty lists: eager deletion off)
    bool eager = false;            // eager deletion was on when the plan was made (the runner releases what it used)
  };
  const GradPlan& PlanBackward(const StepBlockIO& io);

  PreparedBlocks prepared_;
  bool forward_planned_ = false;
  ReleaseNames forward_releases_;
  bool grad_planned_ = false;
  GradPlan grad_plan_;
};

// Adds step `t`'s gradient (`v`, the step scope's variable `grad_name`, possibly null) of a variable shaped like
// `like` into the outer gradient `outer`; `*started` says whether an earlier step did already. The first dense
// contribution becomes the outer gradient: its buffer is taken over (`take`, when no other tensor shares it) or
// copied. A sparse lookup's SelectedRows gradient is added row by row into zeros. One "sum" profiler event.
void AddStepGradient(Variable* v, const std::string& grad_name, int64_t t, const Tensor& like, bool take,
                     const Place& place, Tensor* outer, bool* started);

// Adds up tensor-array gradients computed per step (in step scopes) into the array `out`, entry by entry in one
// pass (an entry only some parts have is their sum; missing or empty entries are skipped). Errors name `what` (the
// op and the gradient). One "sum" profiler event.
void SumArrayGradients(const std::vector<const Variable*>& parts, const std::string& what, const Place& place,
                       Variable* out);

// out = zeros with like's dims and dtype, in a buffer of its own (never one it shared with another tensor).
void FillZerosLike(const Tensor& like, const Place& place, Tensor* out);

}  // namespace fl
