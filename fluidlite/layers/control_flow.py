"""StaticRNN (Fluid 1.x): a step block run once per step of its inputs' first dim by the `recurrent` op.

    rnn = fluid.layers.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(emb)                              # emb: [seq_len, batch, D] -> x_t: [batch, D]
        h_prev = rnn.memory(shape=[-1, 128], batch_ref=x_t)    # zeros [batch, 128] at step 0
        h = fluid.layers.fc(input=[x_t, h_prev], size=128, act="tanh")
        rnn.update_memory(h_prev, h)
        rnn.step_output(h)
    hidden = rnn()                                             # [seq_len, batch, 128]

Misuse is caught while building: a step method outside ``step()``, a memory never updated, ``memory``
without ``init`` or ``shape`` + ``batch_ref``, step inputs of different lengths.
"""
import contextlib

from .. import core, unique_name
from ..framework import Variable, VarType, default_main_program
from ..layer_helper import LayerHelper

__all__ = ["StaticRNN"]


class _MemoryLink:
    def __init__(self, init, pre_mem, mem=None):
        self.init, self.pre_mem, self.mem = init, pre_mem, mem


class StaticRNN:
    BEFORE_RNN_BLOCK, IN_RNN_BLOCK, AFTER_RNN_BLOCK = 0, 1, 2

    def __init__(self, name=None):
        self.helper = LayerHelper("static_rnn", name=name)
        self.memories = {}   # pre_mem name -> _MemoryLink
        self.inputs = []     # inner step-input vars (named like their outer sequence vars)
        self.outputs = []    # outer [seq_len, ...] output vars
        self.status = StaticRNN.BEFORE_RNN_BLOCK
        self.seq_len = None
        self._block = None

    # ------------------------------------------------------------------ building the step block
    @contextlib.contextmanager
    def step(self):
        """The step block: everything built inside runs once per time step."""
        if self.status != StaticRNN.BEFORE_RNN_BLOCK:
            raise ValueError("StaticRNN.step() can be entered only once per StaticRNN")
        program = default_main_program()
        self._block = program._create_block()
        self.status = StaticRNN.IN_RNN_BLOCK
        ok = False
        try:
            yield
            ok = True
        finally:
            if ok:
                self.status = StaticRNN.AFTER_RNN_BLOCK
                try:
                    self._complete_op()
                finally:
                    program._rollback()
            else:
                program._rollback()

    def _assert_in_rnn_block(self, method):
        if self.status != StaticRNN.IN_RNN_BLOCK:
            raise ValueError("StaticRNN.%s must be called inside `with rnn.step():`" % method)

    def _parent_block(self):
        program = default_main_program()
        return program.block(program.current_block().parent_idx)

    def step_input(self, x):
        """The current step's slice of `x` ([seq_len, ...] -> [...])."""
        self._assert_in_rnn_block("step_input")
        if not isinstance(x, Variable):
            raise TypeError("StaticRNN.step_input expects a Variable, got %s" % type(x).__name__)
        if len(x.shape) < 1:
            raise ValueError("StaticRNN.step_input: %s has no sequence dim" % x.name)
        if self.seq_len is None:
            self.seq_len = x.shape[0]
        elif x.shape[0] != -1 and self.seq_len != -1 and x.shape[0] != self.seq_len:
            raise ValueError("StaticRNN.step_input: all step inputs must have the same length; %s has %d steps, "
                             "an earlier input has %d" % (x.name, x.shape[0], self.seq_len))
        ipt = self.helper.create_variable(name=x.name, dtype=x.dtype, shape=list(x.shape[1:]), type=x.type)
        self.inputs.append(ipt)
        return ipt

    def memory(self, init=None, shape=None, batch_ref=None, init_value=0.0, init_batch_dim_idx=0,
               ref_batch_dim_idx=1):
        """A value carried from step to step: `init` at step 0, or a constant of `shape` whose batch dim is
        taken from `batch_ref` (a step input; its outer sequence var's dim `ref_batch_dim_idx`)."""
        self._assert_in_rnn_block("memory")
        if init is None:
            if shape is None or batch_ref is None:
                raise ValueError("StaticRNN.memory: without init, both shape and batch_ref are required")
            if not isinstance(batch_ref, Variable):
                raise TypeError("StaticRNN.memory: batch_ref must be a Variable")
            parent = self._parent_block()
            if parent._find_var_recursive(batch_ref.name) is None:
                raise ValueError("StaticRNN.memory: batch_ref %s must be a step input (its sequence var is read "
                                 "outside the step block)" % batch_ref.name)
            boot = parent.create_var(name=unique_name.generate_with_ignorable_key(self.helper.name + "@memory_boot"),
                                     shape=list(shape), dtype=batch_ref.dtype, persistable=False)
            parent.append_op(type="fill_constant_batch_size_like", inputs={"Input": [batch_ref.name]},
                             outputs={"Out": [boot]},
                             attrs={"value": float(init_value), "shape": [int(s) for s in shape],
                                    "dtype": int(boot.dtype), "input_dim_idx": ref_batch_dim_idx,
                                    "output_dim_idx": init_batch_dim_idx})
            boot.stop_gradient = True
            return self.memory(init=boot)
        if not isinstance(init, Variable):
            raise TypeError("StaticRNN.memory: init must be a Variable, got %s" % type(init).__name__)
        pre_mem = self.helper.create_variable(name=unique_name.generate_with_ignorable_key(self.helper.name + "@mem"),
                                              dtype=init.dtype, shape=list(init.shape))
        self.memories[pre_mem.name] = _MemoryLink(init=init, pre_mem=pre_mem)
        return pre_mem

    def update_memory(self, mem, var):
        """Next step, `mem` holds this step's `var`."""
        self._assert_in_rnn_block("update_memory")
        if not isinstance(mem, Variable) or not isinstance(var, Variable):
            raise TypeError("StaticRNN.update_memory expects two Variables")
        if mem.name not in self.memories:
            raise ValueError("StaticRNN.update_memory: %s is not a memory of this StaticRNN" % mem.name)
        self.memories[mem.name].mem = var

    def step_output(self, o):
        """Collect `o` at every step into an outer [seq_len, ...] output."""
        self._assert_in_rnn_block("step_output")
        if not isinstance(o, Variable):
            raise TypeError("StaticRNN.step_output expects a Variable, got %s" % type(o).__name__)
        tmp = self.helper.create_variable_for_type_inference(dtype=o.dtype)
        self.helper.append_op(type="rnn_memory_helper", inputs={"X": [o]}, outputs={"Out": [tmp]},
                              attrs={"dtype": int(o.dtype)})
        seq = self.seq_len if self.seq_len is not None else -1
        out = self._parent_block().create_var(name=tmp.name, shape=[seq] + list(tmp.shape), dtype=tmp.dtype)
        self.outputs.append(out)

    def output(self, *outputs):
        for o in outputs:
            self.step_output(o)

    def __call__(self, *args, **kwargs):
        if self.status != StaticRNN.AFTER_RNN_BLOCK:
            raise ValueError("StaticRNN outputs are available only after the `with rnn.step():` block")
        if not self.outputs:
            raise ValueError("this StaticRNN has no step outputs (call rnn.step_output inside the step block)")
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)

    # ------------------------------------------------------------------ the recurrent op
    def _complete_op(self):
        program = default_main_program()
        block = program.current_block()
        parent = self._parent_block()
        if not self.inputs:
            raise ValueError("a StaticRNN needs at least one step_input")
        for name, link in self.memories.items():
            if link.mem is None:
                raise ValueError("StaticRNN memory %s (initialised from %s) is never updated: call "
                                 "rnn.update_memory(mem, new_value) in the step block" % (name, link.init.name))
        produced = {n for op in block.ops for n in op.output_arg_names}
        produced.update(v.name for v in self.inputs)
        produced.update(self.memories)
        params = []
        for op in block.ops:
            for n in op.input_arg_names:
                if n not in produced and n not in params:
                    params.append(n)
        parameters = []
        for n in params:
            v = parent._find_var_recursive(n)
            if v is None:
                raise ValueError("StaticRNN: the step block reads %s, which is neither computed in the step, a step "
                                 "input, a memory, nor a variable of the enclosing block" % n)
            parameters.append(v)
        pre_memories, new_memories, boots = [], [], []
        for name, link in self.memories.items():
            new_mem = self.helper.create_variable_for_type_inference(dtype=link.mem.dtype)
            block.append_op(type="rnn_memory_helper", inputs={"X": [link.mem]}, outputs={"Out": [new_mem]},
                            attrs={"dtype": int(link.mem.dtype)})
            pre_memories.append(name)
            new_memories.append(new_mem.name)
            boots.append(link.init)
        step_scopes = parent.create_var(name=unique_name.generate_with_ignorable_key(self.helper.name + "@step_scopes"),
                                        type=VarType.STEP_SCOPES)
        inlinks = [parent._var_recursive(v.name) for v in self.inputs]
        parent.append_op(type="recurrent",
                         inputs={"inputs": inlinks, "initial_states": boots, "parameters": parameters},
                         outputs={"outputs": self.outputs, "step_scopes": [step_scopes]},
                         attrs={"has_states": bool(pre_memories), "ex_states": pre_memories,
                                "states": new_memories, "sub_block": block, "reverse": False, "is_train": True})


