"""Branches inside the graph (Fluid 1.8 ``layers/control_flow.py``): ``cond``, ``case``, ``switch_case``, ``Switch``
and ``IfElse``, all built on ``ConditionalBlock``, one ``conditional_block`` op running a sub-block when its
condition holds (kernels/conditional_block.cc).

    out = fluid.layers.cond(x < y, lambda: x * 2, lambda: y - 1)   # both branches built; one runs per run

    with fluid.layers.Switch() as switch:                          # the first true case runs, else the default
        with switch.case(step < warmup):
            fluid.layers.assign(warm_lr, lr)
        with switch.default():
            fluid.layers.assign(base_lr, lr)

    ie = fluid.layers.IfElse(cond)                                 # cond: bool [N, 1], row by row
    with ie.true_block():
        ie.output(ie.input(x) * 2)
    with ie.false_block():
        ie.output(ie.input(x) - 1)
    out, = ie()

How each is built, as Fluid 1.8 builds it:
- ``cond``: a scalar conditional block on ``pred`` for true_fn and one on ``logical_not(pred)`` for false_fn; each
  branch's outputs are assigned to new variables of the enclosing block, and ``select_input([false, true],
  cast(pred, int32))`` merges them leaf by leaf (the outputs may be nested lists, tuples and dicts of Variables, of
  the same structure in both branches).
- ``case``: nested ``cond``s in list order (default None: the last pair's fn is the default, its pred unused).
- ``switch_case``: ``case`` over ``equal(branch_index, key)`` (default None: the fn of the largest key).
- ``Switch``: each case a scalar conditional block on ``condition AND NOT(every earlier condition)``, the default
  one on ``NOT(every condition)``; so exactly one block runs. The learning-rate schedules use it.
- ``IfElse(cond)``: ``input(x)`` splits x's rows (or level-0 sequences) by cond with ``split_lod_tensor``; each
  branch is a non-scalar conditional block (it runs iff its split inputs are non-empty); ``ie()`` merges each pair
  of outputs with ``merge_lod_tensor``.
Gradients flow through the branch that ran; the inputs of a branch that did not run get zero gradients.
"""
from functools import partial

from .. import unique_name
from ..framework import Variable, VarType, dtype_to_str
from ..layer_helper import LayerHelper
from . import nn, tensor
from .checks import check_dtype, check_variable
from .control_flow import _block_reads_and_writes
from .utils import assert_same_structure, map_structure

__all__ = ["cond", "case", "switch_case", "Switch", "IfElse"]



def _check_type(value, arg, types, layer):
    """Fluid's check_type for non-Variable arguments (its TypeError text)."""
    if not isinstance(value, types):
        raise TypeError("The type of '%s' in %s must be %s, but received %s. " % (arg, layer, types, type(value)))


def _error_message(what, arg_name, op_name, right_value, error_value):
    return "{what} of '{arg_name}' in {op_name} must be {right_value}, but received: {error_value}.".format(
        what=what, arg_name=arg_name, op_name=op_name, right_value=right_value, error_value=error_value)


# ------------------------------------------------------------------ ConditionalBlock

class ConditionalBlock:
    """A sub-block run by one ``conditional_block`` op: with ``is_scalar_condition``, iff ``inputs[0]`` (a bool
    Variable of one element) is true; otherwise iff every tensor the block reads is non-empty.

        cb = ConditionalBlock([pred], is_scalar_condition=True)
        with cb.block():
            fluid.layers.assign(x * 2, out)        # `out` a Variable of an enclosing block

    On leaving ``block()`` the op is appended to the enclosing block with Input = the outer variables the block
    reads before writing them, Out = the outer variables it writes (in the order the block first uses them; Fluid
    takes them from sets) and a STEP_SCOPES variable for the scope the block runs in."""

    def __init__(self, inputs, is_scalar_condition=False, name=None):
        _check_type(inputs, "inputs", (list, tuple), "ConditionalBlock")
        for each_input in inputs:
            check_variable("ConditionalBlock", "inputs", each_input)
        self.inputs = list(inputs)
        self.is_scalar_condition = is_scalar_condition
        self.helper = LayerHelper("conditional_block", name=name)

    def block(self):
        return ConditionalBlockGuard(self)

    def complete(self):
        program = self.helper.main_program
        inside = program.current_block()
        parent = program.block(inside.parent_idx)
        reads, written = _block_reads_and_writes(inside)
        params = []
        for n in reads:
            v = parent._find_var_recursive(n)
            if v is None:
                raise ValueError("ConditionalBlock: the block reads %s, which is neither computed in the block before "
                                 "nor a variable of an enclosing block" % n)
            params.append(v)
        outs = [v for v in (parent._find_var_recursive(n) for n in written) if v is not None]
        step_scope = parent.create_var(type=VarType.STEP_SCOPES)
        parent.append_op(type="conditional_block", inputs={"Cond": self.inputs, "Input": params},
                         outputs={"Out": outs, "Scope": [step_scope]},
                         attrs={"sub_block": inside, "is_scalar_condition": bool(self.is_scalar_condition)})


