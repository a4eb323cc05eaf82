// select_input / select_output (Fluid 1.8's select_input_op.cc, select_output_op.cc): pick one of several
// variables by an int32 Mask of one element, each op the gradient of the other. layers.cond merges its two
// branches with select_input([false_out, true_out], cast(pred, int32)).
//   select_input:  Out = X[Mask], a copy with its LoD. The other X are not read (they may be stale, of other
//                  shapes or dtypes, or never computed: only the branch that ran wrote its output).
//   select_output: Out[Mask] = X, a copy. The other Out are cleared: Fluid leaves them unwritten, which there (new
//                  temporaries every run) means uninitialized; here temporaries live across runs, and clearing keeps
//                  a previous run's value from being read as this run's.
#include "grad_op_maker.h"
#include "op_context.h"

namespace fl {

namespace {

// Mask's value, checked against the number of branches `n` (X's inputs or Out's outputs).
int Branch(const ExecutionContext& ctx, int n, const char* listed) {
  const Tensor& m = ctx.Input("Mask");
  const std::string& name = ctx.InputName("Mask");
  FL_ENFORCE(m.dtype() == DType::INT32 && m.numel() == 1, ctx.Type(), ": Mask '", name,
             "' must be an int32 tensor of one element, got ", DTypeName(m.dtype()), " ", m.dims());
  int32_t v;
  if (m.place().is_cpu()) {
    v = m.data<int32_t>()[0];
  } else {
    Tensor cpu;
    TensorCopy(m, Place::CPU(), &cpu);
    v = cpu.data<int32_t>()[0];
  }
  FL_ENFORCE(v >= 0 && v < n, ctx.Type(), ": Mask '", name, "' = ", v, " must be in [0, ", n, "): ", listed, " has ", n,
             " variables");
  return v;
}

void CheckMask(InferShapeContext& ctx) {
  const DType dt = ctx.InputDType("Mask");
  FL_ENFORCE(dt == DType::INT32 || dt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("Mask"),
             " must be int32, got ", DTypeName(dt));
  const int64_t n = ctx.InputDim("Mask").numel();
  FL_ENFORCE(n < 0 || n == 1, ctx.Type(), ": ", ctx.Describe("Mask"), " must hold one element");
}

// Out is X[0]'s dtype and LoD level (Fluid's), with X's dims where all X agree and -1 where they differ (X of
// another rank: X[0]'s dims, as Fluid).
void InferSelectInput(InferShapeContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(n >= 1, "select_input: X must list at least one variable");
  CheckMask(ctx);
  if (!ctx.HasInputAt("X", 0)) return;
  DDim out = ctx.InputDim("X", 0);
  for (int i = 1; i < n; ++i) {
    if (!ctx.HasInputAt("X", i)) continue;
    const DDim d = ctx.InputDim("X", i);
    if (d.size() != out.size()) {
      out = ctx.InputDim("X", 0);
      break;
    }
    for (int k = 0; k < d.size(); ++k)
      if (d[k] != out[k]) out[k] = -1;
  }
  ctx.SetOutput("Out", out, ctx.InputDType("X", 0));
  ctx.SetOutputLoDLevel("Out", ctx.InputLoDLevel("X", 0));
}

void RunSelectInput(const ExecutionContext& ctx) {
  const int k = Branch(ctx, ctx.InputSize("X"), "X");
  const Tensor* x = ctx.InputOrNull("X", k);
  FL_ENFORCE(x != nullptr, "select_input: X[", k, "] '", ctx.InputName("X", k),
             "', the one Mask selects, is not initialized (was it computed before this op?)");
  TensorCopy(*x, ctx.place(), ctx.Output("Out"));
}

void RunSelectOutput(const ExecutionContext& ctx) {
  const int n = ctx.OutputSize("Out");
  const int k = Branch(ctx, n, "Out");
  for (int i = 0; i < n; ++i) {
    Tensor* out = ctx.OutputOrNull("Out", i);  // null: @EMPTY@, a gradient nobody wants
    if (!out) continue;
    if (i == k) TensorCopy(ctx.Input("X"), ctx.place(), out);
    else out->Clear();
  }
}

// select_input's gradient: Out@GRAD goes to the selected X@GRAD (select_output).
void SelectInputGrad(GradOpMaker& g) {
  const std::vector<std::string> dx = g.InputGrad("X");
  bool wanted = false;
  for (const auto& n : dx) wanted |= n != kEmptyVarName;
  if (!wanted) return;
  OpDesc& op = g.NewOp("select_output");
  op.SetInput("X", g.OutputGrad("Out"));
  op.SetInput("Mask", g.Input("Mask"));
  op.SetOutput("Out", dx);
}

// select_output's gradient: X@GRAD is the selected Out@GRAD (select_input).
void SelectOutputGrad(GradOpMaker& g) {
  const std::string dx = FirstArg(g.InputGrad("X"));
  if (dx.empty()) return;
  OpDesc& op = g.NewOp("select_input");
  op.SetInput("X", g.OutputGrad("Out"));
  op.SetInput("Mask", g.Input("Mask"));
  op.SetOutput("Out", {dx});
}

}  // namespace

FL_REGISTER_OP(select_input, op) {
  op.Doc("Out = X[Mask], a copy with its LoD; the other X are not read (layers.cond's merge of its branches).")
      // Dispensable: as select_output's gradient, an Out@GRAD nobody produced is read as absent (never selected).
      .OptionalDuplicableInput("X", "the candidates (any dtypes and shapes; at least one)")
      .Input("Mask", "int32 tensor of one element in [0, len(X))")
      .NonDifferentiable({"Mask"})
      .Output("Out", "a copy of X[Mask]")
      .SetInferShape(InferSelectInput)
      .SetRun(RunSelectInput)
      .Grad(SelectInputGrad);
}

FL_REGISTER_OP(select_output, op) {
  op.Doc("Out[Mask] = X, a copy with its LoD; the other Out are cleared (left uninitialized).")
      .Input("X", "the tensor to route")
      .Input("Mask", "int32 tensor of one element in [0, len(Out))")
      .NonDifferentiable({"Mask"})
      .DuplicableOutput("Out", "the branches; only Out[Mask] is written")
      .SetInferShape(CheckMask)
      .SetRun(RunSelectOutput)
      .Grad(SelectOutputGrad);
}

}  // namespace fl
