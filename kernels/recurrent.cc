// recurrent / recurrent_grad: the runtime of layers.StaticRNN, and rnn_memory_helper.
//
// Fluid re-created its step scopes, operators and variables on every run, copied memories between steps
// with rnn_memory_helper, and aggregated parameter gradients with a sum op per parameter per step.
// Here:
// - the step block is prepared once per step scope and the step scopes (kids of the running scope,
//   held by the `step_scopes` variable) are reused across runs, so their tensors keep their buffers;
// - step inputs are zero-copy slices of the outer input, memories are linked by sharing the previous
//   step's buffer (rnn_memory_helper shares, it does not copy), outputs are copied once into the outer
//   [seq_len, ...] tensor;
// - each parameter's gradient is computed per step in the step scope and added up ONCE per run with a
//   single one-pass n-ary sum over all steps (one "sum" profiler event per parameter per run).
#include <atomic>
#include <cstring>

#include "executor.h"
#include "helpers/sum_into.h"
#include "logging.h"
#include "op_context.h"
#include "profiler.h"

namespace fl {

// Fluid 1.x's strategy, kept as a switch so the profiler can show the difference
// (fluid.core.set_recurrent_fluid_mode(True)): new step scopes every run, memories and outputs copied by
// rnn_memory_helper, and parameter gradients added into the outer gradient after every step.
std::atomic<bool> g_recurrent_fluid_mode{false};

namespace {

bool FluidMode() { return g_recurrent_fluid_mode.load(std::memory_order_relaxed); }

constexpr const char* kStepEvent = "recurrent::step";
constexpr const char* kGradStepEvent = "recurrent_grad::step";

const BlockDesc& SubBlock(const ExecutionContext& ctx) {
  const ProgramDesc* program = ctx.desc().program();
  FL_ENFORCE(program != nullptr, ctx.Type(), ": the op is not part of a program");
  return *program->Block(static_cast<size_t>(ctx.Attr<BlockRef>("sub_block").idx));
}

// The step block prepared and bound once per step scope; rebuilt only for new or replaced scopes
// (compared by the scope's unique id: a new scope may reuse a deleted one's address).
struct StepPlans {
  std::vector<uint64_t> scopes;
  std::vector<std::vector<std::unique_ptr<PreparedOp>>> ops;