class ConditionalBlockGuard:
    """``with`` guard of a ConditionalBlock: a new sub-block; on a clean exit the conditional_block op."""

    def __init__(self, block):
        if not isinstance(block, ConditionalBlock):
            raise TypeError("ConditionalBlockGuard: 'block' must be a ConditionalBlock, got %s" % type(block).__name__)
        self.block = block
        self.program = block.helper.main_program

    def __enter__(self):
        self.program._create_block()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            if exc_type is None:
                self.block.complete()
        finally:
            self.program._rollback()
        return False


def select_input(inputs, mask):
    """Out = inputs[mask] (op select_input): mask an int32 Variable of one element."""
    helper = LayerHelper("select_input")
    out = helper.create_variable_for_type_inference(dtype=inputs[0].dtype)
    helper.append_op(type="select_input", inputs={"X": list(inputs), "Mask": [mask]}, outputs={"Out": [out]})
    return out


def select_output(input, outputs, mask):
    """outputs[mask] = input (op select_output); the other outputs are left uninitialized."""
    helper = LayerHelper("select_output")
    helper.append_op(type="select_output", inputs={"X": [input], "Mask": [mask]}, outputs={"Out": list(outputs)})
    return outputs


def _copy_var_to_parent_block(var, helper):
    """A new variable of the enclosing block assigned `var`'s value inside the branch (Fluid's
    copy_var_to_parent_block): what the branch returns, visible after it."""
    if var is None:
        return None
    if not isinstance(var, Variable):
        raise TypeError("%s: a branch function must return Variables (or nested lists, tuples or dicts of them, or "
                        "None), got %s" % (helper.layer_type, type(var).__name__))
    program = helper.main_program
    parent = program.block(program.current_block().parent_idx)
    parent_var = parent.create_var(dtype=var.dtype, shape=var.shape, type=var.type)
    tensor.assign(var, parent_var)
    return parent_var


def _check_scalar_pred(layer, arg, pred):
    """A scalar condition holds one element ([1]; an unknown -1 dim passes)."""
    shape = list(pred.shape)
    if all(s >= 0 for s in shape):
        n = 1
        for s in shape:
            n *= s
        if n != 1:
            raise ValueError("%s: '%s' (%s) must hold one element (shape [1]), got shape %s"
                             % (layer, arg, pred.name, shape))


# ------------------------------------------------------------------ cond, case, switch_case