_EMPTY = core.names()["empty"]
del core


__all__ += ["is_empty"]


def is_empty(x, cond=None):
    """A bool Variable of shape [1]: True if x has no elements. `cond`, if given, is the bool Variable written."""
    if not isinstance(x, Variable):
        raise TypeError("is_empty: 'x' must be a Variable, got %s" % type(x).__name__)
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    elif not isinstance(cond, Variable) or cond.dtype != VarType.BOOL:
        raise TypeError("is_empty: cond must be a bool Variable, got %s"
                        % (cond.dtype if isinstance(cond, Variable) else type(cond).__name__))
    cond.stop_gradient = True
    helper.append_op(type="is_empty", inputs={"X": [x]}, outputs={"Out": [cond]})
    return cond


# ---------------------------------------------------------------------------------------------- While loops
__all__ += ["While", "while_loop"]


def _block_writes(block):
    """Every variable name an op of `block`, or of a block nested in one of its ops, writes."""
    names = set()
    for op in block.ops:
        names.update(op.output_arg_names)
        if op.has_attr("sub_block"):
            names |= _block_writes(block.program.block(op.attr("sub_block")))
    return names


def _block_reads_and_writes(block):
    """(names the ops of `block` read before any of them writes them, names they write), each in first-use
    order: what a sub-block op takes from and gives to the enclosing blocks (While, ConditionalBlock)."""
    written, reads, writes = set(), {}, {}  # dicts as ordered sets
    for op in block.ops:
        for n in op.input_arg_names:
            if n not in written and n != _EMPTY:
                reads[n] = None
        for n in op.output_arg_names:
            if n != _EMPTY:
                written.add(n)
                writes[n] = None
    return list(reads), list(writes)


