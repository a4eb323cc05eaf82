// while / while_grad: layers.While, and what is built on it (DynamicRNN, while_loop, dynamic_decode).
//
// Fluid 1.8 made a new scope for every iteration and prepared the body's operators again on every run. Here:
// - training (is_test=False): iteration k runs in step scope k, a kid of the running scope that the op keeps
//   across runs (its State), with the body prepared once per step scope (PreparedBlocks). The StepScopes
//   output lists the scopes this run used, for while_grad. A steady-state run creates no scope and no
//   variable and prepares nothing; a run longer than any before adds the missing scopes once.
// - is_test=True: one step scope serves every iteration, its local tensor arrays emptied before each (Fluid's
//   rule), so nothing is kept per iteration.
// - An outer tensor the body overwrites (a loop-carried value: `assign(new_h, h)`) is read by while_grad as it was
//   when the iteration began: each training iteration copies it into its step scope as x@SNAPSHOT, and the grad
//   maker renames the grad ops' reads to that name. Bool tensors (conditions) and in-place updates (`increment(i)`,
//   undone by increment's gradient) are not copied. The grad block runs in a grad scope, a kid of the step scope
//   found through the step scope's kGradScopeVar.
// while_grad walks the iterations backwards, linking the outer output gradients in, and adds up the gradients of
// the outer inputs iteration by iteration (AddStepGradient), as recurrent_grad does. The gradient of a
// loop-carried value is passed from each iteration to the one before it.
// Profiler: "while::step" / "while_grad::step" per iteration (args: the iteration), "while::prepare_step" when a
// step scope's block is (re)prepared. GLOG level 3 logs loop entry and exit with the iteration count.
#include <set>
#include <unordered_set>

#include "executor.h"
#include "grad_op_maker.h"
#include "logging.h"
#include "op_context.h"
#include "profiler.h"
#include "step_block_runner.h"

namespace fl {

namespace {

constexpr const char* kGradScopeVar = "@WHILE_GRAD_SCOPE@";  // in a step scope: [its grad scope]

// Where an iteration keeps the value an outer variable had when the iteration began (in its step scope). The
// body's grad ops read it under this name (MakeWhileGrad renames their reads), from the grad scope and from any
// scope nested in the step scope (a branch's, an inner loop's), while the forward ops keep reading the variable.
std::string SnapshotName(const std::string& name) { return name + "@SNAPSHOT"; }

const BlockDesc& SubBlock(const ExecutionContext& ctx) {
  const ProgramDesc* program = ctx.desc().program();
  FL_ENFORCE(program != nullptr, ctx.Type(), ": the op is not part of a program");
  const int idx = ctx.Attr<BlockRef>("sub_block").idx;
  FL_ENFORCE(idx > 0 && static_cast<size_t>(idx) < program->Size(), ctx.Type(), ": sub_block ", idx,
             " is not a block of the program (it has ", program->Size(), ")");
  return *program->Block(static_cast<size_t>(idx));
}

// The grad scope of a step scope: made on first use, kept with it (in the step scope's kGradScopeVar).
Scope* GradScope(Scope* step) {
  StepScopes* holder = step->Var(kGradScopeVar)->GetMutableStepScopes();
  if (holder->empty() || !Scope::IsAlive((*holder)[0]) || (*holder)[0]->parent() != step) {
    holder->clear();
    holder->push_back(&step->NewScope());
  }
  return (*holder)[0];
}

// GradScope per slot without the locked lookup: a step scope whose uid and generation (bumped when it loses
// variables or kids) are those seen last time still has the same grad scope.
class GradScopes {
 public:
  Scope* Get(size_t slot, Scope* step) {
    if (slot >= grads_.size()) grads_.resize(slot + 1);
    Entry& e = grads_[slot];
    if (e.grad && e.step_uid == step->uid() && e.step_generation == step->generation()) return e.grad;
    e.grad = GradScope(step);
    e.step_uid = step->uid();
    e.step_generation = step->generation();
    return e.grad;
  }