def cond(pred, true_fn=None, false_fn=None, name=None):
    """true_fn() if pred else false_fn(), decided at run time: both functions are called once, now, to build their
    branches (each in its own conditional block), and only the branch whose condition holds runs.

    pred: a bool Variable of one element. true_fn, false_fn: callables returning a Variable, a nested list, tuple or
    dict of Variables, or None; both must return the same structure (or both None). Returns the merged structure
    (select_input per leaf), or None when both return None."""
    check_dtype("cond", "pred", pred, ["bool"])
    _check_type(name, "name", (str, type(None)), "fluid.layers.cond")
    _check_scalar_pred("cond", "pred", pred)
    helper = LayerHelper("cond", name=name)
    true_output = false_output = None
    copy_to_parent = partial(_copy_var_to_parent_block, helper=helper)
    if true_fn is not None:
        if not callable(true_fn):
            raise TypeError("The true_fn in cond must be callable, but received {}".format(type(true_fn).__name__))
        with ConditionalBlock([pred], is_scalar_condition=True).block():
            origin_true_output = true_fn()
            if origin_true_output is not None:
                true_output = map_structure(copy_to_parent, origin_true_output)
    if false_fn is not None:
        if not callable(false_fn):
            raise TypeError("The false_fn in cond must be callable, but received {}".format(type(false_fn).__name__))
        with ConditionalBlock([nn.logical_not(pred)], is_scalar_condition=True).block():
            origin_false_output = false_fn()
            if origin_false_output is not None:
                false_output = map_structure(copy_to_parent, origin_false_output)

    if true_output is None and false_output is None:
        return None
    if true_output is None:
        raise ValueError("Incompatible return values of true_fn and false_fn in cond: "
                         "true_fn returns None while false_fn returns non-None")
    if false_output is None:
        raise ValueError("Incompatible return values of true_fn and false_fn in cond: "
                         "true_fn returns non-None while false_fn returns None")
    try:
        assert_same_structure(true_output, false_output, check_types=False)
    except ValueError as e:
        raise ValueError("Incompatible return values of true_fn and false_fn in cond: {}".format(e)) from None

    mask = tensor.cast(pred, dtype="int32")

    def merge(false_var, true_var):
        if false_var is None and true_var is None:
            return None
        if false_var is None or true_var is None:
            raise ValueError("Incompatible return values of true_fn and false_fn in cond: at one position %s returns "
                             "None and %s a Variable" % (("false_fn", "true_fn") if false_var is None
                                                         else ("true_fn", "false_fn")))
        return select_input([false_var, true_var], mask)

    return map_structure(merge, false_output, true_output, check_types=False)


def case(pred_fn_pairs, default=None, name=None):
    """The fn of the first (pred, fn) pair whose pred is true, else default() (default None: the last pair's fn,
    whose pred is then not used). Nested conds in list order; every fn returns the same structure."""
    _check_type(pred_fn_pairs, "pred_fn_pairs", (list, tuple), "case")
    for pred_fn in pred_fn_pairs:
        if not isinstance(pred_fn, tuple):
            raise TypeError(_error_message("The elements' type", "pred_fn_pairs", "case", tuple, type(pred_fn)))
        if len(pred_fn) != 2:
            raise TypeError(_error_message("The tuple's size", "pred_fn_pairs", "case", "2",
                                           str(len(pred_fn)) + "-tuple"))
        pred, fn = pred_fn
        if not isinstance(pred, Variable):
            raise TypeError(_error_message("The pred's type", "pred_fn_pairs", "case", "boolean Variable",
                                           type(pred)))
        if not callable(fn):
            raise TypeError("The fn for {} of pred_fn_pairs in Op(case) must be callable.".format(pred.name))
    if not pred_fn_pairs:
        raise ValueError("case: pred_fn_pairs must hold at least one (pred, fn) pair")
    if default is None:
        default_index = len(pred_fn_pairs) - 1  # the last pair's fn
        default = pred_fn_pairs[default_index][1]
        pred_fn_pairs = pred_fn_pairs[:default_index]
    elif not callable(default):
        raise TypeError("The default in Op(case) must be callable.")

    false_fn = default
    for pred, true_fn in reversed(pred_fn_pairs):
        false_fn = partial(cond, pred=pred, true_fn=true_fn, false_fn=false_fn)
    return false_fn()


def switch_case(branch_index, branch_fns, default=None, name=None):
    """branch_fns[branch_index]() (a C switch), else default() (default None: the fn of the largest key).

    branch_index: an int32, int64 or uint8 Variable of one element. branch_fns: a dict {int: fn}, a list of
    (int, fn) pairs, or a list of fns (keys 0, 1, ...)."""
    check_dtype("switch_case", "branch_index", branch_index, ["uint8", "int32", "int64"])
    if dtype_to_str(branch_index.dtype) != "int64":
        branch_index = tensor.cast(branch_index, "int64")
    _check_type(branch_fns, "branch_fns", (list, tuple, dict), "switch_case")
    branch_fns = list(branch_fns.items()) if isinstance(branch_fns, dict) else list(branch_fns)
    if branch_fns and all(callable(fn) for fn in branch_fns):
        branch_fns = list(enumerate(branch_fns))
    keys_of_fns = []
    for index_fn_pair in branch_fns:
        if not isinstance(index_fn_pair, tuple):
            raise TypeError(_error_message("The elements' type", "branch_fns", "switch_case", tuple,
                                           type(index_fn_pair)))
        if len(index_fn_pair) != 2:
            raise TypeError(_error_message("The tuple's size", "branch_fns", "switch_case", "2",
                                           str(len(index_fn_pair)) + "-tuple"))
        key, fn = index_fn_pair
        if not isinstance(key, int):
            raise TypeError(_error_message("The key's type", "branch_fns", "switch_case", int, type(key)))
        if key in keys_of_fns:
            raise ValueError("The key in 'branch_fns' must be unique, but '{}' appears more than once.".format(key))
        keys_of_fns.append(key)
        if not callable(fn):
            raise TypeError(_error_message("The type of function for key {}".format(key), "branch_fns",
                                           "switch_case", "callable", type(fn)))
    if not branch_fns:
        raise ValueError("switch_case: branch_fns must hold at least one branch")
    if default is None:
        ordered = sorted(branch_fns, key=lambda kv: kv[0])
        default = ordered[-1][1]
        branch_fns = ordered[:-1]
    elif not callable(default):
        raise TypeError("The default in Op(case) must be callable.")

    pred_fn_pairs = []
    for index, fn in branch_fns:
        new_index = tensor.fill_constant(shape=[1], dtype="int64", value=index)
        pred_fn_pairs.append((nn.equal(branch_index, new_index), fn))
    false_fn = default
    for pred, true_fn in pred_fn_pairs:
        false_fn = partial(cond, pred=pred, true_fn=true_fn, false_fn=false_fn)
    return false_fn()