class While:
    """A loop in the program: the ops built inside ``with loop.block():`` run while `cond` (a bool [1]
    Variable) is true; the body must update `cond` (e.g. ``layers.less_than(i, n, cond=cond)``).

        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 10)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            ...
            layers.increment(i, in_place=True)
            layers.less_than(i, n, cond=cond)

    `is_test=True` runs every iteration in one scope and keeps nothing for a gradient (inference)."""
    BEFORE_WHILE_BLOCK, IN_WHILE_BLOCK, AFTER_WHILE_BLOCK = 0, 1, 2

    def __init__(self, cond, is_test=False, name=None):
        from .checks import check_dtype
        check_dtype("While", "cond", cond, ["bool"])
        numel = 1
        for d in cond.shape:
            numel *= d
        if numel != 1:
            raise TypeError("While: condition expected shape as [1], but given shape as %s." % list(cond.shape))
        self.helper = LayerHelper("while", name=name)
        self.status = While.BEFORE_WHILE_BLOCK
        self.cond_var = cond
        self.is_test = bool(is_test)

    @contextlib.contextmanager
    def block(self):
        """The loop body."""
        if self.status != While.BEFORE_WHILE_BLOCK:
            raise ValueError("While.block() can be entered only once per While")
        program = default_main_program()
        program._create_block()
        self.status = While.IN_WHILE_BLOCK
        ok = False
        try:
            yield
            ok = True
        finally:
            try:
                if ok:
                    self._complete()
            finally:
                self.status = While.AFTER_WHILE_BLOCK
                program._rollback()

    def _complete(self):
        program = default_main_program()
        body = program.current_block()
        parent = program.block(body.parent_idx)
        if self.cond_var.name not in _block_writes(body):
            raise ValueError("While: the loop body never writes the condition '%s', so the loop would never end; "
                             "update it in the body, e.g. layers.less_than(i, n, cond=cond)" % self.cond_var.name)
        # X: outer variables the body reads before writing them, and those it writes (their gradients pass through
        # the loop); Out: the outer variables it writes. The condition is read through its own slot.
        reads, writes = _block_reads_and_writes(body)
        outer = lambda n: parent._find_var_recursive(n) is not None and body.desc.find_var(n) is None  # noqa: E731
        x_names = [n for n in reads if outer(n)] + [n for n in writes if outer(n) and n not in reads]
        x_names = [n for n in x_names if n != self.cond_var.name]
        out_names = [n for n in writes if outer(n)]
        step_scopes = parent.create_var(name=unique_name.generate_with_ignorable_key(self.helper.name + "@step_scopes"),
                                        type=VarType.STEP_SCOPES)
        parent.append_op(type="while",
                         inputs={"X": [parent._var_recursive(n) for n in x_names], "Condition": [self.cond_var]},
                         outputs={"Out": [parent._var_recursive(n) for n in out_names], "StepScopes": [step_scopes]},
                         attrs={"sub_block": body, "is_test": self.is_test})


