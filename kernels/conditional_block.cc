// conditional_block / conditional_block_grad (Fluid 1.8's controlflow/conditional_block_op.cc): run a sub-block
// when a condition holds. The op behind layers.cond, case, switch_case, Switch and IfElse (layers/branches.py).
//
// When it runs: with is_scalar_condition, iff Cond (one bool tensor of one element) is true; without, iff every
// tensor of Input (what the block reads) is non-empty -- an IfElse branch that no row was sent to is skipped.
//
// Where it runs: in ONE scope, a kid of the running scope held by the Scope (STEP_SCOPES) variable, made the first
// time the block runs and reused by every later run, the block prepared and bound once for it (PreparedBlocks).
// Fluid made a new scope, and prepared the block again, on every run. A run that skips the block leaves the scope
// as it was; nothing reads it then (the grad op skips too).
//
// conditional_block_grad runs the grad block in that scope when the branch ran (each Out@GRAD shared into it,
// zeros for one nobody produced) and copies the gradients of Input out; when the branch did not run, every Input
// gradient is zeros shaped like its input, as in Fluid 1.8.
//
// Profiler: "conditional_block::run" / "conditional_block_grad::run" around a block that runs (args: the block and
// the condition), "conditional_block::prepare" when a block is prepared for its scope. GLOG_v=3: whether it ran.
#include <cstring>
#include <string>

#include "executor.h"
#include "logging.h"
#include "op_context.h"
#include "place_math.h"
#include "profiler.h"
#include "sparse_rows.h"
#include "step_block_runner.h"