# ------------------------------------------------------------------ Switch

class Switch:
    """Runs the block of the first case whose condition is true, or the default block when none is.

        with fluid.layers.Switch() as switch:
            with switch.case(cond_a):
                ...
            with switch.case(cond_b):
                ...
            with switch.default():
                ...

    Each condition is a bool Variable of one element; the blocks write Variables of the enclosing block."""

    def __init__(self, name=None):
        self.helper = LayerHelper("switch", name=name)
        self.inside_scope = False
        self.pre_not_conditions = []

    def case(self, condition):
        if not self.inside_scope:
            raise ValueError("case should be called inside with")
        check_dtype("the member function case of fluid.layers.Switch", "condition", condition, ["bool"])
        _check_scalar_pred("Switch.case", "condition", condition)
        if not self.pre_not_conditions:
            cond_block = ConditionalBlock([condition], is_scalar_condition=True)
            self.pre_not_conditions.append(nn.logical_not(x=condition))
        else:
            pre_not_cond = self.pre_not_conditions[-1]
            self.pre_not_conditions.append(nn.logical_and(x=pre_not_cond, y=nn.logical_not(x=condition)))
            cond_block = ConditionalBlock([nn.logical_and(x=pre_not_cond, y=condition)], is_scalar_condition=True)
        return ConditionalBlockGuard(cond_block)

    def default(self):
        if not self.pre_not_conditions:
            raise ValueError("there should be at least one condition")
        return ConditionalBlockGuard(ConditionalBlock([self.pre_not_conditions[-1]], is_scalar_condition=True))

    def __enter__(self):
        self.inside_scope = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.inside_scope = False
        return False


# ------------------------------------------------------------------ IfElse

def split_lod_tensor(input, mask, level=0):
    """(rows or level-`level` sequences of input where mask is true, the others): op split_lod_tensor."""
    helper = LayerHelper("split_lod_tensor")
    out_true = helper.create_variable_for_type_inference(dtype=input.dtype)
    out_false = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="split_lod_tensor", inputs={"X": [input], "Mask": [mask]},
                     outputs={"OutTrue": [out_true], "OutFalse": [out_false]}, attrs={"level": level})
    return out_true, out_false


def merge_lod_tensor(in_true, in_false, x, mask, level=0):
    """in_true's and in_false's items back in mask's order (op merge_lod_tensor); x gives the LoD levels above
    `level`."""
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(dtype=in_true.dtype)
    helper.append_op(type="merge_lod_tensor",
                     inputs={"X": [x], "Mask": [mask], "InTrue": [in_true], "InFalse": [in_false]},
                     outputs={"Out": [out]}, attrs={"level": level})
    return out


