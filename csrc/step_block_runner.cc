#include "step_block_runner.h"

#include "grad_accumulate.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "executor.h"
#include "logging.h"
#include "place_math.h"
#include "profiler.h"
#include "sparse_rows.h"

namespace fl {

namespace {

std::atomic<bool> g_fluid_mode{false};

constexpr const char* kStepEvent = "recurrent::step";
constexpr const char* kGradStepEvent = "recurrent_grad::step";
constexpr const char* kPrepareEvent = "recurrent::prepare_step";

Variable* Local(Scope& s, const std::string& name, const char* what) {
  Variable* v = s.FindLocalVar(name);
  FL_ENFORCE(v != nullptr, "recurrent: ", what, " '", name, "' is not declared in the step block");
  return v;
}

// dst = the step `off` slice of src, sharing memory, without the leading dim.
void ShareStep(const Tensor& src, int64_t off, Tensor* dst) {
  Tensor slice = src.Slice(off, off + 1);
  DDim d;
  for (int i = 1; i < src.rank(); ++i) d.push_back(src.dims()[i]);
  dst->ShareDataWith(slice);
  dst->Resize(d);
}

// Copies `src` into step `off` of `outer` ([seq_len] + src dims), allocating `outer` on the first step.
void CopyIntoStep(const Tensor& src, int64_t seq_len, int64_t off, bool first, const Place& place, Tensor* outer) {
  if (first) {
    DDim d{seq_len};
    for (int i = 0; i < src.rank(); ++i) d.push_back(src.dims()[i]);
    outer->Resize(d);
    outer->mutable_data(place, src.dtype());
  }
  FL_ENFORCE(outer->numel() == seq_len * src.numel(), "recurrent: step ", off, " produced dims ", src.dims(),
             " but earlier steps produced ", outer->dims());
  Tensor slice = outer->Slice(off, off + 1);
  MemCopy(place, slice.raw_mutable(), src.place(), src.raw_data(), src.nbytes());
}

void ZeroStep(int64_t off, Tensor* outer) {
  Tensor slice = outer->Slice(off, off + 1);
  ZeroBytes(outer->place(), slice.raw_mutable(), slice.nbytes());
}

const Tensor& Required(const Tensor* t, const char* what, const std::string& name) {
  FL_ENFORCE(t != nullptr, "recurrent_grad: ", what, " '", name, "' is not initialized");
  return *t;
}

}  // namespace

namespace {

// Dense parts into one tensor: an n-ary sum (a copy for one part).
void SumDense(const std::vector<const Tensor*>& parts, const std::string& what, const Place& place, Tensor* out) {
  const Tensor& first = *parts[0];
  for (const Tensor* p : parts)
    FL_ENFORCE(p->numel() == first.numel() && p->dtype() == first.dtype(), what, ": the parts have dims ", first.dims(),
               " (", DTypeName(first.dtype()), ") and ", p->dims(), " (", DTypeName(p->dtype()), ")");
  if (parts.size() == 1) {
    if (out->holder() != first.holder() || out->offset() != first.offset()) TensorCopy(first, place, out);
    out->set_lod(first.lod());
    return;
  }
  Tensor result;  // a buffer of its own: `out` may share one with a part
  result.Resize(first.dims());
  void* dst = result.mutable_data(place, first.dtype());
  FL_ENFORCE(first.dtype() == DType::FP32 || first.dtype() == DType::FP64, what,
             ": gradients must be float32 or float64, got ", DTypeName(first.dtype()));
  std::vector<const void*> ptrs;
  for (const Tensor* p : parts) ptrs.push_back(p->raw_data());
  SumArrays(place, first.dtype(), ptrs, dst, first.numel());
  result.set_lod(first.lod());
  *out = result;
}

}  // namespace

void SumArrayGradients(const std::vector<const Variable*>& parts, const std::string& what, const Place& place,
                       Variable* out) {
  RecordEvent ev("sum", "Operator");
  std::vector<const TensorList*> arrays;
  for (const Variable* v : parts) {
    const TensorList* a = v ? v->GetTensorList() : nullptr;
    FL_ENFORCE(a != nullptr || !v || !v->IsInitialized(), what, ": some parts are tensor arrays, others ",
               v->KindName());
    if (a) arrays.push_back(a);
  }
  size_t size = 0;
  for (const TensorList* a : arrays) size = std::max(size, a->size());
  TensorList result(size);
  for (size_t e = 0; e < size; ++e) {
    std::vector<const Tensor*> entry;
    for (const TensorList* a : arrays)
      if (e < a->size() && (*a)[e].IsInitialized() && (*a)[e].numel() > 0) entry.push_back(&(*a)[e]);
    if (!entry.empty()) SumDense(entry, what + " entry " + std::to_string(e), place, &result[e]);
  }
  *out->GetMutableTensorList() = std::move(result);
}

// Adds step `t`'s gradient of a parameter (`v`, the step scope's variable `grad_name`, possibly null) into the outer
// gradient `outer`; `*started` says whether an earlier step did already. The first dense contribution becomes the
// outer gradient: its buffer is taken over (`take`, when no other tensor shares it) or copied. A sparse lookup's
// SelectedRows gradient is added row by row into zeros.
namespace {
thread_local AccumulateScope* g_accumulate = nullptr;
}  // namespace

AccumulateScope::AccumulateScope(std::vector<const Tensor*> targets)
    : targets_(std::move(targets)), outer_(g_accumulate) {
  g_accumulate = this;
}
AccumulateScope::~AccumulateScope() { g_accumulate = outer_; }

bool AccumulateInto(const Tensor* out) {
  for (AccumulateScope* a = g_accumulate; a; a = a->outer_)
    for (auto& t : a->targets_)
      if (t == out) {
        t = nullptr;
        return true;
      }
  return false;
}

bool SupportsAccumulate(const std::string& type, const std::string& slot) {
  return type == "mul_grad" && slot == "Y@GRAD";
}

void AddStepGradient(Variable* v, const std::string& grad_name, int64_t t, const Tensor& param, bool take,
                     const Place& place, Tensor* outer, bool* started) {
  if (!v) return;
  if (const SelectedRows* sr = v->GetSelectedRows()) {
    if (!sr->value.IsInitialized()) return;
    RecordEvent ev("sum", "Operator");
    if (!*started) FillZerosLike(param, place, outer);
    *started = true;
    AddSelectedRowsTo(*sr, outer, "recurrent_grad: gradient '" + grad_name + "'");
    return;
  }
  Tensor* g = v->GetMutableTensor();
  if (!g->IsInitialized() || g->numel() == 0) return;
  FL_ENFORCE(g->numel() == param.numel(), "recurrent_grad: gradient '", grad_name, "' at step ", t, " has dims ",
             g->dims(), ", the parameter has ", param.dims());
  RecordEvent ev("sum", "Operator");
  if (!*started) {
    *started = true;
    if (take && g->holder().use_count() == 1) {
      outer->ShareDataWith(*g);
      g->Clear();  // the step's next write must not land in the outer gradient
    } else {
      outer->Clear();  // never write into a buffer this tensor shared with someone else
      CopyCause why("gradient", &grad_name, &grad_name, t);
      TensorCopy(*g, place, outer);
    }
    outer->Resize(param.dims());
    return;
  }
  FL_ENFORCE(g->dtype() == DType::FP32 || g->dtype() == DType::FP64,
             "recurrent_grad: parameter gradients must be float32 or float64, got ", DTypeName(g->dtype()));
  FL_ENFORCE(outer->dtype() == g->dtype(), "recurrent_grad: gradient '", grad_name, "' at step ", t, " is ",
             DTypeName(g->dtype()), ", earlier steps' are ", DTypeName(outer->dtype()));
  Tensor moved;  // a step op that ran its CPU kernel in a GPU program left its gradient on the CPU
  if (g->place() != place) {
    CopyCause why("gradient", &grad_name, &grad_name, t);
    TensorCopy(*g, place, &moved);
    g = &moved;
  }
  if (outer->place() != place) {
    Tensor o;
    TensorCopy(*outer, place, &o);
    *outer = o;
  }
  std::vector<const void*> ptrs{outer->raw_data(), g->raw_data()};
  SumArrays(place, g->dtype(), ptrs, outer->mutable_data(place, g->dtype()), g->numel());
}

void SetRecurrentFluidMode(bool on) { g_fluid_mode.store(on); }
bool RecurrentFluidMode() { return g_fluid_mode.load(std::memory_order_relaxed); }

void FillZerosLike(const Tensor& like, const Place& place, Tensor* out) {
  out->Clear();  // never write zeros into a buffer this tensor shared with someone else
  out->Resize(like.dims());
  ZeroBytes(place, out->mutable_data(place, like.dtype()), like.nbytes());
}

std::vector<std::unique_ptr<PreparedOp>>& PreparedBlocks::Get(size_t i, Scope* scope, const BlockDesc& block,
                                                              const char* event) {
  if (scope_uids_.size() <= i) {
    scope_uids_.resize(i + 1, 0);
    scopes_.resize(i + 1, nullptr);
    ops_.resize(i + 1);
    releases_.resize(i + 1);
    releases_resolved_.resize(i + 1, false);
  }
  if (scope_uids_[i] != scope->uid()) {
    RecordEvent ev(event, "Recurrent");
    CreateBlockVariables(block, scope, scope);
    ops_[i].clear();
    for (auto& op : block.AllOps()) {
      ops_[i].push_back(std::make_unique<PreparedOp>(&OpRegistry::Instance().Get(op->type()), op.get()));
      ops_[i].back()->Bind(*scope);
    }
    scope_uids_[i] = scope->uid();
    scopes_[i] = scope;
    releases_resolved_[i] = false;
  }
  return ops_[i];
}

const std::vector<std::vector<Variable*>>* PreparedBlocks::Releases(size_t i, const ReleaseNames& names) {
  FL_ENFORCE(i < scopes_.size() && scopes_[i] != nullptr, "PreparedBlocks: slot ", i, " was never prepared");
  if (!releases_resolved_[i]) {
    auto& lists = releases_[i];
    lists.assign(names.size(), {});
    for (size_t k = 0; k < names.size(); ++k)
      for (const std::string& n : names[k])
        if (Variable* v = scopes_[i]->FindLocalVar(n)) lists[k].push_back(v);
    releases_resolved_[i] = true;
  }
  return &releases_[i];
}

namespace {

// Eager deletion inside a step block, as the executor plans it for a block: per op of `block`, the variables the
// block declares (non-persistable LoDTensors of the step scope) whose last use in the block is that op. Kept: `keep`
// (what the runner links or reads after the step) and every name another block mentions: the gradient of the
// step block reads its forward values, a second gradient of the same op reads them again, and a nested sub-block
// reads step variables that its op does not list.
ReleaseNames PlanStepReleases(const BlockDesc& block, const std::unordered_set<std::string>& keep) {
  const auto& ops = block.AllOps();
  ReleaseNames releases(ops.size());
  const ProgramDesc* program = block.program();
  std::unordered_set<std::string> elsewhere;
  for (size_t b = 0; program && b < program->Size(); ++b) {
    const BlockDesc* other = program->Block(b);
    if (other == &block) continue;
    for (auto& op : other->AllOps()) {
      for (auto& n : op->InputArgumentNames()) elsewhere.insert(n);
      for (auto& n : op->OutputArgumentNames()) elsewhere.insert(n);
    }
  }
  std::unordered_map<std::string, size_t> last_use;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (auto& n : ops[i]->InputArgumentNames()) last_use[n] = i;
    for (auto& n : ops[i]->OutputArgumentNames()) last_use[n] = i;
  }
  for (auto& [name, i] : last_use) {
    if (keep.count(name) || elsewhere.count(name)) continue;
    const VarDesc* v = block.FindVar(name);
    if (!v || v->persistable() || v->kind() != VarKind::LOD_TENSOR) continue;  // not a variable of the step
    releases[i].push_back(name);
  }
  for (auto& names : releases) std::sort(names.begin(), names.end());  // a stable order for the logs
  return releases;
}

}  // namespace