  std::vector<std::unique_ptr<PreparedOp>>& For(size_t i, Scope* scope, const BlockDesc& block) {
    if (scopes.size() <= i) {
      scopes.resize(i + 1, 0);
      ops.resize(i + 1);
    }
    if (scopes[i] != scope->uid()) {
      RecordEvent ev("recurrent::prepare_step", "Recurrent");
      CreateBlockVariables(block, scope, scope);
      ops[i].clear();
      for (auto& op : block.AllOps()) {
        ops[i].push_back(std::make_unique<PreparedOp>(&OpRegistry::Instance().Get(op->type()), op.get()));
        ops[i].back()->Bind(*scope);
      }
      scopes[i] = scope->uid();
    }
    return ops[i];
  }
};

int64_t SeqLen(const ExecutionContext& ctx) {
  const auto& names = ctx.desc().Input("inputs");
  FL_ENFORCE(!names.empty(), ctx.Type(), ": a StaticRNN needs at least one step input");
  int64_t seq_len = -1;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& t = ctx.Input("inputs", static_cast<int>(i));
    FL_ENFORCE(t.rank() >= 1, ctx.Type(), ": step input '", names[i], "' has no sequence dim (dims ", t.dims(), ")");
    if (seq_len < 0) seq_len = t.dims()[0];
    FL_ENFORCE(t.dims()[0] == seq_len, ctx.Type(), ": step inputs have different lengths: '", names[0], "' has ",
               seq_len, " steps, '", names[i], "' has ", t.dims()[0]);
  }
  FL_ENFORCE(seq_len > 0, ctx.Type(), ": the sequence length is 0");
  return seq_len;
}

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

void FillZerosLike(const Tensor& like, const Place& place, Tensor* out) {
  out->Clear();  // never write zeros into a buffer this tensor shared with someone else
  out->Resize(like.dims());
  std::memset(out->mutable_data(place, like.dtype()), 0, like.nbytes());
}

void RunRecurrent(const ExecutionContext& ctx) {
  const BlockDesc& block = SubBlock(ctx);
  const int64_t seq_len = SeqLen(ctx);
  const bool reverse = ctx.Attr<bool>("reverse");
  const auto& in_names = ctx.desc().Input("inputs");
  const auto& ex_states = ctx.Attr<std::vector<std::string>>("ex_states");
  const auto& states = ctx.Attr<std::vector<std::string>>("states");
  const auto& out_names = ctx.desc().Output("outputs");
  FL_ENFORCE(ex_states.size() == states.size() && static_cast<int>(states.size()) == ctx.InputSize("initial_states"),
             "recurrent: ", ex_states.size(), " ex_states, ", states.size(), " states and ",
             ctx.InputSize("initial_states"), " initial_states must match");
  FL_VLOG(3) << "Static RNN input sequence length = " << seq_len;

  StepScopes& scopes = *ctx.OutputVar("step_scopes")->GetMutableStepScopes();
  if (FluidMode()) {  // Fluid deletes the previous run's step scopes and makes new ones
    for (Scope* s : scopes) ctx.scope().DeleteScope(s);
    scopes.clear();
  }
  while (static_cast<int64_t>(scopes.size()) < seq_len) scopes.push_back(&ctx.scope().NewScope());
  StepPlans& plans = ctx.State<StepPlans>();

  for (int64_t t = 0; t < seq_len; ++t) {
    const int64_t off = reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kStepEvent, "Recurrent");
    FL_VLOG(3) << "Recurrent operate at the time step " << t;
    Scope& s = *scopes[t];
    auto& ops = plans.For(static_cast<size_t>(t), &s, block);
    for (size_t i = 0; i < in_names.size(); ++i)
      ShareStep(ctx.Input("inputs", static_cast<int>(i)), off, Local(s, in_names[i], "step input")->GetMutableTensor());
    for (size_t j = 0; j < ex_states.size(); ++j) {
      Tensor* ex = Local(s, ex_states[j], "memory")->GetMutableTensor();
      if (t == 0) {
        ex->ShareDataWith(ctx.Input("initial_states", static_cast<int>(j)));
      } else {
        const Tensor* prev = Local(*scopes[t - 1], states[j], "memory update")->GetTensor();
        FL_ENFORCE(prev && prev->IsInitialized(), "recurrent: memory '", states[j], "' was not computed at step ", t - 1);
        if (FluidMode()) TensorCopy(*prev, ctx.place(), ex);
        else ex->ShareDataWith(*prev);
      }
    }
    RunPreparedOps(ops, ctx.place());
    for (size_t k = 0; k < out_names.size(); ++k) {
      const Tensor* inner = Local(s, out_names[k], "step output")->GetTensor();
      FL_ENFORCE(inner && inner->IsInitialized(), "recurrent: step output '", out_names[k], "' was not computed");
      CopyIntoStep(*inner, seq_len, off, t == 0, ctx.place(), ctx.Output("outputs", static_cast<int>(k)));
    }
  }
}

// Adds each step scope's local gradient of `param` into `out`, in one pass (one "sum" event).
void AggregateParamGrad(const std::vector<Scope*>& scopes, int64_t seq_len, const std::string& grad_name,
                        const Tensor& param, const Place& place, Tensor* out) {
  RecordEvent ev("sum", "Operator");
  std::vector<const Tensor*> parts;
  for (int64_t t = 0; t < seq_len; ++t) {
    Variable* v = scopes[t]->FindLocalVar(grad_name);
    const Tensor* g = v ? v->GetTensor() : nullptr;
    if (g && g->IsInitialized() && g->numel() > 0) {
      FL_ENFORCE(g->numel() == param.numel(), "recurrent_grad: gradient '", grad_name, "' at step ", t, " has dims ",
                 g->dims(), ", the parameter has ", param.dims());
      parts.push_back(g);
    }
  }
  out->Resize(param.dims());
  if (parts.empty()) {
    FillZerosLike(param, place, out);
    return;
  }
  void* dst = out->mutable_data(place, parts[0]->dtype());
  if (parts.size() == 1) {
    MemCopy(place, dst, parts[0]->place(), parts[0]->raw_data(), parts[0]->nbytes());
    return;
  }
  VisitDType(parts[0]->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<const T*> ptrs;
      for (const Tensor* p : parts) ptrs.push_back(p->data<T>());
      SumInto<T>(ptrs, static_cast<T*>(dst), param.numel());
    } else {
      FL_THROW("recurrent_grad: parameter gradients must be float32 or float64, got ", DTypeName(parts[0]->dtype()));
    }
  });
}

