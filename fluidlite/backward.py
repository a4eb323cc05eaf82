"""Automatic differentiation of programs: ``append_backward`` and ``gradients`` (Fluid 1.x semantics).

The walk follows Fluid's ``backward.py``:
1. find the ops on a path from the inputs to the targets (skipping no-grad vars),
2. ask each op's C++ grad maker for its grad op descs (in reverse order),
3. ``_addup_repetitive_outputs_``: a gradient written by several grad ops gets its writes renamed
   ``x@GRAD@RENAME@k`` and ONE n-ary ``sum`` op adds them into ``x@GRAD`` (before its first reader),
4. ``_remove_no_grad_branch_``: drop grad ops whose outputs nobody needs; where a pruned gradient is
   still read, ``fill_zeros_like`` supplies zeros,
5. append the ops, declare the grad vars (dtype from the forward var) and run shape inference.
Ops with a ``sub_block`` get a grad block whose ``forward_block_idx`` points at the forward block.
"""
import collections

from . import core, unique_name
from .framework import OpRole, Parameter, Program, Variable

__all__ = ["append_backward", "gradients", "calc_gradient"]

_NAMES = core.names()
GRAD_SUFFIX = _NAMES["grad_suffix"]
EMPTY = _NAMES["empty"]
RENAME = _NAMES["rename"]


def _grad_name(name):
    return name + GRAD_SUFFIX


def _strip_grad_suffix(name):
    pos = name.find(GRAD_SUFFIX)
    return name[:pos] if pos != -1 else name


def _names(items):
    out = set()
    for v in items or ():
        out.add(v.name if isinstance(v, Variable) else v)
    return out


