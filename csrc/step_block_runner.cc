#include "step_block_runner.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "executor.h"
#include "logging.h"
#include "profiler.h"
#include "sparse_rows.h"
#include "sum_into.h"

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
  std::memset(slice.raw_mutable(), 0, slice.nbytes());
}

const Tensor& Required(const Tensor* t, const char* what, const std::string& name) {
  FL_ENFORCE(t != nullptr, "recurrent_grad: ", what, " '", name, "' is not initialized");
  return *t;
}

// Adds each step scope's local gradient of `param` into `out` (SumGradients).
void AggregateParamGrad(const StepScopes& scopes, int64_t seq_len, const std::string& grad_name, const Tensor& param,
                        const Place& place, Tensor* out) {
  std::vector<const Variable*> parts;
  for (int64_t t = 0; t < seq_len; ++t) parts.push_back(scopes[t]->FindLocalVar(grad_name));
  Variable holder;  // SumGradients writes a Variable; the outer gradient is a tensor
  *holder.GetMutableTensor() = *out;
  SumGradients(parts, &param, "recurrent_grad: gradient '" + grad_name + "'", place, &holder);
  *out = *holder.GetMutableTensor();
  FL_ENFORCE(out->numel() == param.numel(), "recurrent_grad: gradient '", grad_name, "' has dims ", out->dims(),
             ", the parameter has ", param.dims());
  out->Resize(param.dims());
}

// Fluid mode: adds step t's gradient `g` into the outer gradient (a copy at the first step walked, the last).
void AddStepParamGrad(const Tensor& g, bool first, const Place& place, Tensor* outer) {
  RecordEvent sum_ev("sum", "Operator");
  if (first) {
    TensorCopy(g, place, outer);
    return;
  }
  VisitDType(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<const T*> ptrs{outer->data<T>(), g.data<T>()};
      SumInto<T>(ptrs, outer->mutable_data<T>(place), g.numel());
    }
  });
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
  VisitDType(first.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<const T*> ptrs;
      for (const Tensor* p : parts) ptrs.push_back(p->data<T>());
      SumInto<T>(ptrs, static_cast<T*>(dst), first.numel());
    } else {
      FL_THROW(what, ": gradients must be float32 or float64, got ", DTypeName(first.dtype()));
    }
  });
  result.set_lod(first.lod());
  *out = result;
}

}  // namespace

void SumGradients(const std::vector<const Variable*>& parts, const Tensor* zeros_like, const std::string& what,
                  const Place& place, Variable* out) {
  RecordEvent ev("sum", "Operator");
  std::vector<const Tensor*> dense;
  std::vector<const SelectedRows*> sparse;
  std::vector<const TensorList*> arrays;
  for (const Variable* v : parts) {
    if (!v) continue;
    if (const SelectedRows* sr = v->GetSelectedRows()) {
      if (sr->value.IsInitialized()) sparse.push_back(sr);
    } else if (const TensorList* a = v->GetTensorList()) {
      arrays.push_back(a);
    } else if (const Tensor* t = v->GetTensor(); t && t->IsInitialized()) {
      dense.push_back(t);
    }
  }
  if (!arrays.empty()) {
    FL_ENFORCE(dense.empty() && sparse.empty(), what, ": some parts are tensor arrays, others tensors");
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
    return;
  }
  Tensor* dst = out->ResetToTensor();
  if (!dense.empty()) {
    SumDense(dense, what, place, dst);
  } else if (zeros_like && zeros_like->IsInitialized()) {
    FillZerosLike(*zeros_like, place, dst);
  } else if (sparse.empty()) {
    return;
  }
  if (!sparse.empty() && !dst->IsInitialized()) {  // only sparse parts: dense zeros of the full dims first
    FL_ENFORCE(zeros_like != nullptr, what, ": sparse gradients need the dense variable's dims");
    FillZerosLike(*zeros_like, place, dst);
  }
  // A sparse lookup inside the step block leaves SelectedRows gradients: their rows are added in.
  for (const SelectedRows* sr : sparse) AddSelectedRowsTo(*sr, dst, what);
}

void SetRecurrentFluidMode(bool on) { g_fluid_mode.store(on); }
bool RecurrentFluidMode() { return g_fluid_mode.load(std::memory_order_relaxed); }

void FillZerosLike(const Tensor& like, const Place& place, Tensor* out) {
  out->Clear();  // never write zeros into a buffer this tensor shared with someone else
  out->Resize(like.dims());
  std::memset(out->mutable_data(place, like.dtype()), 0, like.nbytes());
}