 private:
  struct Entry {
    Scope* grad = nullptr;
    uint64_t step_uid = 0, step_generation = 0;
  };
  std::vector<Entry> grads_;
};

// Whether an op of `block`, or of a block nested in one of its ops, writes `name`.
bool BlockWrites(const ProgramDesc& program, const BlockDesc& block, const std::string& name) {
  for (auto& op : block.AllOps()) {
    for (auto& n : op->OutputArgumentNames())
      if (n == name) return true;
    if (op->HasAttr("sub_block") &&
        BlockWrites(program, *program.Block(static_cast<size_t>(op->Attr<BlockRef>("sub_block").idx)), name))
      return true;
  }
  return false;
}

// The body's facts, read once from the block: which outer tensors to snapshot, which arrays are local.
struct BodyFacts {
  std::vector<std::string> snapshots;       // outer non-bool tensors the body overwrites (not in place)
  std::vector<std::string> snapshot_names;  // SnapshotName of each (built once, not per iteration)
  std::vector<std::string> local_arrays;    // tensor arrays declared in the body

  explicit BodyFacts(const BlockDesc& block) {
    std::set<std::string> seen;
    for (auto& op : block.AllOps()) {
      const auto reads = op->InputArgumentNames();
      const std::unordered_set<std::string> read_set(reads.begin(), reads.end());
      for (auto& name : op->OutputArgumentNames()) {
        if (name == kEmptyVarName || read_set.count(name) || block.FindVar(name) || !seen.insert(name).second) continue;
        const VarDesc* v = block.FindVarRecursive(name);
        if (v && v->kind() == VarKind::LOD_TENSOR && v->dtype() != DType::BOOL && !v->persistable())
          snapshots.push_back(name);
      }
    }
    // An outer name written in place by one op but overwritten by another is still snapshotted; one written
    // only in place (a counter) is not: its gradient op undoes the update.
    for (auto& name : snapshots) snapshot_names.push_back(SnapshotName(name));
    for (auto& v : block.AllVars())
      if (v->kind() == VarKind::LOD_TENSOR_ARRAY && !v->persistable()) local_arrays.push_back(v->name());
  }
};

struct WhileState {
  std::unique_ptr<BodyFacts> facts;
  PreparedBlocks body;
  // Step scope per slot, kept across runs; checked against the running scope only when it lost kids since.
  std::vector<Scope*> scopes;
  const Scope* parent = nullptr;
  uint64_t parent_uid = 0, parent_generation = 0;
  std::vector<uint64_t> uids;
  std::vector<uint64_t> reset_uids;  // the scope uid each slot's `arrays` were resolved for
  std::vector<std::vector<TensorList*>> arrays;

  void ValidateScopes(Scope& running) {
    if (parent == &running && parent_uid == running.uid() && parent_generation == running.generation()) return;
    for (Scope*& s : scopes)
      if (s && (parent != &running || !running.HasKid(s, uids[&s - scopes.data()]))) s = nullptr;
    parent = &running;
    parent_uid = running.uid();
    parent_generation = running.generation();
  }

  Scope* StepScope(size_t slot, Scope& running) {
    if (scopes.size() <= slot) {
      scopes.resize(slot + 1, nullptr);
      uids.resize(slot + 1, 0);
    }
    if (!scopes[slot]) {
      scopes[slot] = &running.NewScope();
      uids[slot] = scopes[slot]->uid();
    }
    return scopes[slot];
  }