void RunRecurrentGrad(const ExecutionContext& ctx) {
  const BlockDesc& block = SubBlock(ctx);
  const int64_t seq_len = SeqLen(ctx);
  const bool reverse = ctx.Attr<bool>("reverse");
  const auto& in_names = ctx.desc().Input("inputs");
  const auto& out_names = ctx.desc().Input("outputs");
  const auto& param_names = ctx.desc().Input("parameters");
  const auto& ex_states = ctx.Attr<std::vector<std::string>>("ex_states");
  const auto& states = ctx.Attr<std::vector<std::string>>("states");

  StepScopes& scopes = *ctx.InputVar("step_scopes")->GetMutableStepScopes();
  FL_ENFORCE(static_cast<int64_t>(scopes.size()) >= seq_len, "recurrent_grad: the forward recurrent op ran ",
             scopes.size(), " steps, the inputs have ", seq_len, " (run the forward op first)");
  StepPlans& plans = ctx.State<StepPlans>();
  const Place& place = ctx.place();

  for (int64_t t = seq_len - 1; t >= 0; --t) {
    const int64_t off = reverse ? seq_len - 1 - t : t;
    RecordEvent ev(kGradStepEvent, "Recurrent");
    FL_VLOG(3) << "Recurrent grad operate at the time step " << t;
    Scope& s = *scopes[t];
    auto& ops = plans.For(static_cast<size_t>(t), &s, block);
    // Gradients flowing in from outside: this step's slice of each output's gradient...
    for (size_t k = 0; k < out_names.size(); ++k) {
      Variable* v = s.FindLocalVar(GradName(out_names[k]));
      if (!v) continue;  // nothing in the step reads it
      const Tensor* outer = ctx.InputOrNull("outputs@GRAD", static_cast<int>(k));
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
    if (FluidMode()) {  // Fluid: one sum op per parameter per step into the outer gradient
      for (size_t p = 0; p < param_names.size(); ++p) {
        Tensor* outer = ctx.OutputOrNull("parameters@GRAD", static_cast<int>(p));
        Variable* v = s.FindLocalVar(GradName(param_names[p]));
        const Tensor* g = v ? v->GetTensor() : nullptr;
        if (!outer || !g || !g->IsInitialized()) continue;
        RecordEvent sum_ev("sum", "Operator");
        if (t == seq_len - 1) {
          TensorCopy(*g, place, outer);
          continue;
        }
        VisitDType(g->dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_floating_point_v<T>) {
            std::vector<const T*> ptrs{outer->data<T>(), g->data<T>()};
            SumInto<T>(ptrs, outer->mutable_data<T>(place), g->numel());
          }
        });
      }
    }
    // Step-input gradients go to their slice of the outer gradient.
    for (size_t i = 0; i < in_names.size(); ++i) {
      Tensor* outer = ctx.OutputOrNull("inputs@GRAD", static_cast<int>(i));
      if (!outer) continue;
      const Tensor& x = ctx.Input("inputs", static_cast<int>(i));
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
    Tensor* outer = ctx.OutputOrNull("initial_states@GRAD", static_cast<int>(j));
    if (!outer) continue;
    Variable* v = scopes[0]->FindLocalVar(GradName(ex_states[j]));
    const Tensor* g = v ? v->GetTensor() : nullptr;
    if (g && g->IsInitialized()) TensorCopy(*g, place, outer);
    else FillZerosLike(ctx.Input("initial_states", static_cast<int>(j)), place, outer);
  }
  // Parameter gradients: one n-ary sum over the steps per parameter.
  for (size_t p = 0; p < param_names.size() && !FluidMode(); ++p) {
    Tensor* outer = ctx.OutputOrNull("parameters@GRAD", static_cast<int>(p));
    if (!outer) continue;
    AggregateParamGrad(scopes, seq_len, GradName(param_names[p]), ctx.Input("parameters", static_cast<int>(p)), place,
                       outer);
  }
}