class IfElseBlockGuard:
    def __init__(self, is_true, ifelse):
        if not isinstance(is_true, bool):
            raise TypeError("is_true must be true or false")
        if not isinstance(ifelse, IfElse):
            raise TypeError("ifelse must be an instance of IfElse class")
        if ifelse.status != IfElse.OUT_IF_ELSE_BLOCKS:
            raise ValueError("You cannot invoke IfElse.block() inside a block")
        self.is_true = is_true
        self.ie = ifelse
        cb = ifelse.conditional_true_block if is_true else ifelse.conditional_false_block
        self.cond_block = cb.block()

    def __enter__(self):
        self.ie.status = IfElse.IN_IF_ELSE_TRUE_BLOCKS if self.is_true else IfElse.IN_IF_ELSE_FALSE_BLOCKS
        self.cond_block.__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.ie.status = IfElse.OUT_IF_ELSE_BLOCKS
        missing = exc_type is None and not self.ie.output_table[1 if self.is_true else 0]
        self.cond_block.__exit__(ValueError if missing else exc_type, exc_val, exc_tb)  # no op for a failed block
        if missing:
            raise ValueError("Must set output inside block")
        return False


class IfElse:
    """Row-wise branches: ``cond`` is a bool [N, 1] Variable, one entry per row (or per level-0 sequence) of the
    inputs. In ``true_block()``, ``input(x)`` is x's rows where cond is true; in ``false_block()``, the others.
    ``output(*outs)`` in each block names the branch's results; ``ie()`` merges them back in the rows' order (a list,
    one Variable per output). A block that no row goes to does not run."""
    OUT_IF_ELSE_BLOCKS = 0
    IN_IF_ELSE_TRUE_BLOCKS = 1
    IN_IF_ELSE_FALSE_BLOCKS = 2

    def __init__(self, cond, name=None):
        check_variable("fluid.layers.IfElse", "cond", cond)
        _check_type(name, "name", (str, type(None)), "fluid.layers.IfElse")
        self.helper = LayerHelper("ifelse", name=name)
        self.cond = cond
        self.input_table = {}
        self.status = IfElse.OUT_IF_ELSE_BLOCKS
        self.conditional_true_block = ConditionalBlock(inputs=[self.cond])
        self.conditional_false_block = ConditionalBlock(inputs=[self.cond])
        self.output_table = ([], [])  # (false outputs, true outputs)

    def input(self, x):
        if self.status == IfElse.OUT_IF_ELSE_BLOCKS:
            raise ValueError("input must in true/false blocks")
        check_variable("fluid.layers.IfElse.input", "x", x)
        if id(x) not in self.input_table:
            parent_block = self._parent_block()
            out_true = parent_block.create_var(name=self._input_name(), dtype=x.dtype)
            out_false = parent_block.create_var(name=self._input_name(), dtype=x.dtype)
            parent_block.append_op(type="split_lod_tensor", inputs={"X": [x], "Mask": [self.cond]},
                                   outputs={"OutTrue": [out_true], "OutFalse": [out_false]}, attrs={"level": 0})
            self.input_table[id(x)] = (out_true, out_false)
        else:
            out_true, out_false = self.input_table[id(x)]
        return out_true if self.status == IfElse.IN_IF_ELSE_TRUE_BLOCKS else out_false

    def _input_name(self):
        return unique_name.generate_with_ignorable_key("ifelse_input" + self.helper.name)

    def _parent_block(self):
        program = self.helper.main_program
        return program.block(program.current_block().parent_idx)

    def true_block(self):
        return IfElseBlockGuard(True, self)

    def false_block(self):
        return IfElseBlockGuard(False, self)

    def output(self, *outs):
        if self.status == self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("output can only be invoked in the sub-block")
        out_table = self.output_table[1 if self.status == self.IN_IF_ELSE_TRUE_BLOCKS else 0]
        parent_block = self._parent_block()
        for each_out in outs:
            check_variable("fluid.layers.IfElse.output", "each output", each_out)
            outside_out = parent_block.create_var(
                name=unique_name.generate_with_ignorable_key("_".join([self.helper.name, "output"])),
                dtype=each_out.dtype)
            out_table.append(outside_out)
            tensor.assign(input=each_out, output=outside_out)

    def __call__(self):
        if self.status != self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse::__call__ must be out of sub-block")
        false_len, true_len = list(map(len, self.output_table))
        if false_len == 0 and true_len == 0:
            raise ValueError("Must invoke true_block/false_block before __call__")
        elif false_len != true_len and false_len != 0 and true_len != 0:
            raise ValueError("The output side must be same")
        elif false_len == 0 or true_len == 0:
            return self.output_table[0 if false_len != 0 else 1]
        return [merge_lod_tensor(in_true=true_var, in_false=false_var, mask=self.cond, x=self.cond, level=0)
                for false_var, true_var in zip(*self.output_table)]