def while_loop(cond, body, loop_vars, is_test=False, name=None):
    """Fluid 1.7's functional loop: ``while cond(*loop_vars): loop_vars = body(*loop_vars)``; returns loop_vars
    (the same Variables, updated in place by the loop)."""
    from .checks import check_dtype
    from .tensor import assign
    if not callable(cond):
        raise TypeError("cond in while_loop should be callable")
    if not callable(body):
        raise TypeError("body in while_loop should be callable")
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError("while_loop: 'loop_vars' must be a list or tuple, got %s" % type(loop_vars).__name__)
    if len(loop_vars) == 0:
        raise ValueError("loop_vars in while_loop should not be empty")
    pre_cond = cond(*loop_vars)
    check_dtype("while_loop", "var of cond returned", pre_cond, ["bool"])
    numel = 1
    for d in pre_cond.shape:
        numel *= d
    if numel != 1:
        raise TypeError("the shape of the variable returned by cond should be [1],but given shape as %s."
                        % list(pre_cond.shape))
    loop = While(pre_cond, is_test, name)
    with loop.block():
        output_vars = body(*loop_vars)
        if not isinstance(output_vars, (list, tuple)):
            output_vars = [output_vars]
        if len(output_vars) != len(loop_vars):
            raise ValueError("body in while_loop should return the same arity (length and structure) and types as "
                             "loop_vars")
        now_cond = cond(*output_vars)
        for new, old in zip(output_vars, loop_vars):
            if new is not old:
                assign(new, old)
        assign(now_cond, pre_cond)
    return loop_vars