void DeclareRecurrentSlots(OpBuilder& op) {
  op.DuplicableInput("inputs", "step inputs, [seq_len, ...] (sliced on dim 0 per step)")
      .OptionalDuplicableInput("initial_states", "initial value of each memory")
      .OptionalDuplicableInput("parameters", "outer variables the step block reads (weights)")
      .Attr<std::vector<std::string>>("ex_states", {}, "names of the memories (previous values) in the step block")
      .Attr<std::vector<std::string>>("states", {}, "names of the memories' next values in the step block")
      .RequiredAttr<BlockRef>("sub_block", BlockRef{}, "the step block")
      .Attr<bool>("reverse", false, "run the steps from the last to the first")
      .Attr<bool>("is_train", true, "training mode (keeps every step scope for the backward pass)")
      .Attr<bool>("has_states", false, "whether there are memories");
}

}  // namespace

FL_REGISTER_OP(recurrent, op) {
  op.Doc("Runs the step block once per step of the inputs' dim 0 (StaticRNN), linking memories across steps.");
  DeclareRecurrentSlots(op);
  op.OptionalDuplicableOutput("outputs", "step outputs stacked to [seq_len, ...]")
      .Output("step_scopes", "the step scopes (STEP_SCOPES), reused across runs")
      .SetRun(RunRecurrent);
  // recurrent_grad gets sub_block = the grad block of the step block, as every op with a sub-block does.
  op.GradOp({"inputs", "initial_states", "parameters", "outputs", "outputs@GRAD", "step_scopes"})
      .Doc("Backward of recurrent: runs the grad block over the steps in reverse, passing memory gradients back "
           "and adding parameter gradients over the steps with one n-ary sum per parameter.")
      .SetRun(RunRecurrentGrad);
}

// rnn_memory_helper: Out = X. Shares X's buffer (no copy): links a step's output or memory to the name
// the recurrent op reads.
FL_REGISTER_OP(rnn_memory_helper, op) {
  op.Doc("Out = X, sharing X's buffer (StaticRNN memory and output links).")
      .Input("X", "input")
      .Output("Out", "X, shared")
      .Attr<int32_t>("dtype", static_cast<int32_t>(DType::FP32), "data type (kept for Fluid compatibility)")
      .SetInferShape(InferSameShapeAsX)
      .SetRun([](const ExecutionContext& ctx) {
        const Tensor& x = ctx.Input("X");
        Tensor* out = ctx.Output("Out");
        if (FluidMode()) {
          out->Clear();
          TensorCopy(x, ctx.place(), out);
        } else {
          out->ShareDataWith(x);
        }
        out->set_lod(x.lod());
      });
  op.GradOp({"X", "Out@GRAD"})
      .Doc("X@GRAD = Out@GRAD (shared), or zeros shaped like X when Out@GRAD was never set (the last step).")
      .Optional({"Out@GRAD"})
      .SetRun([](const ExecutionContext& ctx) {
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor* dout = ctx.HasInput("Out@GRAD") ? ctx.InputOrNull("Out@GRAD") : nullptr;
        if (dout && FluidMode()) {
          dx->Clear();
          TensorCopy(*dout, ctx.place(), dx);
        } else if (dout) {
          dx->ShareDataWith(*dout);
        } else {
          FillZerosLike(ctx.Input("X"), ctx.place(), dx);
        }
      });
}

}  // namespace fl