// The step block's eager-deletion plan for the forward run: the memories and their next values (the runner links
// them across steps), the step inputs and outputs (the runner shares and copies them) are kept.
const ReleaseNames& StepBlockRunner::PlanForward(const StepBlockIO& io) {
  if (forward_planned_) return forward_releases_;
  if (EagerDeletion()) {
    std::unordered_set<std::string> keep;
    for (const auto* names : {io.input_names, io.ex_states, io.states, io.output_names})
      keep.insert(names->begin(), names->end());
    forward_releases_ = PlanStepReleases(*io.block, keep);
  } else {
    forward_releases_.assign(io.block->AllOps().size(), {});
  }
  forward_planned_ = true;
  return forward_releases_;
}

// The step-scope names of the gradients (see StepBlockIO), and the grad block's eager-deletion plan: the memories'
// gradients (the step before reads them; step 0's are the initial states' gradients) and the step inputs' and
// parameters' gradients (the runner releases those itself once it used them) are kept.
const StepBlockRunner::GradPlan& StepBlockRunner::PlanBackward(const StepBlockIO& io) {
  if (grad_planned_) return grad_plan_;
  const BlockDesc& grad = *io.block;
  auto inner = [&grad](const StepBlockIO::Names* args, const StepBlockIO::Names& vars) {
    std::vector<std::string> names;
    for (size_t i = 0; i < vars.size(); ++i) {
      const std::string* arg = args && i < args->size() ? &(*args)[i] : nullptr;
      names.push_back(arg && *arg != kEmptyVarName && grad.FindVar(*arg) ? *arg : GradName(vars[i]));
    }
    return names;
  };
  GradPlan plan;
  plan.output_grads = inner(io.output_grad_args, *io.output_names);
  plan.input_grads = inner(io.input_grad_args, *io.input_names);
  plan.parameter_grads = inner(io.parameter_grad_args, *io.parameter_names);
  // A parameter gradient that one op of the step block writes, through a slot that can add into a running total,
  // and that no op of the block reads: that op accumulates straight into the outer gradient (grad_accumulate.h).
  plan.accumulate.assign(plan.parameter_grads.size(), 0);
  for (size_t p = 0; p < plan.parameter_grads.size(); ++p) {
    const std::string& name = plan.parameter_grads[p];
    int writers = 0;
    bool ok = true;
    for (auto& op : grad.AllOps()) {
      for (auto& in : op->InputArgumentNames()) ok = ok && in != name;
      for (auto& [slot, args] : op->outputs())
        for (auto& a : args)
          if (a == name) {
            ++writers;
            ok = ok && SupportsAccumulate(op->type(), slot);
          }
    }
    const VarDesc* v = grad.FindVar(name);
    plan.accumulate[p] = ok && writers == 1 && v && v->kind() == VarKind::LOD_TENSOR;
  }
  plan.eager = EagerDeletion();
  if (plan.eager) {
    std::unordered_set<std::string> keep(plan.input_grads.begin(), plan.input_grads.end());
    keep.insert(plan.parameter_grads.begin(), plan.parameter_grads.end());
    for (const std::string& n : *io.ex_states) keep.insert(GradName(n));
    plan.releases = PlanStepReleases(grad, keep);
  } else {
    plan.releases.assign(grad.AllOps().size(), {});
  }
  grad_plan_ = std::move(plan);
  grad_planned_ = true;
  return grad_plan_;
}