# ---------------------------------------------------------------------------------------------- DynamicRNN
__all__ += ["DynamicRNN"]


class DynamicRNN:
    """An RNN over LoD sequences of different lengths, built from While and tensor arrays as Fluid 1.x builds it:
    the sequences are sorted by length (lod_rank_table) and split into time steps (lod_tensor_to_array), so step t
    holds only the sequences longer than t and the batch shrinks as they end (shrink_memory); the outputs are put
    back into the input's order and LoD (array_to_lod_tensor).

        drnn = fluid.layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(embedding)         # [batch_t, D]
            prev = drnn.memory(shape=[200])           # zeros, or memory(init=boot, need_reorder=True)
            hidden = fluid.layers.fc(input=[word, prev], size=200, act="relu")
            drnn.update_memory(prev, hidden)
            drnn.output(hidden)
        last = fluid.layers.sequence_last_step(drnn())
    """
    BEFORE_RNN, IN_RNN, AFTER_RNN = 0, 1, 2

    def __init__(self, name=None):
        self.helper = LayerHelper("dynamic_rnn", name=name)
        self.status = DynamicRNN.BEFORE_RNN
        self.lod_rank_table = None
        self.max_seq_len = None
        self.step_idx = None
        self.zero_idx = None
        self.mem_dict = {}
        self.output_array = []
        self.outputs = []
        self.cond = self.helper.create_variable_for_type_inference(dtype="bool")
        self.cond.stop_gradient = False
        self.while_op = While(self.cond)
        self.input_array = []
        self.mem_link = []

    def _new_var(self, block, key, dtype, type=None):
        kwargs = {"name": unique_name.generate(key), "dtype": dtype}
        if type is not None:
            kwargs["type"] = type
        return block.create_var(**kwargs)

    def step_input(self, x, level=0):
        """The current time step of the LoD sequence `x` (sequences at `level` split into steps)."""
        self._assert_in_rnn_block_("step_input")
        from .checks import check_variable
        check_variable("DynamicRNN.step_input", "x", x)
        parent = self._parent_block_()
        if self.lod_rank_table is None:
            self.lod_rank_table = self._new_var(parent, "lod_rank_table", x.dtype, VarType.LOD_RANK_TABLE)
            self.lod_rank_table.stop_gradient = True
            parent.append_op(type="lod_rank_table", inputs={"X": [x]}, outputs={"Out": [self.lod_rank_table]},
                             attrs={"level": level})
            self.max_seq_len = self._new_var(parent, "dynamic_rnn_max_seq_len", "int64")
            self.max_seq_len.stop_gradient = False
            parent.append_op(type="max_sequence_len", inputs={"RankTable": [self.lod_rank_table]},
                             outputs={"Out": [self.max_seq_len]})
            self.cond.stop_gradient = True
            parent.append_op(type="less_than", inputs={"X": [self.step_idx], "Y": [self.max_seq_len]},
                             outputs={"Out": [self.cond]}, attrs={"force_cpu": True})
        input_array = self._new_var(parent, "dynamic_rnn_input_array", x.dtype, VarType.LOD_TENSOR_ARRAY)
        input_array.desc.set_shape(list(x.shape))
        self.input_array.append((input_array, x.dtype))
        parent.append_op(type="lod_tensor_to_array", inputs={"X": [x], "RankTable": [self.lod_rank_table]},
                         outputs={"Out": [input_array]})
        return self._read(input_array, self.step_idx)

    def _read(self, array, i):
        out = self.helper.create_variable_for_type_inference(dtype=array.dtype)
        self.helper.append_op(type="read_from_array", inputs={"X": [array], "I": [i]}, outputs={"Out": [out]})
        return out

    def _shrink(self, x):
        out = self.helper.create_variable_for_type_inference(dtype=x.dtype)
        self.helper.append_op(type="shrink_rnn_memory",
                              inputs={"X": [x], "I": [self.step_idx], "RankTable": [self.lod_rank_table]},
                              outputs={"Out": [out]})
        return out

    def static_input(self, x):
        """`x` as every step sees it: reordered like the sorted sequences, and shrunk with the batch."""
        self._assert_in_rnn_block_("static_input")
        from .checks import check_variable
        check_variable("DynamicRNN.static_input", "x", x)
        if self.lod_rank_table is None:
            raise RuntimeError("static_input() must be called after step_input().")
        parent = self._parent_block_()
        x_reordered = self._new_var(parent, "dynamic_rnn_static_input_reordered", x.dtype)
        x_reordered.desc.set_shape(list(x.shape))
        parent.append_op(type="reorder_lod_tensor_by_rank", inputs={"X": [x], "RankTable": [self.lod_rank_table]},
                         outputs={"Out": [x_reordered]})
        return self._shrink(x_reordered)

    @contextlib.contextmanager
    def block(self):
        """The step block: what is built inside runs once per time step."""
        if self.status != DynamicRNN.BEFORE_RNN:
            raise ValueError("rnn.block() can only be invoke once")
        from .tensor import fill_constant
        self.step_idx = fill_constant(shape=[1], dtype="int64", value=0, force_cpu=True)
        self.step_idx.stop_gradient = False
        self.status = DynamicRNN.IN_RNN
        with self.while_op.block():
            yield
            if self.lod_rank_table is None:
                raise ValueError("DynamicRNN: the block has no step_input; call drnn.step_input(x) in it")
            self.helper.append_op(type="increment", inputs={"X": [self.step_idx]}, outputs={"Out": [self.step_idx]},
                                  attrs={"step": 1.0})
            for new_mem, mem_array in self.mem_link:
                self.helper.append_op(type="write_to_array", inputs={"X": [new_mem], "I": [self.step_idx]},
                                      outputs={"Out": [mem_array]})
            self.helper.append_op(type="less_than", inputs={"X": [self.step_idx], "Y": [self.max_seq_len]},
                                  outputs={"Out": [self.cond]}, attrs={"force_cpu": True})
        self.status = DynamicRNN.AFTER_RNN
        for each_array in self.output_array:
            out = self.helper.create_variable_for_type_inference(dtype=each_array.dtype)
            self.helper.append_op(type="array_to_lod_tensor",
                                  inputs={"X": [each_array], "RankTable": [self.lod_rank_table]},
                                  outputs={"Out": [out]})
            self.outputs.append(out)

    def __call__(self, *args, **kwargs):
        if self.status != DynamicRNN.AFTER_RNN:
            raise ValueError("Output of the dynamic RNN can only be visited outside the rnn block.")
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def memory(self, init=None, shape=None, value=0.0, need_reorder=False, dtype="float32"):
        """A value carried across steps: `init` (reordered like the sorted sequences when need_reorder), or a
        constant `value` of `shape` (without the batch dim) and `dtype`. Shrinks with the batch."""
        self._assert_in_rnn_block_("memory")
        self._init_zero_idx_()
        parent = self._parent_block_()
        if init is not None:
            from .checks import check_variable
            check_variable("DynamicRNN.memory", "init", init)
            init_tensor = init
            if need_reorder:
                if self.lod_rank_table is None:
                    raise ValueError("If set need_reorder to True, make sure step_input be invoked before "
                                     "memory(init=init, need_reordered=True, ...).")
                init_reordered = self._new_var(parent, "dynamic_rnn_mem_init_reordered", init.dtype)
                init_reordered.desc.set_shape(list(init.shape))
                parent.append_op(type="reorder_lod_tensor_by_rank",
                                 inputs={"X": [init_tensor], "RankTable": [self.lod_rank_table]},
                                 outputs={"Out": [init_reordered]})
                init_tensor = init_reordered
            mem_array = self._new_var(parent, "dynamic_rnn_mem_array", init.dtype, VarType.LOD_TENSOR_ARRAY)
            mem_array.desc.set_shape(list(init.shape))
            parent.append_op(type="write_to_array", inputs={"X": [init_tensor], "I": [self.zero_idx]},
                             outputs={"Out": [mem_array]})
            retv = self._shrink(self._read(mem_array, self.step_idx))
            self.mem_dict[retv.name] = mem_array
            return retv
        if len(self.input_array) == 0:
            raise ValueError("step_input should be invoked before memory(shape=..., value=...)")
        if shape is None:
            raise ValueError("DynamicRNN.memory: without init, shape is required")
        init = self._new_var(parent, "mem_init", dtype)
        arr, in_dtype = self.input_array[0]
        in0 = self._new_var(parent, "in0", in_dtype)
        in0.desc.set_shape(list(arr.shape))
        parent.append_op(type="read_from_array", inputs={"X": [arr], "I": [self.zero_idx]}, outputs={"Out": [in0]})
        parent.append_op(type="fill_constant_batch_size_like", inputs={"Input": [in0]}, outputs={"Out": [init]},
                         attrs={"shape": [-1] + [int(s) for s in shape], "value": float(value),
                                "dtype": int(init.dtype)})
        init.stop_gradient = True
        return self.memory(init=init)

    def update_memory(self, ex_mem, new_mem):
        """At the next step, `ex_mem` holds this step's `new_mem` (same shape and dtype)."""
        self._assert_in_rnn_block_("update_memory")
        if not isinstance(ex_mem, Variable):
            raise TypeError("The input arg `ex_mem` of update_memory() must be a Variable")
        if not isinstance(new_mem, Variable):
            raise TypeError("The input arg `new_mem` of update_memory() must be a Variable")
        mem_array = self.mem_dict.get(ex_mem.name)
        if mem_array is None:
            raise ValueError("Please invoke memory before update_memory")
        if self.lod_rank_table is None:
            raise ValueError("Please invoke step_input before update_memory")
        self.mem_link.append((new_mem, mem_array))

    def output(self, *outputs):
        """Collect each of `outputs` at every step; drnn() returns them as LoD sequences in the input's order."""
        self._assert_in_rnn_block_("output")
        parent = self._parent_block_()
        for each in outputs:
            arr = self._new_var(parent, "_".join([self.helper.name, "output_array", each.name]), each.dtype,
                                VarType.LOD_TENSOR_ARRAY)
            arr.desc.set_shape(list(each.shape))
            self.helper.append_op(type="write_to_array", inputs={"X": [each], "I": [self.step_idx]},
                                  outputs={"Out": [arr]})
            self.output_array.append(arr)

    def _init_zero_idx_(self):
        if self.zero_idx is None:
            parent = self._parent_block_()
            self.zero_idx = self._new_var(parent, "zero_idx", "int64")
            parent.append_op(type="fill_constant", outputs={"Out": [self.zero_idx]},
                             attrs={"shape": [1], "dtype": int(self.zero_idx.dtype), "value": 0.0,
                                    "force_cpu": True})
            self.zero_idx.stop_gradient = True

    def _parent_block_(self):
        program = self.helper.main_program
        parent_idx = program.current_block().parent_idx
        assert parent_idx >= 0
        return program.block(parent_idx)

    def _assert_in_rnn_block_(self, method):
        if self.status != DynamicRNN.IN_RNN:
            raise ValueError("{0} can only be invoked inside rnn block.".format(method))


# Fluid 1.8 defines the branches and the tensor-array layers in control_flow.py too: programs that name them
# through fluid.layers.control_flow (ConditionalBlock, array_write, ...) find them here.
from . import branches as _branches, tensor_array as _tensor_array  # noqa: E402

for _module, _names in ((_branches, _branches.__all__ + ["ConditionalBlock"]), (_tensor_array, _tensor_array.__all__)):
    for _name in _names:
        globals().setdefault(_name, getattr(_module, _name))
del _module, _names, _name
