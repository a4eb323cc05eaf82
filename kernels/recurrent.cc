// recurrent / recurrent_grad: the ops of layers.StaticRNN, and rnn_memory_helper. The ops read their
// slots and attributes into a StepBlockIO; csrc/step_block_runner.{h,cc} runs the step block (step
// scopes kept across runs, shared memories, eager deletion of each step's gradients) and holds the Fluid-mode
// comparison switch (fluid.core.set_recurrent_fluid_mode).
#include "logging.h"
#include "op_context.h"
#include "step_block_runner.h"

namespace fl {

namespace {

const BlockDesc& SubBlock(const ExecutionContext& ctx) {
  const ProgramDesc* program = ctx.desc().program();
  FL_ENFORCE(program != nullptr, ctx.Type(), ": the op is not part of a program");
  return *program->Block(static_cast<size_t>(ctx.Attr<BlockRef>("sub_block").idx));
}

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

// Both ops: one next-value name per memory, and one initial state per memory.
void CheckMemories(const OpCheckContext& ctx) {
  const size_t ex = ctx.Attr<std::vector<std::string>>("ex_states").size();
  const size_t st = ctx.Attr<std::vector<std::string>>("states").size();
  FL_ENFORCE(ex == st, "attributes 'ex_states' (", ex, " names) and 'states' (", st,
             " names) must name the same number of memories");
  const int init = ctx.InputSize("initial_states");
  FL_ENFORCE(init <= 0 || static_cast<size_t>(init) == ex, "input initial_states has ", init, " variables but ", ex,
             " memories are named in 'ex_states'");
}

// The slots and attributes both ops have, in the runner's terms.
StepBlockIO ReadCommonSlots(const ExecutionContext& ctx) {
  StepBlockIO io;
  io.block = &SubBlock(ctx);
  io.seq_len = SeqLen(ctx);
  io.reverse = ctx.Attr<bool>("reverse");
  io.input_names = &ctx.desc().Input("inputs");
  io.inputs = ctx.MultiInput("inputs");  // all initialized: SeqLen read each one
  io.ex_states = &ctx.Attr<std::vector<std::string>>("ex_states");
  io.states = &ctx.Attr<std::vector<std::string>>("states");
  return io;
}

void RunRecurrent(const ExecutionContext& ctx) {
  StepBlockIO io = ReadCommonSlots(ctx);
  const auto& ex_states = *io.ex_states;
  const auto& states = *io.states;
  FL_ENFORCE(ex_states.size() == states.size() && static_cast<int>(states.size()) == ctx.InputSize("initial_states"),
             "recurrent: ", ex_states.size(), " ex_states, ", states.size(), " states and ",
             ctx.InputSize("initial_states"), " initial_states must match");
  FL_VLOG(3) << "Static RNN input sequence length = " << io.seq_len;
  for (size_t j = 0; j < ex_states.size(); ++j)
    io.initial_states.push_back(&ctx.Input("initial_states", static_cast<int>(j)));
  io.output_names = &ctx.desc().Output("outputs");
  for (size_t k = 0; k < io.output_names->size(); ++k) io.outputs.push_back(ctx.Output("outputs", static_cast<int>(k)));
  ctx.State<StepBlockRunner>().Forward(io, ctx.scope(), ctx.OutputVar("step_scopes")->GetMutableStepScopes(),
                                       ctx.place());
}

void RunRecurrentGrad(const ExecutionContext& ctx) {
  StepBlockIO io = ReadCommonSlots(ctx);
  io.output_names = &ctx.desc().Input("outputs");
  io.parameter_names = &ctx.desc().Input("parameters");
  io.output_grad_args = &ctx.desc().Input("outputs@GRAD");
  io.input_grad_args = &ctx.desc().Output("inputs@GRAD");
  io.parameter_grad_args = &ctx.desc().Output("parameters@GRAD");
  for (size_t k = 0; k < io.output_names->size(); ++k)
    io.output_grads.push_back(ctx.InputOrNull("outputs@GRAD", static_cast<int>(k)));
  for (size_t i = 0; i < io.input_names->size(); ++i)
    io.input_grads.push_back(ctx.OutputOrNull("inputs@GRAD", static_cast<int>(i)));
  for (size_t j = 0; j < io.ex_states->size(); ++j) {
    io.initial_states.push_back(ctx.InputOrNull("initial_states", static_cast<int>(j)));
    io.initial_state_grads.push_back(ctx.OutputOrNull("initial_states@GRAD", static_cast<int>(j)));
  }
  for (size_t p = 0; p < io.parameter_names->size(); ++p) {
    io.parameters.push_back(ctx.InputOrNull("parameters", static_cast<int>(p)));
    io.parameter_grads.push_back(ctx.OutputOrNull("parameters@GRAD", static_cast<int>(p)));
  }
  ctx.State<StepBlockRunner>().Backward(io, *ctx.InputVar("step_scopes")->GetMutableStepScopes(), ctx.place());
}

}  // namespace

FL_REGISTER_OP(recurrent, op) {
  op.Doc("Runs the step block once per step of the inputs' dim 0 (StaticRNN), linking memories across steps.");
  op.DuplicableInput("inputs", "step inputs, [seq_len, ...] (sliced on dim 0 per step)")
      .OptionalDuplicableInput("initial_states", "initial value of each memory")
      .OptionalDuplicableInput("parameters", "outer variables the step block reads (weights)")
      .Attr<std::vector<std::string>>("ex_states", {}, "names of the memories (previous values) in the step block")
      .Attr<std::vector<std::string>>("states", {}, "names of the memories' next values in the step block")
      .RequiredAttr<BlockRef>("sub_block", BlockRef{}, "the step block")
      .Attr<bool>("reverse", false, "run the steps from the last to the first")
      .Attr<bool>("is_train", true, "training mode (keeps every step scope for the backward pass)")
      .Attr<bool>("has_states", false, "whether there are memories")
      .Check(CheckMemories)
      .OptionalDuplicableOutput("outputs", "step outputs stacked to [seq_len, ...]")
      .Output("step_scopes", "the step scopes (STEP_SCOPES), reused across runs")
      .SetRun(RunRecurrent);
  // recurrent_grad gets sub_block = the grad block of the step block, as every op with a sub-block does.
  op.GradOp({"inputs", "initial_states", "parameters", "outputs", "outputs@GRAD", "step_scopes"})
      .Doc(
          "Backward of recurrent: runs the grad block over the steps in reverse, passing memory gradients back "
          "and adding each step's parameter gradients into the outer ones as it goes.")
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
        if (RecurrentFluidMode()) {  // copy instead of sharing, as Fluid did
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
        if (dout && RecurrentFluidMode()) {
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