void StepBlockRunner::Forward(const StepBlockIO& io, Scope& parent, StepScopes* scopes_out, const Place& place) {
  const int64_t seq_len = io.seq_len;
  const auto& in_names = *io.input_names;
  const auto& ex_states = *io.ex_states;
  const auto& states = *io.states;
  const auto& out_names = *io.output_names;
  const bool fluid_mode = RecurrentFluidMode();
  StepScopes& scopes = *scopes_out;
  if (fluid_mode) {  // Fluid deletes the previous run's step scopes and makes new ones
    for (Scope* s : scopes) parent.DeleteScope(s);
    scopes.clear();
  }
  while (static_cast<int64_t>(scopes.size()) < seq_len) scopes.push_back(&parent.NewScope());
  // Fluid mode keeps every step's variables, as Fluid 1.x did.
  const ReleaseNames* releases = fluid_mode ? nullptr : &PlanForward(io);

  for (int64_t t = 0; t < seq_len; ++t) {
    const int64_t off = io.reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kStepEvent, "Recurrent");
    if (ev.active()) ev.SetArgs(IndexArgs("step", t));
    FL_VLOG(3) << "Recurrent operate at the time step " << t;
    Scope& s = *scopes[t];
    auto& ops = prepared_.Get(static_cast<size_t>(t), &s, *io.block, kPrepareEvent);
    for (size_t i = 0; i < in_names.size(); ++i)
      ShareStep(*io.inputs[i], off, Local(s, in_names[i], "step input")->GetMutableTensor());
    for (size_t j = 0; j < ex_states.size(); ++j) {
      Tensor* ex = Local(s, ex_states[j], "memory")->GetMutableTensor();
      if (t == 0) {
        ex->ShareDataWith(*io.initial_states[j]);
      } else {
        const Tensor* prev = Local(*scopes[t - 1], states[j], "memory update")->GetTensor();
        FL_ENFORCE(prev && prev->IsInitialized(), "recurrent: memory '", states[j], "' was not computed at step ",
                   t - 1);
        if (fluid_mode) {
          CopyCause why("memory_link", &states[j], &ex_states[j], t);
          TensorCopy(*prev, place, ex);
        } else {
          ex->ShareDataWith(*prev);
        }
      }
    }
    RunPreparedOps(ops, place, releases ? prepared_.Releases(static_cast<size_t>(t), *releases) : nullptr);
    for (size_t k = 0; k < out_names.size(); ++k) {
      const Tensor* inner = Local(s, out_names[k], "step output")->GetTensor();
      FL_ENFORCE(inner && inner->IsInitialized(), "recurrent: step output '", out_names[k], "' was not computed");
      CopyCause why("step_output", &out_names[k], &out_names[k], t);
      CopyIntoStep(*inner, seq_len, off, t == 0, place, io.outputs[k]);
    }
  }
}