std::vector<std::unique_ptr<PreparedOp>>& PreparedBlocks::Get(size_t i, Scope* scope, const BlockDesc& block,
                                                              const char* event) {
  if (scope_uids_.size() <= i) {
    scope_uids_.resize(i + 1, 0);
    ops_.resize(i + 1);
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
  }
  return ops_[i];
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

  for (int64_t t = 0; t < seq_len; ++t) {
    const int64_t off = io.reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kStepEvent, "Recurrent");
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
        if (fluid_mode) TensorCopy(*prev, place, ex);
        else ex->ShareDataWith(*prev);
      }
    }
    RunPreparedOps(ops, place);
    for (size_t k = 0; k < out_names.size(); ++k) {
      const Tensor* inner = Local(s, out_names[k], "step output")->GetTensor();
      FL_ENFORCE(inner && inner->IsInitialized(), "recurrent: step output '", out_names[k], "' was not computed");
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

  for (int64_t t = seq_len - 1; t >= 0; --t) {
    const int64_t off = io.reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kGradStepEvent, "Recurrent");
    FL_VLOG(3) << "Recurrent grad operate at the time step " << t;
    Scope& s = *scopes[t];
    auto& ops = prepared_.Get(static_cast<size_t>(t), &s, *io.block, kPrepareEvent);
    // Gradients flowing in from outside: this step's slice of each output's gradient...
    for (size_t k = 0; k < out_names.size(); ++k) {
      Variable* v = s.FindLocalVar(GradName(out_names[k]));
      if (!v) continue;  // nothing in the step reads it
      const Tensor* outer = k < io.output_grads.size() ? io.output_grads[k] : nullptr;
      if (outer) ShareStep(*outer, off, v->GetMutableTensor());
      else v->GetMutableTensor()->Clear();  // read as zeros by rnn_memory_helper_grad
    }
    // ...and the memory gradient from the step after this one (none at the last step).
    for (size_t j = 0; j < states.size(); ++j) {
      Variable* v = s.FindLocalVar(GradName(states[j]));
      if (!v) continue;
      const Tensor* next = nullptr;
      if (t + 1 < seq_len) {
        Variable* nv = scopes[t + 1]->FindLocalVar(GradName(ex_states[j]));
        next = nv ? nv->GetTensor() : nullptr;
      }
      if (next && next->IsInitialized()) v->GetMutableTensor()->ShareDataWith(*next);
      else v->GetMutableTensor()->Clear();
    }
    RunPreparedOps(ops, place);
    if (fluid_mode) {  // Fluid: one sum op per parameter per step into the outer gradient
      for (size_t p = 0; p < param_names.size(); ++p) {
        Tensor* outer = io.parameter_grads[p];
        Variable* v = s.FindLocalVar(GradName(param_names[p]));
        if (const SelectedRows* sr = v ? v->GetSelectedRows() : nullptr; sr && outer) {  // a sparse lookup's
          RecordEvent sum_ev("sum", "Operator");
          if (t == seq_len - 1) FillZerosLike(Required(io.parameters[p], "parameter", param_names[p]), place, outer);
          AddSelectedRowsTo(*sr, outer, "recurrent_grad: gradient '" + GradName(param_names[p]) + "'");
          continue;
        }
        const Tensor* g = v ? v->GetTensor() : nullptr;
        if (!outer || !g || !g->IsInitialized()) continue;
        AddStepParamGrad(*g, t == seq_len - 1, place, outer);
      }
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
      Variable* v = s.FindLocalVar(GradName(in_names[i]));
      const Tensor* g = v ? v->GetTensor() : nullptr;
      if (g && g->IsInitialized()) {
        Tensor slice = outer->Slice(off, off + 1);
        FL_ENFORCE(g->numel() == slice.numel(), "recurrent_grad: gradient of step input '", in_names[i], "' has dims ",
                   g->dims(), ", a step of the input has ", slice.numel(), " elements");
        MemCopy(place, slice.raw_mutable(), g->place(), g->raw_data(), g->nbytes());
      } else {
        ZeroStep(off, outer);
      }
    }
  }
  // Initial-state gradients: what the first step's memories received.
  for (size_t j = 0; j < ex_states.size(); ++j) {
    Tensor* outer = io.initial_state_grads[j];
    if (!outer) continue;
    Variable* v = scopes[0]->FindLocalVar(GradName(ex_states[j]));
    const Tensor* g = v ? v->GetTensor() : nullptr;
    if (g && g->IsInitialized()) TensorCopy(*g, place, outer);
    else FillZerosLike(Required(io.initial_states[j], "initial state", ex_states[j]), place, outer);
  }
  // Parameter gradients: one n-ary sum over the steps per parameter.
  for (size_t p = 0; p < param_names.size() && !fluid_mode; ++p) {
    Tensor* outer = io.parameter_grads[p];
    if (!outer) continue;
    const Tensor& param = Required(io.parameters[p], "parameter", param_names[p]);
    AggregateParamGrad(scopes, seq_len, GradName(param_names[p]), param, place, outer);
  }
}

}  // namespace fl