  // Empties the body's local tensor arrays in step scope `s` (a previous iteration's or run's entries).
  void ResetLocalArrays(size_t slot, Scope* s) {
    if (facts->local_arrays.empty()) return;
    if (reset_uids.size() <= slot) {
      reset_uids.resize(slot + 1, 0);
      arrays.resize(slot + 1);
    }
    if (reset_uids[slot] != s->uid()) {
      arrays[slot].clear();
      for (auto& name : facts->local_arrays)
        if (Variable* v = s->FindLocalVar(name); v && (v->IsTensorList() || !v->IsInitialized()))
          arrays[slot].push_back(v->GetMutableTensorList());
      reset_uids[slot] = s->uid();
    }
    for (TensorList* a : arrays[slot]) a->clear();
  }
};

bool ConditionHolds(const ExecutionContext& ctx, const Variable* cond) {
  const Tensor* c = cond->GetTensor();
  FL_ENFORCE(c && c->IsInitialized() && c->dtype() == DType::BOOL && c->numel() == 1, "while: Condition '",
             ctx.InputName("Condition"), "' must be a bool tensor with one element, got ",
             c && c->IsInitialized() ? DTypeName(c->dtype()) : "nothing", " ", c ? c->dims() : DDim{});
  if (c->place().is_host()) return c->data<bool>()[0];
  Tensor host;  // a condition computed on a GPU: one byte to the host per iteration, as Fluid's while_op
  TensorCopy(*c, Place::CPU(), &host);
  return host.data<bool>()[0];
}

void RunWhile(const ExecutionContext& ctx) {
  auto& st = ctx.State<WhileState>();
  const BlockDesc& block = SubBlock(ctx);
  if (!st.facts) {
    // layers.While checks this when the block closes; a program built or edited otherwise could loop forever.
    FL_ENFORCE(BlockWrites(*ctx.desc().program(), block, ctx.InputName("Condition")), "while: the body (block ",
               block.idx(), ") never writes the condition '", ctx.InputName("Condition"),
               "', so the loop would never end");
    st.facts = std::make_unique<BodyFacts>(block);
  }
  const bool is_test = ctx.Attr<bool>("is_test");
  Scope& parent = ctx.scope();
  const Place& place = ctx.place();
  StepScopes& used = *ctx.OutputVar("StepScopes")->GetMutableStepScopes();
  used.clear();
  // The outer tensors to snapshot, resolved once per run.
  struct Snapshot {
    const std::string* outer_name;
    const std::string* name;
    Variable* outer;
  };
  std::vector<Snapshot> snapshots;
  if (!is_test)
    for (size_t i = 0; i < st.facts->snapshots.size(); ++i)
      if (Variable* v = parent.FindVar(st.facts->snapshots[i]))
        snapshots.push_back({&st.facts->snapshots[i], &st.facts->snapshot_names[i], v});
  st.ValidateScopes(parent);
  const Variable* cond = ctx.InputVar("Condition");
  FL_VLOG(3) << "while: enter the loop of block " << block.idx() << (is_test ? " (is_test)" : "");
  int64_t k = 0;
  while (ConditionHolds(ctx, cond)) {
    RecordEvent ev("while::step", "While");
    if (ev.active()) ev.SetArgs(IndexArgs("iteration", k));
    const size_t slot = is_test ? 0 : static_cast<size_t>(k);
    Scope* s = st.StepScope(slot, parent);
    auto& ops = st.body.Get(slot, s, block, "while::prepare_step");
    st.ResetLocalArrays(slot, s);
    for (const Snapshot& snap : snapshots) {
      const Tensor* t = snap.outer->GetTensor();
      Tensor* copy = s->Var(*snap.name)->GetMutableTensor();
      if (t && t->IsInitialized()) {
        CopyCause why("snapshot", snap.outer_name, snap.name, k);
        TensorCopy(*t, place, copy);
        copy->set_lod(t->lod());
      } else {
        copy->Clear();
      }
    }
    if (!is_test) used.push_back(s);
    RunPreparedOps(ops, place);
    ++k;
  }
  FL_VLOG(3) << "while: exit the loop of block " << block.idx() << " after " << k << " iterations";
}

// The linked-in gradient of a loop output that is not initialized: zeros like the forward value.
void ZeroLikeForward(const Scope& s, const std::string& grad_name, const Place& place, Tensor* out) {
  const Variable* fwd = s.FindVar(StripGradSuffix(grad_name));
  const Tensor* t = fwd ? fwd->GetTensor() : nullptr;
  if (t && t->IsInitialized()) FillZerosLike(*t, place, out);
}

// dst's entries share src's (tensor arrays: the entries, not the list, are shared).
void ShareArray(const TensorList& src, TensorList* dst) {
  dst->assign(src.size(), Tensor());
  for (size_t e = 0; e < src.size(); ++e)
    if (src[e].IsInitialized()) {
      (*dst)[e].ShareDataWith(src[e]);
      (*dst)[e].set_lod(src[e].lod());
    }
}

void ShareVariable(const Variable& src, Variable* dst) {
  if (const TensorList* a = src.GetTensorList()) {
    ShareArray(*a, dst->GetMutableTensorList());
  } else if (const Tensor* t = src.GetTensor(); t && t->IsInitialized()) {
    Tensor* d = dst->ResetToTensor();
    d->ShareDataWith(*t);
    d->set_lod(t->lod());
  }
}

struct WhileGradState {
  PreparedBlocks grad;
  GradScopes grads;
  std::unique_ptr<std::unordered_set<std::string>> written;  // what the grad block's ops write
};

void RunWhileGrad(const ExecutionContext& ctx) {
  FL_ENFORCE(!ctx.Attr<bool>("is_test"), "while_grad: the While loop was built with is_test=True, which keeps no ",
             "step scopes; build it with is_test=False to differentiate it");
  auto& st = ctx.State<WhileGradState>();
  const BlockDesc& block = SubBlock(ctx);
  if (!st.written) {
    st.written = std::make_unique<std::unordered_set<std::string>>();
    for (auto& op : block.AllOps())
      for (auto& name : op->OutputArgumentNames()) st.written->insert(name);
  }
  Scope& parent = ctx.scope();
  const Place& place = ctx.place();
  const StepScopes& scopes = *ctx.InputVar("StepScopes")->GetMutableStepScopes();
  const auto& outside_og = ctx.HasInput("Out@GRAD") ? ctx.desc().Input("Out@GRAD") : std::vector<std::string>{};
  const auto& inside_og = ctx.Attr<std::vector<std::string>>("original_output_grad");
  FL_ENFORCE(outside_og.size() == inside_og.size(), "while_grad: ", outside_og.size(),
             " output gradients (Out@GRAD) but ", inside_og.size(), " names in attribute original_output_grad");
  const auto& xs = ctx.desc().Input("X");
  static const std::vector<std::string> kNone;
  const auto& x_grads = ctx.desc().HasOutput("X@GRAD") ? ctx.desc().Output("X@GRAD") : kNone;
  FL_ENFORCE(x_grads.empty() || x_grads.size() == xs.size(), "while_grad: ", x_grads.size(), " gradients (X@GRAD) for ",
             xs.size(), " inputs (X)");
  // A loop-carried value: an input whose gradient is also supplied as an output gradient (by its forward name:
  // the supplied one may be named x@GRAD, x@GRAD@OG or x@GRAD@RENAME@k). carried[i] is that og's index or -1.
  std::vector<int> carried(x_grads.size(), -1);
  for (size_t i = 0; i < x_grads.size(); ++i)
    for (size_t j = 0; j < outside_og.size() && x_grads[i] != kEmptyVarName; ++j)
      if (StripGradSuffix(outside_og[j]) == xs[i]) carried[i] = static_cast<int>(j);
  const std::unordered_set<std::string> inside_og_set(inside_og.begin(), inside_og.end());
  // What each output gradient is for the iteration being run: the supplied one for the last iteration, then the
  // loop-carried gradient the iteration after it computed (or zeros, where that iteration overwrote the value
  // without reading it).
  // Tensor arrays pass from one iteration's grad scope to the next by moving the entry list (owned[j]: og[j] is
  // a grad scope's variable, free to move from), so a long loop does not copy a long array every iteration.
  std::vector<Variable*> og(outside_og.size(), nullptr);
  std::vector<bool> owned(outside_og.size(), false);
  std::vector<Variable> zeros(outside_og.size());
  for (size_t j = 0; j < outside_og.size(); ++j) og[j] = parent.FindVar(outside_og[j]);
  // The other inputs' gradients are added into the outer gradient iteration by iteration (AddStepGradient: the
  // first iteration's buffer is taken over), so a loop over large weights keeps one gradient alive, not one per
  // iteration; tensor-array gradients are summed entry by entry at the end (SumArrayGradients).
  std::vector<Variable*> outer_grads(x_grads.size(), nullptr);
  std::vector<const Tensor*> like(x_grads.size(), nullptr);
  for (size_t i = 0; i < x_grads.size(); ++i) {
    if (x_grads[i] == kEmptyVarName || carried[i] >= 0) continue;
    outer_grads[i] = parent.FindVar(x_grads[i]);
    FL_ENFORCE(outer_grads[i] != nullptr, "while_grad: gradient '", x_grads[i], "' is not in the scope");
    const Variable* x = parent.FindVar(xs[i]);
    like[i] = x ? x->GetTensor() : nullptr;
  }
  std::vector<char> started(x_grads.size(), 0);
  std::vector<std::vector<const Variable*>> array_parts(x_grads.size());
  const int64_t n = static_cast<int64_t>(scopes.size());
  FL_VLOG(3) << "while_grad: " << n << " iterations of block " << block.idx() << " in reverse";
  for (int64_t k = n - 1; k >= 0; --k) {
    RecordEvent ev("while_grad::step", "While");
    if (ev.active()) ev.SetArgs(IndexArgs("iteration", k));
    Scope* g = st.grads.Get(static_cast<size_t>(k), scopes[static_cast<size_t>(k)]);
    for (size_t j = 0; j < outside_og.size(); ++j) {
      if (!og[j]) continue;
      if (k == n - 1 && !og[j]->IsTensorList() && !(og[j]->GetTensor() && og[j]->GetTensor()->IsInitialized()))
        ZeroLikeForward(*g, outside_og[j], place, parent.FindVar(outside_og[j])->GetMutableTensor());
      Variable* inner = g->Var(inside_og[j]);
      if (owned[j] && og[j]->IsTensorList() && og[j] != inner) {
        *inner->GetMutableTensorList() = std::move(*og[j]->GetMutableTensorList());
        og[j]->GetMutableTensorList()->clear();
      } else if (og[j] != inner) {
        ShareVariable(*og[j], inner);
      }
    }
    // Each input's gradient is this iteration's own: a variable of the grad scope, emptied of the last run's.
    for (size_t i = 0; i < x_grads.size(); ++i) {
      if (x_grads[i] == kEmptyVarName) continue;
      const std::string name = GradName(xs[i]);
      Variable* v = g->Var(name);
      if (inside_og_set.count(name)) continue;  // linked above
      if (v->IsTensorList()) v->GetMutableTensorList()->clear();
      else if (v->GetTensor()) v->GetMutableTensor()->Clear();
    }
    RunPreparedOps(st.grad.Get(static_cast<size_t>(k), g, block, "while_grad::prepare_step"), place);
    for (size_t i = 0; i < x_grads.size(); ++i) {
      if (x_grads[i] == kEmptyVarName) continue;
      const std::string name = GradName(xs[i]);
      Variable* inner = g->FindLocalVar(name);
      if (carried[i] < 0) {
        if (!inner) continue;
        if (inner->IsTensorList()) {
          array_parts[i].push_back(inner);
          continue;
        }
        FL_ENFORCE(like[i] != nullptr && like[i]->IsInitialized(), "while_grad: input '", xs[i],
                   "' is not an initialized tensor, but the body computed a gradient for it");
        bool done = started[i];
        AddStepGradient(inner, name, k, *like[i], /*take=*/true, place, outer_grads[i]->ResetToTensor(), &done);
        started[i] = done;
        continue;
      }
      // A loop-carried value: its gradient before this iteration is the output gradient of the one before.
      const size_t j = static_cast<size_t>(carried[i]);
      if (inner && (inner->IsTensorList() || st.written->count(name))) {
        og[j] = inner;
        owned[j] = true;
      } else if (og[j] && og[j]->IsTensorList()) {  // the array's gradient passes on as it came in
        og[j] = g->FindLocalVar(inside_og[j]);
        owned[j] = true;
      } else if (og[j]) {  // overwritten without being read: no gradient passes
        const Tensor* like = og[j]->GetTensor();
        Tensor* z = zeros[j].GetMutableTensor();
        if (like && like->IsInitialized()) FillZerosLike(*like, place, z);
        og[j] = &zeros[j];
      }
    }
  }
  for (size_t i = 0; i < x_grads.size(); ++i) {
    if (x_grads[i] == kEmptyVarName) continue;
    Variable* outer = parent.FindVar(x_grads[i]);
    FL_ENFORCE(outer != nullptr, "while_grad: gradient '", x_grads[i], "' is not in the scope");
    if (carried[i] >= 0) {  // the gradient of the value the loop started from
      const size_t j = static_cast<size_t>(carried[i]);
      Variable* src = og[j];
      if (src && src != outer && owned[j] && src->IsTensorList())
        *outer->GetMutableTensorList() = std::move(*src->GetMutableTensorList());
      else if (src && src != outer) ShareVariable(*src, outer);
      continue;
    }
    // The other inputs' gradients: zeros when no iteration computed one (the loop never ran).
    if (!array_parts[i].empty())
      SumArrayGradients(array_parts[i], "while_grad: gradient '" + x_grads[i] + "'", place, outer);
    else if (!started[i] && like[i] && like[i]->IsInitialized()) FillZerosLike(*like[i], place, outer->ResetToTensor());
  }
}

void RenameReadsToSnapshots(const ProgramDesc& program, int block_idx, const std::vector<std::string>& names) {
  const BlockDesc& block = *program.Block(static_cast<size_t>(block_idx));
  for (auto& op : block.AllOps()) {
    if (op->HasAttr("sub_block")) {
      RenameReadsToSnapshots(program, op->Attr<BlockRef>("sub_block").idx, names);
      continue;
    }
    for (auto& name : names) op->RenameInput(name, SnapshotName(name));
  }
}

// while_grad reads the forward inputs and outputs, the step scopes and the gradients that the grad block reads
// before writing them and that no forward variable defines (the loop outputs' gradients, from after the loop);
// it writes the gradients of the inputs the grad block computes, and of every loop-carried value.
void MakeWhileGrad(GradOpMaker& g) {
  FL_ENFORCE(g.GradBlocks().size() == 1, "while: the grad maker needs the grad block of the body");
  const OpDesc& fwd = g.Forward();
  const ProgramDesc* program = fwd.program();
  FL_ENFORCE(program != nullptr, "while: the op is not part of a program");
  const BlockDesc& grad_block = *program->Block(static_cast<size_t>(g.GradBlocks()[0]));
  const BlockDesc& body = *program->Block(static_cast<size_t>(fwd.Attr<BlockRef>("sub_block").idx));
  std::unordered_set<std::string> known;
  for (auto& n : g.Input("X")) known.insert(n);
  for (auto& n : g.Output("Out")) known.insert(n);
  std::vector<std::string> output_grads;
  std::unordered_set<std::string> written;
  for (auto& op : grad_block.AllOps()) {
    for (auto& n : op->InputArgumentNames()) {
      if (n == kEmptyVarName || known.count(n) || !IsGradName(n) || body.FindVarRecursive(n)) continue;
      known.insert(n);
      output_grads.push_back(n);
    }
    for (auto& n : op->OutputArgumentNames()) {
      known.insert(n);
      written.insert(n);
    }
  }
  std::unordered_set<std::string> carried;  // forward names of the supplied gradients
  for (auto& n : output_grads) carried.insert(StripGradSuffix(n));
  std::vector<std::string> x_grads = g.InputGrad("X");
  const auto& xs = g.Input("X");
  for (size_t i = 0; i < xs.size(); ++i)
    if (x_grads[i] != kEmptyVarName && !written.count(GradName(xs[i])) && !carried.count(xs[i]))
      x_grads[i] = kEmptyVarName;  // the body computes no gradient for it
  // The grad ops read the snapshots of the outer tensors the body overwrites, in the grad block and in the grad
  // blocks nested in it (a branch's, an inner loop's); ops with a sub-block keep their slots' names.
  const BodyFacts facts(body);
  if (!facts.snapshots.empty()) {
    BlockDesc* mutable_body = program->Block(static_cast<size_t>(body.idx()));
    for (auto& name : facts.snapshots) {
      const VarDesc* v = body.FindVarRecursive(name);
      VarDesc* snap = mutable_body->Var(SnapshotName(name));
      snap->set_dtype(v->dtype());
      snap->set_shape(v->shape());
    }
    RenameReadsToSnapshots(*program, g.GradBlocks()[0], facts.snapshots);
  }
  OpDesc& op = g.NewOp("while_grad");
  op.SetInput("X", g.Input("X"));
  op.SetInput("Out", g.Output("Out"));
  op.SetInput("StepScopes", g.Output("StepScopes"));
  std::vector<std::string> outside;
  for (auto& n : output_grads) outside.push_back(g.GradVar(StripGradSuffix(n)));
  op.SetInput("Out@GRAD", outside);
  op.SetOutput("X@GRAD", x_grads);
  op.SetAttr("sub_block", BlockRef{g.GradBlocks()[0]});
  op.SetAttr("original_output_grad", output_grads);
  op.SetAttr("skip_eager_deletion_vars", std::vector<std::string>{});
}

}  // namespace

FL_REGISTER_OP(while, op) {
  op.Doc("Runs the body block while Condition holds (layers.While), in step scopes kept across runs.");
  op.OptionalDuplicableInput("X", "outer variables the body reads or writes")
      .Input("Condition", "bool [1], re-read after every iteration")
      .OptionalDuplicableOutput("Out", "outer variables the body writes")
      .Output("StepScopes", "the step scopes this run used (STEP_SCOPES), for while_grad")
      .RequiredAttr<BlockRef>("sub_block", BlockRef{}, "the body")
      .Attr<bool>("is_test", false, "inference: one step scope for every iteration, no gradient")
      .Attr<std::vector<std::string>>("skip_eager_deletion_vars", {}, "kept for Fluid compatibility")
      .Inplace("Out", "X")
      .Inplace("Out", "Condition")
      .SetRun(RunWhile)
      .Grad(MakeWhileGrad);
}

FL_REGISTER_OP(while_grad, op) {
  op.Doc(
      "Backward of while: runs the grad block over the iterations in reverse, passing loop-carried gradients back "
      "and adding up the other inputs' gradients over the iterations.");
  op.OptionalDuplicableInput("X", "the forward inputs")
      .OptionalDuplicableInput("Out", "the forward outputs")
      .OptionalDuplicableInput("Out@GRAD", "gradients of the loop outputs, from after the loop")
      .Input("StepScopes", "the forward op's step scopes")
      .OptionalDuplicableOutput("X@GRAD", "gradients of the inputs (@EMPTY@: not wanted)")
      .RequiredAttr<BlockRef>("sub_block", BlockRef{}, "the grad block of the body")
      .Attr<bool>("is_test", false, "must be false")
      .Attr<std::vector<std::string>>("original_output_grad", {}, "the names Out@GRAD have inside the grad block")
      .Attr<std::vector<std::string>>("skip_eager_deletion_vars", {}, "kept for Fluid compatibility")
      .Inplace("X@GRAD", "Out@GRAD")
      .SetRun(RunWhileGrad)
      .NoGradient();
}

}  // namespace fl