void StepBlockRunner::Backward(const StepBlockIO& io, const StepScopes& scopes, const Place& place) {
  const int64_t seq_len = io.seq_len;
  const auto& in_names = *io.input_names;
  const auto& out_names = *io.output_names;
  const auto& param_names = *io.parameter_names;
  const auto& ex_states = *io.ex_states;
  const auto& states = *io.states;
  const bool fluid_mode = RecurrentFluidMode();
  FL_ENFORCE(static_cast<int64_t>(scopes.size()) >= seq_len, "recurrent_grad: the forward recurrent op ran ",
             scopes.size(), " steps, the inputs have ", seq_len, " (run the forward op first)");
  const GradPlan& plan = PlanBackward(io);
  // Fluid mode keeps every step's variables, as Fluid 1.x did.
  const ReleaseNames* releases = fluid_mode ? nullptr : &plan.releases;
  const bool eager = !fluid_mode && plan.eager;
  std::vector<char> started(param_names.size(), 0);  // the parameter's outer gradient holds a contribution

  for (int64_t t = seq_len - 1; t >= 0; --t) {
    const int64_t off = io.reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kGradStepEvent, "Recurrent");
    if (ev.active()) ev.SetArgs(IndexArgs("step", t));
    FL_VLOG(3) << "Recurrent grad operate at the time step " << t;
    Scope& s = *scopes[t];
    auto& ops = prepared_.Get(static_cast<size_t>(t), &s, *io.block, kPrepareEvent);
    // Gradients flowing in from outside: this step's slice of each output's gradient...
    for (size_t k = 0; k < out_names.size(); ++k) {
      Variable* v = s.FindLocalVar(plan.output_grads[k]);
      if (!v) continue;  // nothing in the step reads it
      const Tensor* outer = k < io.output_grads.size() ? io.output_grads[k] : nullptr;
      if (outer) ShareStep(*outer, off, v->GetMutableTensor());
      else v->GetMutableTensor()->Clear();  // read as zeros by rnn_memory_helper_grad
    }
    // ...and the memory gradient from the step after this one (none at the last step).
    for (size_t j = 0; j < states.size(); ++j) {
      Variable* v = s.FindLocalVar(GradName(states[j]));
      if (!v) continue;
      Variable* nv = t + 1 < seq_len ? scopes[t + 1]->FindLocalVar(GradName(ex_states[j])) : nullptr;
      const Tensor* next = nv ? nv->GetTensor() : nullptr;
      if (next && next->IsInitialized()) v->GetMutableTensor()->ShareDataWith(*next);
      else v->GetMutableTensor()->Clear();
      if (nv && eager) ReleaseTensor(nv);  // shared now: the step after this one is done with it
    }
    // Parameter gradients after the first: the step's gradient variable borrows the running total, which its one
    // writer adds into (grad_accumulate.h).
    std::vector<size_t> lent;       // parameters whose step gradient borrows the running total
    std::vector<Tensor*> borrowed;  // their step tensors
    std::vector<char> is_lent(param_names.size(), 0);
    if (!fluid_mode)
      for (size_t p = 0; p < param_names.size(); ++p) {
        Tensor* outer = io.parameter_grads[p];
        Variable* v = plan.accumulate[p] && started[p] && outer ? s.FindLocalVar(plan.parameter_grads[p]) : nullptr;
        if (!v || !outer->IsInitialized() || v->GetSelectedRows()) continue;
        Tensor* g = v->GetMutableTensor();
        g->ShareDataWith(*outer);
        borrowed.push_back(g);
        lent.push_back(p);
        is_lent[p] = 1;
      }
    {
      AccumulateScope accumulate({borrowed.begin(), borrowed.end()});
      auto give_back = [&borrowed] {  // the totals are the outer gradients' alone again
        for (Tensor* g : borrowed) g->Clear();
      };
      try {
        RunPreparedOps(ops, place, releases ? prepared_.Releases(static_cast<size_t>(t), *releases) : nullptr);
      } catch (...) {
        give_back();
        throw;
      }
      give_back();
      for (size_t i = 0; i < lent.size(); ++i)
        FL_ENFORCE(accumulate.consumed(i), "recurrent_grad: the op writing parameter gradient '",
                   plan.parameter_grads[lent[i]], "' at step ", t,
                   " did not add into the running total (a fluidlite bug)");
    }
    // Parameter gradients: added into the outer gradient while the step's is still in cache.
    for (size_t p = 0; p < param_names.size(); ++p) {
      Tensor* outer = io.parameter_grads[p];
      if (!outer) continue;
      if (is_lent[p]) continue;  // added by its writer
      const std::string& grad_name = plan.parameter_grads[p];
      Variable* v = s.FindLocalVar(grad_name);
      bool done = started[p];
      AddStepGradient(v, grad_name, t, Required(io.parameters[p], "parameter", param_names[p]), !fluid_mode, place,
                      outer, &done);
      started[p] = done;
      if (v && eager) ReleaseTensor(v);
    }
    // Step-input gradients go to their slice of the outer gradient.
    for (size_t i = 0; i < in_names.size(); ++i) {
      Tensor* outer = io.input_grads[i];
      if (!outer) continue;
      const Tensor& x = *io.inputs[i];
      if (t == seq_len - 1) {
        outer->Resize(x.dims());
        outer->mutable_data(place, x.dtype());
      }
      Variable* v = s.FindLocalVar(plan.input_grads[i]);
      const Tensor* g = v ? v->GetTensor() : nullptr;
      if (g && g->IsInitialized()) {
        Tensor slice = outer->Slice(off, off + 1);
        FL_ENFORCE(g->numel() == slice.numel(), "recurrent_grad: gradient of step input '", in_names[i], "' has dims ",
                   g->dims(), ", a step of the input has ", slice.numel(), " elements");
        CopyCause why("gradient", &plan.input_grads[i], &plan.input_grads[i], t);
        MemCopy(place, slice.raw_mutable(), g->place(), g->raw_data(), g->nbytes());
      } else {
        ZeroStep(off, outer);
      }
      if (v && eager) ReleaseTensor(v);
    }
  }
  // Initial-state gradients: what the first step's memories received.
  for (size_t j = 0; j < ex_states.size(); ++j) {
    Tensor* outer = io.initial_state_grads[j];
    Variable* v = scopes[0]->FindLocalVar(GradName(ex_states[j]));
    if (outer) {
      const Tensor* g = v ? v->GetTensor() : nullptr;
      if (g && g->IsInitialized()) {
        CopyCause why("gradient", nullptr, nullptr, 0);
        TensorCopy(*g, place, outer);
      } else {
        FillZerosLike(Required(io.initial_states[j], "initial state", ex_states[j]), place, outer);
      }
    }
    if (v && eager) ReleaseTensor(v);
  }
  // A parameter no step contributed to has a zero gradient.
  for (size_t p = 0; p < param_names.size(); ++p) {
    Tensor* outer = io.parameter_grads[p];
    if (outer && !started[p]) FillZerosLike(Required(io.parameters[p], "parameter", param_names[p]), place, outer);
  }
}

}  // namespace fl