class _OpDesc:
    """A pending grad op: a plain Python record so renames are cheap; materialised into the block later."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "src", "kills")

    def __init__(self, type, inputs, outputs, attrs=None, src=None):
        self.type = type
        self.inputs = collections.OrderedDict((k, list(v)) for k, v in inputs.items())
        self.outputs = collections.OrderedDict((k, list(v)) for k, v in outputs.items())
        self.attrs = dict(attrs or {})
        self.src = src  # the core.OpDesc the grad maker produced (keeps attr types exact)
        # Gradients this desc consumes for good: its forward op overwrote those variables, so the gradients of the
        # values they held before it start anew (_addup_repetitive_outputs).
        self.kills = ()

    @classmethod
    def from_core(cls, desc):
        return cls(desc.type(), desc.inputs(), desc.outputs(), src=desc)

    def input_arg_names(self):
        return [a for args in self.inputs.values() for a in args]

    def output_arg_names(self):
        return [a for args in self.outputs.values() for a in args]

    def rename_input(self, old, new):
        for args in self.inputs.values():
            args[:] = [new if a == old else a for a in args]

    def rename_output(self, old, new):
        for args in self.outputs.values():
            args[:] = [new if a == old else a for a in args]


def _find_op_path(block, targets, inputs, no_grad_set):
    """Ops that lie on a path from `inputs` (all sources if empty) to `targets`, in program order."""
    ops = list(block.ops)
    relevant = set(targets)
    mask = [False] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if any(o in relevant for o in op.output_arg_names):
            mask[i] = True
            relevant.update(n for n in op.input_arg_names if n not in no_grad_set)
    if inputs:
        reachable = set(inputs)
        for i, op in enumerate(ops):
            if mask[i]:
                if any(n in reachable for n in op.input_arg_names):
                    reachable.update(op.output_arg_names)
                else:
                    mask[i] = False
    return [op for i, op in enumerate(ops) if mask[i]]


_VT = core.VarDesc.VarType
_FLOAT_DTYPES = {int(_VT.FP16), int(_VT.FP32), int(_VT.FP64)}
_LOD_TENSOR = int(_VT.LOD_TENSOR)
_LOD_TENSOR_ARRAY = int(_VT.LOD_TENSOR_ARRAY)


def _stop_gradient_set(program):
    """{block idx: {v@GRAD for every var with stop_gradient, and every integer or bool tensor or array}}: as in
    Fluid, integers (labels, indices, the casts feeding gather's Index) carry no gradient."""
    result = collections.defaultdict(set)
    for block in program.blocks:
        has_var = block.desc.has_var
        for name, facts in block._facts.items():  # the rows of the side table: only non-default facts
            if facts.stop_gradient and has_var(name):
                result[block.idx].add(_grad_name(name))
        for v in block.desc.all_vars():
            if int(v.type()) in (_LOD_TENSOR, _LOD_TENSOR_ARRAY) and int(v.dtype()) not in _FLOAT_DTYPES:
                result[block.idx].add(_grad_name(v.name()))
    return result


OUTER_GRAD = "@OG"  # suffix of a While body's gradient supplied from outside (the iteration after, or the loop's end)


def _addup_repetitive_outputs(op_descs, outer_grads=()):
    """Fluid's _addup_repetitive_outputs_: one n-ary sum per gradient written more than once.

    Two refinements over Fluid. A gradient whose forward variable an op overwrote (desc.kills) starts anew below
    that op's grad: the values before and after the write have separate gradients. And in a While body's grad
    block, each of `outer_grads` (the gradients of outer variables the body writes) first holds what while_grad
    supplies, under its own name g@OG: reads before any write read it, and writes are added to it."""
    pending_sums = []  # (sum desc, insert position)
    rename_count = collections.defaultdict(int)
    versions = collections.defaultdict(list)
    supplied = {}  # g -> g@OG
    for g in outer_grads:
        supplied[g] = g + OUTER_GRAD
        versions[g] = [supplied[g]]

    def rename_in(descs, old, new):
        for d in descs:
            d.rename_input(old, new)
            d.rename_output(old, new)

    for idx, desc in enumerate(op_descs):
        in_names = set(desc.input_arg_names())
        for name in desc.input_arg_names():
            if len(versions[name]) > 1:
                pending_sums.append((_OpDesc("sum", {"X": versions[name]}, {"Out": [name]}), idx))
                versions[name] = [name]
            elif name in supplied and versions[name] == [supplied[name]]:
                desc.rename_input(name, supplied[name])  # nothing in the block wrote it yet: the supplied value
        done = []  # (args list, index) of this op's outputs already visited
        for _slot, args in desc.outputs.items():
            for arg_idx, name in enumerate(args):
                if name == EMPTY or name in in_names:
                    if name in supplied and versions[name] == [supplied[name]]:
                        versions[name] = [name]  # in place over the supplied value (a nested while_grad)
                    continue  # empty, or an in-place op
                if not versions[name]:
                    versions[name] = [name]
                    done.append((args, arg_idx))
                    continue
                if len(versions[name]) == 1 and versions[name][0] == supplied.get(name):
                    pass  # the supplied value keeps its name; this write is added to it
                elif len(versions[name]) == 1:
                    first = "%s%s%d" % (name, RENAME, rename_count[name])
                    rename_count[name] += 1
                    versions[name][0] = first
                    rename_in(op_descs[:idx], name, first)
                    rename_in([p[0] for p in pending_sums], name, first)
                    for prev_args, prev_idx in done:  # the first write may be this op's (mul(x, x))
                        if prev_args[prev_idx] == name:
                            prev_args[prev_idx] = first
                done.append((args, arg_idx))
                new = "%s%s%d" % (name, RENAME, rename_count[name])
                rename_count[name] += 1
                args[arg_idx] = new
                versions[name].append(new)
        for name in desc.kills:
            versions[name] = []
    for name, vs in versions.items():
        if len(vs) > 1:
            pending_sums.append((_OpDesc("sum", {"X": vs}, {"Out": [name]}), len(op_descs)))
    for desc, pos in reversed(pending_sums):
        op_descs.insert(pos, desc)
    return op_descs


def _remove_no_grad_branch(op_descs, no_grad_set):
    def all_in(names):
        return bool(names) and all(n in no_grad_set for n in names)

    def removable(desc):
        outs = desc.output_arg_names()
        if not outs or all_in(outs):
            return True
        grad_ins = [n for n in desc.input_arg_names() if GRAD_SUFFIX in n]
        if all_in(grad_ins):
            no_grad_set.update(outs)
            return True
        return False

    op_descs = [d for d in op_descs if not removable(d)]
    to_insert = []
    for idx, desc in enumerate(op_descs):
        for arg in desc.input_arg_names():
            if GRAD_SUFFIX in arg and arg in no_grad_set:
                to_insert.append((_OpDesc("fill_zeros_like", {"X": [_strip_grad_suffix(arg)]}, {"Out": [arg]}), idx))
    for desc, pos in reversed(to_insert):
        op_descs.insert(pos, desc)
    return op_descs


def _make_grad_descs(op, no_grad_set, grad_blocks, renames):
    """The grad op descs of one forward op, with single @EMPTY@ outputs dropped (Fluid's rule)."""
    descs = []
    temp_prefix = unique_name.generate(op.type + "_grad")
    for core_desc in core.make_grad_ops(op.desc, set(no_grad_set), list(grad_blocks), renames, temp_prefix):
        d = _OpDesc.from_core(core_desc)
        for slot in list(d.outputs):
            args = d.outputs[slot]
            if len(args) == 1 and args[0] == EMPTY:
                del d.outputs[slot]
        descs.append(d)
    return descs


_dispensable_inputs_cache = {}


def _dispensable_inputs(op_type):
    slots = _dispensable_inputs_cache.get(op_type)
    if slots is None:
        slots = {s["name"] for s in core.op_proto(op_type)["inputs"] if s["dispensable"]}
        _dispensable_inputs_cache[op_type] = slots
    return slots


def _fill_unwritten_gradients(op_descs, block, external):
    """A gradient that no op writes is zero. A required input slot that reads one gets fill_zeros_like(var)
    first (e.g. concat, the gradient of split, when a part is unused); a dispensable slot reads it as absent.
    Gradients that exist already (seeds, an earlier pass) and `external` ones (set from outside the block,
    as recurrent_grad sets its step block's output gradients) are written."""
    written = set(external)
    out = []
    for d in op_descs:
        optional = _dispensable_inputs(d.type)
        for slot, args in d.inputs.items():
            if slot in optional:
                continue
            for a in args:
                if GRAD_SUFFIX not in a or a in written or a == EMPTY or block.desc.find_var_recursive(a) is not None:
                    continue
                out.append(_OpDesc("fill_zeros_like", {"X": [_strip_grad_suffix(a)]}, {"Out": [a]}))
                written.add(a)
        out.append(d)
        written.update(d.output_arg_names())
    return out


def _leaf_outputs(block):
    """Variables some op of the block writes and none reads."""
    written, read = set(), set()
    for op in block.ops:
        written.update(op.output_arg_names)
        read.update(op.input_arg_names)
    return written - read


def _outer_writes(block):
    """Variables of enclosing blocks that ops of the sub-block `block` write."""
    return {n for op in block.ops for n in op.output_arg_names
            if block.desc.find_var(n) is None and block.desc.find_var_recursive(n) is not None}


def _append_backward_ops(block, ops, target_block, no_grad_dict, renames, callbacks=None, produced=None, loop=False):
    """`produced`: the gradients that exist so far (the seeds), as Fluid's input_grad_names_set: a grad op
    none of whose gradient inputs is produced is skipped, and adds its outputs otherwise. So no gradient
    flows into a path the loss does not differentiate through (gather's Index, an op without gradient).
    None (a sub-block, whose output gradients come from the enclosing grad op): keep every grad op."""
    no_grad = no_grad_dict[block.idx]
    if block.idx != target_block.idx:  # a sub-block: the enclosing blocks' no-grad variables hold here too
        parent = block
        while parent.parent_idx >= 0:
            parent = block.program.block(parent.parent_idx)
            no_grad |= no_grad_dict[parent.idx]
    no_grad.add(EMPTY)
    grad_descs = []
    program = block.program
    for op in reversed(ops):
        if produced is not None and not any(renames.get(g, g) in produced
                                            for g in map(_grad_name, op.output_arg_names)):
            continue  # no gradient reaches this op's outputs
        grad_blocks = []
        if op.has_attr("sub_block"):
            # The sub-block's backward goes into a new grad block whose forward_block_idx points back at it;
            # every op of the sub-block is differentiated (its outputs are read by the op's grad).
            sub_block = program.block(op.attr("sub_block"))
            grad_block = program._create_block()
            grad_block._set_forward_block_idx(sub_block.idx)
            try:
                _append_backward_ops(sub_block, sub_block.ops, grad_block, no_grad_dict, renames, callbacks,
                                     loop=op.type == "while")
            finally:
                program._rollback()
            grad_blocks.append(grad_block.idx)
        if not core.op_proto(op.type)["has_grad"]:
            if produced is None:
                continue  # a sub-block's ops are all visited: one without gradient (less_than) passes none
            if all(_grad_name(n) in no_grad for n in op.input_arg_names):
                continue  # nothing upstream needs a gradient through this op
            raise core.EnforceNotMet("op %s has no gradient, but the loss depends on it (created at %s); mark its "
                                     "inputs stop_gradient=True or put them in no_grad_set"
                                     % (op.type, op.desc.creation_site() or "?"))
        descs = _make_grad_descs(op, no_grad, grad_blocks, renames)
        if descs:
            ins = set(op.input_arg_names)
            descs[-1].kills = tuple(renames.get(g, g) for g in (_grad_name(n) for n in op.output_arg_names
                                                                if n not in ins))
        if produced is not None:
            # A grad op writing no gradient (increment's inverse, which steps a While's counter back) only means
            # something inside a loop's grad block.
            descs = [d for d in descs if any(GRAD_SUFFIX in n for n in d.output_arg_names())]
            for d in descs:
                produced.update(d.output_arg_names())
        grad_descs.extend(descs)
    # In a grad block, the gradients of the step block's leaf outputs and of the outer variables it writes (a
    # While body's loop-carried values and tensor arrays) come from the enclosing grad op.
    external = set()
    outer_grads = set()
    if target_block.idx != block.idx:
        # (under this pass's names: a second gradients() pass renames them)
        outer_write_grads = {renames.get(g, g) for g in map(_grad_name, _outer_writes(block))}
        external = {renames.get(g, g) for g in map(_grad_name, _leaf_outputs(block))} | outer_write_grads
        if loop:
            outer_grads = outer_write_grads
            external |= {g + OUTER_GRAD for g in outer_grads}
    grad_descs = _addup_repetitive_outputs(grad_descs, outer_grads)
    grad_descs = _remove_no_grad_branch(grad_descs, no_grad)
    grad_descs = _fill_unwritten_gradients(grad_descs, target_block, external)
    program = target_block.program
    with program._backward_role_guard():
        for d in grad_descs:
            _materialise(target_block, d)
            if callbacks:
                for cb in callbacks:
                    cb(block=target_block, context={})


def _materialise(block, d):
    """Append a pending desc to `block`: declare its grad outputs, then run shape inference.

    A gradient input that no op writes (e.g. the grad of a split output the loss never reads) is
    declared too, and stays uninitialized: grad kernels that allow it (split_grad) read it as zeros.
    """
    unwritten = [n for n in d.input_arg_names() if GRAD_SUFFIX in n]
    for name in d.output_arg_names() + unwritten:
        # Declared locally: in a grad block each step scope must get its own gradient variables, even
        # when an enclosing block has one of the same name (a parameter's summed gradient).
        if name == EMPTY or block.desc.find_var(name) is not None:
            continue
        if GRAD_SUFFIX not in name and block.desc.find_var_recursive(name) is not None:
            continue  # a forward variable a grad op updates (increment's inverse steps the loop counter back)
        if block.idx == 0 and block.desc.find_var_recursive(name) is not None:
            continue
        fwd = block.desc.find_var_recursive(_strip_grad_suffix(name))  # also searches the forward block
        # The gradient of a LoDTensorArray is an array (Fluid's write_to_array InferVarType).
        array = fwd is not None and fwd.type() == _LOD_TENSOR_ARRAY
        var = block.create_var(name=name, type=_LOD_TENSOR_ARRAY if array else _LOD_TENSOR)
        var.desc.set_dtype(fwd.dtype() if fwd is not None else int(core.VarDesc.VarType.FP32))
        if fwd is not None:
            var.desc.set_shape(list(fwd.shape()))
    if d.src is not None:
        desc = d.src
        for slot, args in d.inputs.items():
            desc.set_input(slot, args)
        for slot in desc.output_names():
            desc.set_output(slot, d.outputs.get(slot, []))
    else:
        desc = core.OpDesc(d.type)
        for slot, args in d.inputs.items():
            desc.set_input(slot, args)
        for slot, args in d.outputs.items():
            desc.set_output(slot, args)
        for k, v in d.attrs.items():
            desc.set_attr(k, v)
    desc.set_attr("op_role", int(block.program._op_role))
    _mark_sparse_gradients(block, desc)
    new = block.desc.insert_desc(block.desc.op_size(), desc)
    block.desc.infer_shape(new)
    _grads_take_forward_lod_level(block, new)
    block._wrap_op(new)  # not needed for correctness (Block.ops is a view); saves wrapping it later


def _grads_take_forward_lod_level(block, desc):
    """x@GRAD (and x@GRAD@RENAME@k) that the grad op's shape inference left at lod_level 0 takes x's: the
    build-time side of the executor's rule (PreparedOp::ShareForwardLoDWithGrads) that a gradient has its
    variable's LoD."""
    for name in desc.output_arg_names():
        if GRAD_SUFFIX not in name:
            continue
        grad = block.desc.find_var_recursive(name)
        fwd = block.desc.find_var_recursive(_strip_grad_suffix(name))
        if grad is not None and fwd is not None and grad.lod_level() == 0 and fwd.lod_level() > 0:
            grad.set_lod_level(fwd.lod_level())


_SPARSE_GRAD_OPS = ("lookup_table_grad", "lookup_table_v2_grad")


def _mark_sparse_gradients(block, desc):
    """Declare SelectedRows gradients as Fluid does: W@GRAD of a sparse lookup (is_sparse=True), and the
    ``sum`` aggregating several of them (the sum of SelectedRows and a dense gradient is dense)."""
    t = desc.type()
    if t in _SPARSE_GRAD_OPS and desc.has_attr("is_sparse") and desc.attr("is_sparse"):
        outs = [n for n in desc.output("W@GRAD") if n != EMPTY] if "W@GRAD" in desc.output_names() else []
    elif t == "sum":
        ins = [block.desc.find_var_recursive(n) for n in desc.input("X")]
        sparse = int(core.VarDesc.VarType.SELECTED_ROWS)
        if not ins or not all(v is not None and v.type() == sparse for v in ins):
            return
        outs = desc.output("Out")
    else:
        return
    for n in outs:
        v = block.desc.find_var_recursive(n)
        if v is not None:
            v.set_type(int(core.VarDesc.VarType.SELECTED_ROWS))


def _seed_gradient(block, target, target_gradient=None, renames=None):
    """target@GRAD = 1 (or the given gradient), Fluid's fill_constant seed."""
    grad = _grad_name(target.name)
    grad = (renames or {}).get(grad, grad)
    if target_gradient is not None:
        block.append_op(type="assign", inputs={"X": [target_gradient]}, outputs={"Out": [block.create_var(
            name=grad, dtype=target.dtype, shape=target.shape)]}, attrs={"op_role": OpRole.Backward})
        return grad
    shape = list(target.shape)
    var = block.create_var(name=grad, dtype=target.dtype, shape=shape if all(s >= 0 for s in shape) else [1])
    if all(s >= 0 for s in shape):
        block.append_op(type="fill_constant", outputs={"Out": [var]},
                        attrs={"shape": shape, "value": 1.0, "dtype": int(target.dtype),
                               "op_role": OpRole.Backward | OpRole.Loss})
    else:
        block.append_op(type="fill_any_like", inputs={"X": [target]}, outputs={"Out": [var]},
                        attrs={"value": 1.0, "op_role": OpRole.Backward | OpRole.Loss})
    return grad


def append_backward(loss, parameter_list=None, no_grad_set=None, callbacks=None):
    """Append the backward pass of `loss` to its program. Returns [(parameter, gradient)] for every
    trainable parameter (or those in `parameter_list`) that the loss depends on."""
    if not isinstance(loss, Variable):
        raise TypeError("append_backward: loss must be a Variable, got %s" % type(loss).__name__)
    program = loss.block.program
    block = program.global_block()
    if loss.block.idx != 0:
        raise ValueError("append_backward: the loss must be in the global block")
    if loss.op is not None:
        loss.op._set_attr("op_role", OpRole.Forward | OpRole.Loss)
    no_grad_dict = _stop_gradient_set(program)
    no_grad_dict[0].update(_grad_name(n) for n in _names(no_grad_set))
    no_grad_vars = {_strip_grad_suffix(n) for n in no_grad_dict[0]}
    op_path = _find_op_path(block, [loss.name], [], no_grad_vars)
    seed = _seed_gradient(block, loss)
    _append_backward_ops(block, op_path, block, no_grad_dict, {}, callbacks, produced={seed})

    if parameter_list is not None:
        params = [p.name if isinstance(p, Variable) else p for p in parameter_list]
    else:
        params = [p.name for p in program.global_block().all_parameters() if p.trainable]
    result = []
    for name in params:
        gname = _grad_name(name)
        if block.desc.find_var(gname) is None or gname in no_grad_dict[0]:
            continue
        result.append((block.var(name), block.var(gname)))
    # Fluid marks the last op writing each grad with op_role_var = [param, grad] (optimizers read it).
    # One reverse pass (setting attrs does not change the op list); where one op is the last writer of
    # several grads, the one listed last in `result` is recorded.
    order = {grad.name: i for i, (param, grad) in enumerate(result)}
    for op in reversed(list(block.ops)):
        if not order:
            break
        found = [(order.pop(n), n) for n in set(op.output_arg_names) if n in order]
        if found:
            i, name = max(found)
            op._set_attr("op_role_var", [result[i][0].name, name])
    return result


def gradients(targets, inputs, target_gradients=None, no_grad_set=None):
    """d(sum of targets)/d(inputs): appends backward ops and returns one grad Variable (or None) per input."""
    targets = [targets] if isinstance(targets, Variable) else list(targets)
    inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    if target_gradients is not None and not isinstance(target_gradients, (list, tuple)):
        target_gradients = [target_gradients]
    if target_gradients is not None and len(target_gradients) != len(targets):
        raise ValueError("gradients: %d targets but %d target_gradients" % (len(targets), len(target_gradients)))
    program = targets[0].block.program
    block = program.global_block()
    no_grad_dict = _stop_gradient_set(program)
    for v in inputs:  # the inputs themselves always get gradients
        no_grad_dict[0].discard(_grad_name(v.name))
    no_grad_dict[0].update(_grad_name(n) for n in _names(no_grad_set))
    no_grad_vars = {_strip_grad_suffix(n) for n in no_grad_dict[0]}
    op_path = _find_op_path(block, [t.name for t in targets], [v.name for v in inputs], no_grad_vars)
    renames = _fresh_gradient_names(block, op_path, targets)
    for idx, names in no_grad_dict.items():
        no_grad_dict[idx] = {renames.get(n, n) for n in names}
    with program._backward_role_guard():
        seeds = {_seed_gradient(block, t, target_gradients[i] if target_gradients else None, renames)
                 for i, t in enumerate(targets)}
    _append_backward_ops(block, op_path, block, no_grad_dict, renames, produced=seeds)
    out = []
    for v in inputs:
        gname = _grad_name(v.name)
        out.append(block.vars.get(renames.get(gname, gname)))
    return out


def _fresh_gradient_names(block, op_path, targets):
    """Gradient names this pass would write that the block already has (from an earlier pass, as in
    gradients(gradients(y, x), x)) -> fresh names, so the passes do not overwrite each other."""
    names = {t.name for t in targets}
    for op in op_path:
        names.update(op.input_arg_names)
        names.update(op.output_arg_names)
    renames = {}
    for n in sorted(names):
        g = _grad_name(n)
        if block.desc.find_var_recursive(g) is None:
            continue
        fresh = unique_name.generate(g)
        while block.desc.find_var_recursive(fresh) is not None:
            fresh = unique_name.generate(g)
        renames[g] = fresh
    return renames


def calc_gradient(targets, inputs, target_gradients=None, no_grad_set=None):
    """As `gradients`, but (Fluid 1.8's rule) a result of one gradient is that Variable (or None), not a list
    of one, whether `inputs` was one Variable or a list of one; `gradients` always returns a list."""
    out = gradients(targets, inputs, target_gradients, no_grad_set)
    return out[0] if len(out) == 1 else out

del Parameter, Program