namespace fl {

namespace {

constexpr const char* kRunEvent = "conditional_block::run";
constexpr const char* kGradRunEvent = "conditional_block_grad::run";
constexpr const char* kPrepareEvent = "conditional_block::prepare";

// What one op keeps across runs: what its attributes and slot counts say (fixed for the life of a prepared op, so
// read once: a run then does no attribute lookup), its block prepared for the kept scope, and its profiler args.
struct BranchState {
  const BlockDesc* block = nullptr;  // null until the first run
  bool scalar = false;
  int inputs = 0;
  PreparedBlocks blocks;
  const char* profile_args = nullptr;  // interned on the first profiled run
  const Scope* checked = nullptr;      // the kept scope last found alive, and the running scope's generation then
  uint64_t checked_gen = 0;
};

BranchState& State(const ExecutionContext& ctx) {
  BranchState& st = ctx.State<BranchState>();
  if (st.block) return st;
  const ProgramDesc* program = ctx.desc().program();
  FL_ENFORCE(program != nullptr, ctx.Type(), ": the op is not part of a program");
  st.scalar = ctx.Attr<bool>("is_scalar_condition");
  FL_ENFORCE(!st.scalar || ctx.InputSize("Cond") == 1, ctx.Type(), ": is_scalar_condition needs exactly one Cond, got ",
             ctx.InputSize("Cond"));
  st.inputs = ctx.InputSize("Input");
  st.block = program->Block(static_cast<size_t>(ctx.Attr<BlockRef>("sub_block").idx));
  return st;
}

bool ReadBool(const Tensor& t) {
  if (t.place().is_cpu()) return t.data<bool>()[0];
  Tensor cpu;
  TensorCopy(t, Place::CPU(), &cpu);
  return cpu.data<bool>()[0];
}

// Whether the block runs this time; `why` says why, for the log.
bool NeedRun(const ExecutionContext& ctx, const BranchState& st, std::string* why) {
  if (st.scalar) {
    const Tensor* c = ctx.InputVar("Cond")->GetTensor();
    FL_ENFORCE(c && c->IsInitialized(), ctx.Type(), ": Cond '", ctx.InputName("Cond"),
               "' is not initialized (was it computed before this op?)");
    FL_ENFORCE(c->dtype() == DType::BOOL && c->numel() == 1, ctx.Type(), ": Cond '", ctx.InputName("Cond"),
               "' must be a bool tensor of one element (is_scalar_condition), got ", DTypeName(c->dtype()), " ",
               c->dims());
    const bool run = ReadBool(*c);
    if (FL_VLOG_IS_ON(3)) *why = Str("Cond '", ctx.InputName("Cond"), "' is ", run ? "true" : "false");
    return run;
  }
  // Without a scalar condition: every Input tensor must hold something (arrays and other kinds are not counted).
  for (int i = 0; i < st.inputs; ++i) {
    const Tensor* t = ctx.InputVar("Input", i)->GetTensor();
    if (!t) continue;
    FL_ENFORCE(t->IsInitialized(), ctx.Type(), ": Input '", ctx.InputName("Input", i),
               "' is not initialized (was it computed before this op?)");
    if (t->numel() == 0) {
      if (FL_VLOG_IS_ON(3)) *why = Str("Input '", ctx.InputName("Input", i), "' is empty");
      return false;
    }
  }
  if (FL_VLOG_IS_ON(3)) *why = "every Input is non-empty";
  return true;
}

// The scope kept in `scopes` if it is still a live kid of the running scope, else null (never made, or deleted
// behind the op's back: a caller that dropped the running scope's kids). The full check (the process-wide set of
// live scopes) runs only when the running scope or an ancestor lost kids or variables since the last one
// (Scope::generation), so a steady-state run pays a few relaxed loads.
// The forward op's kept scope is a kid of the scope it ran in. The grad op runs there or below it: a While's grad
// block runs in a grad scope nested in the iteration's step scope, so the grad op accepts a kid of any ancestor.
bool KidOfRunningScope(const Scope* kept, const Scope& running, bool or_ancestor) {
  for (const Scope* s = &running; s; s = or_ancestor ? s->parent() : nullptr)
    if (kept->parent() == s) return true;
  return false;
}

Scope* LiveKeptScope(const ExecutionContext& ctx, BranchState& st, const StepScopes& scopes, bool grad = false) {
  if (scopes.size() != 1) return nullptr;
  Scope* s = scopes.front();
  const uint64_t gen = ctx.scope().generation();
  if (s == st.checked && gen == st.checked_gen) return s;
  if (!Scope::IsAlive(s) || !KidOfRunningScope(s, ctx.scope(), grad)) return nullptr;
  st.checked = s;
  st.checked_gen = gen;
  return s;
}

// The scope the block runs in: the one kept in the Scope variable, or a new kid of the running scope the first time.
Scope& KeptScope(const ExecutionContext& ctx, BranchState& st) {
  StepScopes* scopes = ctx.OutputVar("Scope")->GetMutableStepScopes();
  FL_ENFORCE(scopes->size() <= 1, ctx.Type(), ": Scope '", ctx.OutputName("Scope"), "' holds ", scopes->size(),
             " scopes; a conditional block keeps one");
  if (Scope* s = LiveKeptScope(ctx, st, *scopes)) return *s;
  scopes->assign(1, &ctx.scope().NewScope());
  return *scopes->front();
}

const char* ProfileArgs(const ExecutionContext& ctx, BranchState& st) {
  if (!st.profile_args)
    st.profile_args = Intern(Str("\"sub_block\":\"", st.block->idx(), "\",\"cond\":\"",
                                 ctx.InputSize("Cond") > 0 ? ctx.InputName("Cond") : std::string(), "\""));
  return st.profile_args;
}

void InferConditionalBlock(InferShapeContext& ctx) {
  if (!ctx.Attr<bool>("is_scalar_condition")) return;  // Cond is not read
  FL_ENFORCE(ctx.InputSize("Cond") == 1, ctx.Type(), ": is_scalar_condition needs exactly one Cond, got ",
             ctx.InputSize("Cond"));
  const DType dt = ctx.InputDType("Cond");
  FL_ENFORCE(dt == DType::BOOL || dt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Cond"),
             " must be bool (is_scalar_condition), got ", DTypeName(dt));
  const DDim d = ctx.InputDim("Cond");
  const int64_t n = d.numel();
  FL_ENFORCE(n < 0 || n == 1, ctx.Type(), ": ", ctx.Describe("Cond"), " must hold one element (is_scalar_condition)");
}

void RunConditionalBlock(const ExecutionContext& ctx) {
  BranchState& st = State(ctx);
  std::string why;
  if (!NeedRun(ctx, st, &why)) {
    FL_VLOG(3) << "Conditional block.idx = " << st.block->idx() << " does not run: " << why;
    return;
  }
  Scope& scope = KeptScope(ctx, st);
  FL_VLOG(3) << "Conditional block.idx = " << st.block->idx() << ", scope = " << &scope << " runs: " << why;
  RecordEvent ev(kRunEvent, "ConditionalBlock");
  if (ev.active()) ev.SetArgs(ProfileArgs(ctx, st));
  RunPreparedOps(st.blocks.Get(0, &scope, *st.block, kPrepareEvent), ctx.place());
}

// ------------------------------------------------------------------ the gradient

// out = zeros shaped like `like` (its LoD too), in out's own buffer when out holds one alone (no allocation in
// steady state), else in a new one (never in a buffer shared with another tensor).
void ZerosLike(const Tensor& like, const Place& place, Tensor* out) {
  if (!out->holder() || out->holder().use_count() != 1) out->Clear();
  out->Resize(like.dims());
  ZeroBytes(place, out->mutable_data(place, like.dtype()), like.nbytes());
  out->set_lod(like.lod());
}

// The gradient var the grad block writes for an Input: the outer name without the @RENAME@k that backward gives
// one of several writes of a gradient (the grad block itself writes the plain name).
std::string InnerGradName(const std::string& outer) {
  const size_t pos = outer.find(kRenameMarker);
  return pos == std::string::npos ? outer : outer.substr(0, pos);
}

// Input i's gradient when the branch did not run, or when the grad block computed none: zeros like the input.
void ZeroInputGrad(const ExecutionContext& ctx, int i, Variable* outer) {
  Variable* in = ctx.InputVar("Input", i);
  if (in->IsTensorList()) {  // an array: zeros per entry
    const TensorList* arr = in->GetMutableTensorList();
    TensorList* g = outer->GetMutableTensorList();
    g->resize(arr->size());
    for (size_t k = 0; k < arr->size(); ++k)
      if ((*arr)[k].IsInitialized()) ZerosLike((*arr)[k], ctx.place(), &(*g)[k]);
    return;
  }
  const Tensor* t = in->GetTensor();
  FL_ENFORCE(t && t->IsInitialized(), ctx.Type(), ": Input '", ctx.InputName("Input", i),
             "' is not initialized: no gradient can be shaped like it");
  ZerosLike(*t, ctx.place(), outer->ResetToTensor());
}

// Input i's gradient from the grad block's variable `inner` (a tensor, a sparse gradient or an array).
void CopyInputGrad(const ExecutionContext& ctx, int i, Variable& inner, Variable* outer) {
  if (const SelectedRows* sr = inner.GetSelectedRows()) {  // a sparse lookup inside the branch: made dense
    Tensor* g = outer->ResetToTensor();
    ZeroInputGrad(ctx, i, outer);
    AddSelectedRowsTo(*sr, g, Str(ctx.Type(), ": gradient '", ctx.OutputName("Input@GRAD", i), "'"));
    return;
  }
  if (inner.IsTensorList()) {
    const TensorList* arr = inner.GetMutableTensorList();
    TensorList* g = outer->GetMutableTensorList();
    g->resize(arr->size());
    for (size_t k = 0; k < arr->size(); ++k)
      if ((*arr)[k].IsInitialized()) TensorCopy((*arr)[k], ctx.place(), &(*g)[k]);
    return;
  }
  const Tensor* t = inner.GetTensor();
  if (t && t->IsInitialized()) TensorCopy(*t, ctx.place(), outer->ResetToTensor());
  else ZeroInputGrad(ctx, i, outer);  // nothing in the branch differentiates through this input
}

// Gives the grad block each output gradient: shared from the outer one, or zeros when nobody produced it.
void LinkOutputGrads(const ExecutionContext& ctx, Scope& scope) {
  const int n = ctx.InputSize("Out@GRAD");
  FL_ENFORCE(n == 0 || n == ctx.InputSize("Out"), ctx.Type(), ": ", n, " Out@GRAD for ", ctx.InputSize("Out"), " Out");
  for (int k = 0; k < n; ++k) {
    const std::string& name = ctx.InputName("Out@GRAD", k);
    Variable* local = scope.FindLocalVar(name);
    if (!local) continue;  // the grad block does not read it
    Tensor* dst = local->GetMutableTensor();
    if (const Tensor* outer = ctx.InputOrNull("Out@GRAD", k)) {
      dst->ShareDataWith(*outer);
      dst->set_lod(outer->lod());
    } else if (const Tensor* out = ctx.InputOrNull("Out", k)) {
      ZerosLike(*out, ctx.place(), dst);
    } else {
      dst->Clear();
    }
  }
}

void RunConditionalBlockGrad(const ExecutionContext& ctx) {
  BranchState& st = State(ctx);
  const BlockDesc& block = *st.block;
  const int grads = ctx.OutputSize("Input@GRAD");
  FL_ENFORCE(grads == 0 || grads == st.inputs, ctx.Type(), ": ", grads, " Input@GRAD for ", st.inputs, " Input");
  std::string why;
  const bool ran = NeedRun(ctx, st, &why);
  auto wanted = [&](int i) { return ctx.OutputName("Input@GRAD", i) != kEmptyVarName; };
  if (!ran) {
    FL_VLOG(3) << "Conditional Grad block.idx = " << block.idx() << " does not run (" << why
               << "): the input gradients are zeros";
    for (int i = 0; i < grads; ++i)
      if (wanted(i)) ZeroInputGrad(ctx, i, ctx.OutputVar("Input@GRAD", i));
    return;
  }
  Scope* kept = LiveKeptScope(ctx, st, *ctx.InputVar("Scope")->GetMutableStepScopes(), /*grad=*/true);
  FL_ENFORCE(kept != nullptr, ctx.Type(), ": the branch ran (", why, ") but Scope '", ctx.InputName("Scope"),
             "' holds no live scope of the forward conditional_block (run the forward op first)");
  Scope& scope = *kept;
  FL_VLOG(3) << "Conditional Grad block.idx = " << block.idx() << ", scope = " << &scope << " runs: " << why;
  {
    RecordEvent ev(kGradRunEvent, "ConditionalBlock");
    if (ev.active()) ev.SetArgs(ProfileArgs(ctx, st));
    auto& ops = st.blocks.Get(0, &scope, block, kPrepareEvent);
    LinkOutputGrads(ctx, scope);
    RunPreparedOps(ops, ctx.place());
  }
  for (int i = 0; i < grads; ++i) {
    if (!wanted(i)) continue;
    Variable* inner = scope.FindLocalVar(InnerGradName(ctx.OutputName("Input@GRAD", i)));
    Variable* outer = ctx.OutputVar("Input@GRAD", i);
    if (inner) CopyInputGrad(ctx, i, *inner, outer);
    else ZeroInputGrad(ctx, i, outer);
  }
}

}  // namespace

FL_REGISTER_OP(conditional_block, op) {
  op.Doc(
        "Runs sub_block once if the condition holds: Cond[0] is true (is_scalar_condition), else every Input "
        "tensor is non-empty. The block runs in one scope kept in Scope across runs.")
      .DuplicableInput("Cond", "the condition: one bool tensor of one element with is_scalar_condition (else unread)")
      .OptionalDuplicableInput("Input", "the outer variables the block reads")
      .NonDifferentiable({"Cond"})
      .OptionalDuplicableOutput("Out", "the outer variables the block writes")
      .Output("Scope", "STEP_SCOPES: the block's scope, made on the first run that runs the block and kept")
      .Inplace("Out", "Input")  // a variable the block reads and then updates (increment(counter) in a Switch case)
      .RequiredAttr<BlockRef>("sub_block", BlockRef{}, "the block to run")
      .Attr<bool>("is_scalar_condition", false,
                  "Cond is a scalar: run iff it is true (else: run iff every Input tensor is non-empty)")
      .Attr<std::vector<std::string>>("skip_eager_deletion_vars", {},
                                      "Fluid's garbage-collector hint (accepted for Fluid programs; not needed here)")
      .SetInferShape(InferConditionalBlock)
      .SetRun(RunConditionalBlock);
  // conditional_block_grad gets sub_block = the grad block of the sub-block, as every op with a sub-block does;
  // Input@GRAD keeps one name per Input (@EMPTY@ where none is wanted), as Fluid's maker (drop_empty_grad=false).
  op.GradOp({"Cond", "Input", "Out", "Out@GRAD", "Scope"})
      .Optional({"Out@GRAD"})
      .Doc(
          "Backward of conditional_block: if the branch ran, runs the grad block in its scope and copies the "
          "Input gradients out; if it did not, the Input gradients are zeros.")
      .SetRun(RunConditionalBlockGrad);
}

}  // namespace fl
