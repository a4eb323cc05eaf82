"""Program / Block / Variable / Operator: thin Python wrappers over the C++ descs (the single source of
truth for the IR). Names and semantics follow Fluid 1.x ``paddle.fluid.framework``.

Only two things live in Python alone, as in Fluid: ``Variable.stop_gradient`` and the Parameter
attributes (``trainable``, ``optimize_attr``, ``regularizer``).
"""
import contextlib
import os
import sys

import numpy as np

from . import core, unique_name

VarType = core.VarDesc.VarType

__all__ = [
    "Program", "Block", "Variable", "Parameter", "Operator", "program_guard", "name_scope",
    "default_main_program", "default_startup_program", "switch_main_program", "switch_startup_program",
    "convert_np_dtype_to_dtype_", "dtype_to_str", "in_dygraph_mode", "OpRole",
]


class OpRole:
    """Values of the op_role attribute (csrc/names.h): Forward, Backward, Optimize, RPC, Dist, LRSched, Loss."""


for _role, _value in core.op_roles().items():
    setattr(OpRole, _role, _value)
del _role, _value


_DTYPE_BY_NAME = {d["name"]: VarType(d["value"]) for d in core.dtypes()}  # numpy's names are Fluid's
_NAME_BY_DTYPE = {v: k for k, v in _DTYPE_BY_NAME.items()}


def convert_np_dtype_to_dtype_(dtype):
    """'float32', np.float32, np.dtype('float32') or a VarType -> VarType."""
    if isinstance(dtype, VarType):
        return dtype
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return VarType(int(dtype))
    if isinstance(dtype, str) and dtype.startswith("VarType."):
        return VarType[dtype[len("VarType."):]]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError("unsupported dtype %r" % (dtype,)) from None
    if name not in _DTYPE_BY_NAME:
        raise TypeError("dtype %s is not supported by fluidlite (supported: %s)" % (name, ", ".join(_DTYPE_BY_NAME)))
    return _DTYPE_BY_NAME[name]


def dtype_to_str(dtype):
    return _NAME_BY_DTYPE[convert_np_dtype_to_dtype_(dtype)]


def dtype_to_numpy(dtype):
    return np.dtype(dtype_to_str(dtype))


def in_dygraph_mode():
    return False


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_callstack(limit=4):
    """'path.py:LINE' for the innermost frames outside fluidlite (where the user created an op)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    stack = []
    while frame is not None and len(stack) < limit:
        stack.append("%s:%d" % (frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return stack


class Variable:
    """A variable in a block. Create through ``Block.create_var`` or the layers."""

    def __init__(self, block, type=VarType.LOD_TENSOR, name=None, shape=None, dtype=None, lod_level=None,
                 persistable=None, stop_gradient=False, is_data=False, **kwargs):
        self.block = block
        if name is None:
            name = unique_name.generate("_generated_var")
        desc = block.desc.find_var(name)
        is_new = desc is None
        if is_new:
            desc = block.desc.var(name)
            desc.set_type(int(type))
        elif desc.type() != int(type):
            raise ValueError("variable %s already exists with type %s, cannot redeclare it as %s"
                             % (name, VarType(desc.type()), VarType(int(type))))
        self.desc = desc
        if shape is not None:
            shape = [int(s) for s in shape]
            if is_new:
                desc.set_shape(shape)
            elif list(desc.shape()) != shape:
                raise ValueError("variable %s has been created before; the previous shape is %s, the new shape is %s; "
                                 "they are not matched" % (name, tuple(desc.shape()), tuple(shape)))
        if dtype is not None:
            dtype = convert_np_dtype_to_dtype_(dtype)
            if is_new:
                desc.set_dtype(int(dtype))
            elif desc.dtype() != int(dtype):
                raise ValueError("variable %s has been created before; the previous dtype is %s, the new dtype is %s"
                                 % (name, VarType(desc.dtype()), dtype))
        if lod_level is not None:
            if is_new:
                desc.set_lod_level(int(lod_level))
            elif desc.lod_level() != lod_level:
                raise ValueError("variable %s has been created before with lod_level %d, not %d"
                                 % (name, desc.lod_level(), lod_level))
        if persistable is not None:
            if is_new:
                desc.set_persistable(bool(persistable))
            elif desc.persistable() != persistable:
                raise ValueError("variable %s has been created before with persistable=%s"
                                 % (name, desc.persistable()))
        if is_data:
            desc.set_is_data(True)
        self.stop_gradient = stop_gradient
        self.error_clip = kwargs.get("error_clip")
        self.op = None  # the op that last wrote this variable (set by Block.append_op)
        block.vars[name] = self

    # --- desc-backed properties
    @property
    def name(self):
        return self.desc.name()

    @property
    def shape(self):
        return tuple(self.desc.shape())

    @property
    def dtype(self):
        return VarType(self.desc.dtype())

    @property
    def type(self):
        return VarType(self.desc.type())

    @property
    def lod_level(self):
        return self.desc.lod_level()

    @property
    def persistable(self):
        return self.desc.persistable()

    @persistable.setter
    def persistable(self, p):
        self.desc.set_persistable(bool(p))

    @property
    def is_data(self):
        return self.desc.is_data()

    def to_string(self, throw_on_error=False, with_details=False):
        s = "%svar %s : %s.shape%s.dtype(%s)" % ("persist " if self.persistable else "", self.name,
                                                 self.type.name, self.shape, dtype_to_str(self.dtype)
                                                 if self.type == VarType.LOD_TENSOR else "")
        if with_details:
            s += ".stop_gradient(%s)" % self.stop_gradient
        return s

    __str__ = to_string

    def __repr__(self):
        return "Variable(%s, shape=%s, dtype=%s)" % (self.name, self.shape, dtype_to_str(self.dtype))

    # Arithmetic operators build ops, as Fluid's monkey-patched Variable does.
    def _binary(self, other, op_type, reverse=False):
        from .layers import math_op_patch
        return math_op_patch.binary(self, other, op_type, reverse)

    def __add__(self, o): return self._binary(o, "elementwise_add")
    def __radd__(self, o): return self._binary(o, "elementwise_add", True)
    def __sub__(self, o): return self._binary(o, "elementwise_sub")
    def __rsub__(self, o): return self._binary(o, "elementwise_sub", True)
    def __mul__(self, o): return self._binary(o, "elementwise_mul")
    def __rmul__(self, o): return self._binary(o, "elementwise_mul", True)
    def __truediv__(self, o): return self._binary(o, "elementwise_div")
    def __rtruediv__(self, o): return self._binary(o, "elementwise_div", True)
    def __neg__(self):
        from .layers import scale
        return scale(self, scale=-1.0)

    __hash__ = object.__hash__


class Parameter(Variable):
    """A persistable, trainable variable with a fixed shape."""

    def __init__(self, block, shape, dtype, **kwargs):
        if shape is None or dtype is None:
            raise ValueError("a Parameter needs both shape and dtype")
        for s in shape:
            if s < 0:
                raise ValueError("a Parameter's shape must be known; got %s" % (list(shape),))
        kwargs.setdefault("persistable", True)
        super().__init__(block, shape=shape, dtype=dtype, **kwargs)
        self.trainable = kwargs.get("trainable", True)
        self.optimize_attr = kwargs.get("optimize_attr", {"learning_rate": 1.0})
        self.regularizer = kwargs.get("regularizer")
        self.gradient_clip_attr = kwargs.get("gradient_clip_attr")
        self.do_model_average = kwargs.get("do_model_average")

    def __repr__(self):
        return "Parameter(%s, shape=%s, dtype=%s)" % (self.name, self.shape, dtype_to_str(self.dtype))


class Operator:
    """An op in a block; wraps an OpDesc."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc

    @property
    def type(self):
        return self.desc.type()

    def input(self, name):
        return self.desc.input(name)

    def output(self, name):
        return self.desc.output(name)

    @property
    def input_names(self):
        return self.desc.input_names()

    @property
    def output_names(self):
        return self.desc.output_names()

    @property
    def input_arg_names(self):
        return self.desc.input_arg_names()

    @property
    def output_arg_names(self):
        return self.desc.output_arg_names()

    @property
    def attr_names(self):
        return self.desc.attr_names()

    def has_attr(self, name):
        return self.desc.has_attr(name)

    def attr(self, name):
        return self.desc.attr(name)

    def _set_attr(self, name, value):
        self.desc.set_attr(name, value)

    _update_desc_attr = _set_attr

    def all_attrs(self):
        return {n: self.desc.attr(n) for n in self.desc.attr_names()}

    def _rename_input(self, old, new):
        self.desc.rename_input(old, new)

    def _rename_output(self, old, new):
        self.desc.rename_output(old, new)

    def to_string(self, throw_on_error=False):
        ins = ", ".join("%s=%s" % (k, v) for k, v in self.desc.inputs().items())
        outs = ", ".join("%s=%s" % (k, v) for k, v in self.desc.outputs().items())
        attrs = ", ".join("%s = %r" % (n, self.desc.attr(n)) for n in sorted(self.desc.attr_names())
                          if not n.startswith("op_"))
        return "{%s} = %s(inputs={%s}%s)" % (outs, self.type, ins, (", " + attrs) if attrs else "")

    __str__ = to_string
    __repr__ = to_string


def _names(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v.name if isinstance(v, Variable) else str(v) for v in value]
    return [value.name if isinstance(value, Variable) else str(value)]


class Block:
    def __init__(self, program, idx):
        self.program = program
        self.desc = program.desc.block(idx)
        self.vars = {}
        self.ops = []

    @property
    def idx(self):
        return self.desc.id

    @property
    def parent_idx(self):
        return self.desc.parent

    @property
    def forward_block_idx(self):
        return self.desc.get_forward_block_idx()

    def _set_forward_block_idx(self, idx):
        self.desc.set_forward_block_idx(idx)

    def var(self, name):
        """The variable `name` of this block; raises ValueError if there is none."""
        v = self.vars.get(name)
        if v is None:
            raise ValueError("var %s not in this block" % name)
        return v

    def _find_var_recursive(self, name):
        block = self
        while True:
            if name in block.vars:
                return block.vars[name]
            if block.parent_idx < 0:
                return None
            block = self.program.block(block.parent_idx)

    def _var_recursive(self, name):
        v = self._find_var_recursive(name)
        if v is None:
            raise ValueError("var %s is not in block %d or its parents" % (name, self.idx))
        return v

    def has_var(self, name):
        return name in self.vars

    def create_var(self, *args, **kwargs):
        return Variable(self, *args, **kwargs)

    def create_parameter(self, *args, **kwargs):
        global_block = self.program.global_block()
        param = Parameter(global_block, *args, **kwargs)
        initializer = kwargs.get("initializer")
        if initializer is not None:
            initializer(param, self)
        return param

    def all_parameters(self):
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def iter_parameters(self):
        return iter(self.all_parameters())

    def _remove_var(self, name):
        self.desc.remove_var(name)
        self.vars.pop(name, None)

    def append_op(self, type, inputs=None, outputs=None, attrs=None, index=-1):
        """Appends a checked op: the C++ registry validates slots and attributes and runs shape
        inference now, so errors point at the line that built the op."""
        attrs = dict(attrs or {})
        attrs.setdefault("op_role", self.program._op_role)
        if self.program._op_role_var:
            attrs.setdefault("op_role_var", list(self.program._op_role_var))
        attrs.setdefault("op_namescope", _name_scope_path())
        attrs.setdefault("op_callstack", _user_callstack())
        ins = {k: _names(v) for k, v in (inputs or {}).items() if v is not None}
        outs = {k: _names(v) for k, v in (outputs or {}).items() if v is not None}
        desc = self.desc.append_op(type, ins, outs, attrs, index)
        op = Operator(self, desc)
        if index < 0:
            self.ops.append(op)
        else:
            self.ops.insert(index, op)
        for vs in (outputs or {}).values():
            for v in vs if isinstance(vs, (list, tuple)) else [vs]:
                if isinstance(v, Variable):
                    v.op = op
        return op

    def _prepend_op(self, *args, **kwargs):
        kwargs["index"] = 0
        return self.append_op(*args, **kwargs)

    def _insert_op(self, index, *args, **kwargs):
        kwargs["index"] = index
        return self.append_op(*args, **kwargs)

    def _remove_op(self, index):
        self.desc.remove_op(index, index + 1)
        del self.ops[index]

    def _sync_with_cpp(self):
        """Rebuild the Python lists from the descs (after backward edited descs directly)."""
        for vdesc in self.desc.all_vars():
            if vdesc.name() not in self.vars:
                Variable(self, name=vdesc.name(), type=VarType(vdesc.type()))
        by_desc = {id(op.desc): op for op in self.ops}
        self.ops = [Operator(self, self.desc.op(i)) for i in range(self.desc.op_size())]
        del by_desc

    def to_string(self, throw_on_error=False, with_details=False):
        lines = ["{ // block %d" % self.idx]
        for v in self.vars.values():
            lines.append("    " + v.to_string(with_details=with_details))
        for op in self.ops:
            lines.append("    " + op.to_string())
        lines.append("}")
        return "\n".join(lines)

    __str__ = to_string


_name_scope_stack = []


def _name_scope_path():
    return "/" + "/".join(_name_scope_stack) + ("/" if _name_scope_stack else "")


@contextlib.contextmanager
def name_scope(prefix=None):
    _name_scope_stack.append(prefix or "")
    try:
        yield
    finally:
        _name_scope_stack.pop()


class Program:
    """A program: a list of blocks (block 0 is global). ``print(program)`` dumps it."""

    def __init__(self):
        self.desc = core.ProgramDesc()
        self.blocks = [Block(self, 0)]
        self.current_block_idx = 0
        self.random_seed = 0
        self._op_role = OpRole.Forward
        self._op_role_var = []
        self._exec_cache = {}
        self._is_test = False

    # --- blocks
    def global_block(self):
        return self.blocks[0]

    def block(self, index):
        return self.blocks[index]

    def current_block(self):
        return self.blocks[self.current_block_idx]

    @property
    def num_blocks(self):
        return len(self.blocks)

    def _create_block(self, parent_idx=None):
        parent = self.current_block() if parent_idx is None else self.block(parent_idx)
        self.desc.append_block(parent.desc)
        self.current_block_idx = self.desc.num_blocks() - 1
        self.blocks.append(Block(self, self.current_block_idx))
        return self.current_block()

    def _rollback(self):
        self.current_block_idx = self.current_block().parent_idx

    def all_parameters(self):
        return self.global_block().all_parameters()

    def list_vars(self):
        for b in self.blocks:
            yield from b.vars.values()

    # --- op role bookkeeping (backward / optimizer / lr schedule)
    @contextlib.contextmanager
    def _optimized_guard(self, param_and_grads):
        old_role, old_var = self._op_role, self._op_role_var
        self._op_role = OpRole.Optimize
        self._op_role_var = [v.name if isinstance(v, Variable) else v for v in param_and_grads]
        try:
            yield
        finally:
            self._op_role, self._op_role_var = old_role, old_var

    @contextlib.contextmanager
    def _lr_schedule_guard(self):
        old_role, old_var = self._op_role, self._op_role_var
        self._op_role = OpRole.LRSched
        self._op_role_var = []
        try:
            yield
        finally:
            self._op_role, self._op_role_var = old_role, old_var

    @contextlib.contextmanager
    def _backward_role_guard(self):
        old_role = self._op_role
        self._op_role = OpRole.Backward
        try:
            yield
        finally:
            self._op_role = old_role

    # --- copying, printing, serialization
    def _copy_python_state_from(self, other):
        """Recreate wrappers for every block and carry over Python-only facts (stop_gradient, Parameters)."""
        self.blocks = []
        for i in range(self.desc.num_blocks()):
            block = Block.__new__(Block)
            block.program, block.desc, block.vars, block.ops = self, self.desc.block(i), {}, []
            self.blocks.append(block)
            src = other.blocks[i] if other is not None and i < len(other.blocks) else None
            for vdesc in block.desc.all_vars():
                name = vdesc.name()
                old = src.vars.get(name) if src is not None else None
                if isinstance(old, Parameter):
                    v = Parameter.__new__(Parameter)
                    v.__dict__.update({k: val for k, val in old.__dict__.items() if k not in ("block", "desc", "op")})
                else:
                    v = Variable.__new__(Variable)
                    v.stop_gradient = old.stop_gradient if old is not None else False
                    v.error_clip = None
                v.block, v.desc, v.op = block, vdesc, None
                block.vars[name] = v
            block.ops = [Operator(block, block.desc.op(j)) for j in range(block.desc.op_size())]
        self.current_block_idx = 0

    def clone(self, for_test=False):
        """A deep copy. ``for_test=True`` sets ``is_test=True`` on every op that has that attribute
        (clone before ``minimize``: nothing is pruned)."""
        p = Program.__new__(Program)
        p.desc = core.ProgramDesc(self.desc)
        p.random_seed = self.random_seed
        p._op_role, p._op_role_var, p._exec_cache, p._is_test = OpRole.Forward, [], {}, for_test
        p._copy_python_state_from(self)
        if for_test:
            for block in p.blocks:
                for op in block.ops:
                    if op.has_attr("is_test"):
                        op._set_attr("is_test", True)
        return p

    def _prune(self, targets):
        from .io import _prune_program
        return _prune_program(self, targets)

    def serialize_to_string(self):
        return self.desc.serialize_to_string()

    @staticmethod
    def parse_from_string(binary_str):
        p = Program.__new__(Program)
        p.desc = core.ProgramDesc.parse_from_string(binary_str)
        p.random_seed = 0
        p._op_role, p._op_role_var, p._exec_cache, p._is_test = OpRole.Forward, [], {}, False
        p._copy_python_state_from(None)
        return p

    def to_string(self, throw_on_error=False, with_details=False):
        return self.desc.to_string()

    def __str__(self):
        return self.to_string()

    def __repr__(self):
        return "<fluidlite.Program %d blocks, %d ops in block 0>" % (self.num_blocks, len(self.global_block().ops))


_main_program_ = Program()
_startup_program_ = Program()


def default_main_program():
    return _main_program_


def default_startup_program():
    return _startup_program_


def switch_main_program(program):
    global _main_program_
    prev, _main_program_ = _main_program_, program
    return prev


def switch_startup_program(program):
    global _startup_program_
    prev, _startup_program_ = _startup_program_, program
    return prev


@contextlib.contextmanager
def program_guard(main_program, startup_program=None):
    """Build ops into `main_program` (and parameter initializers into `startup_program`)."""
    if not isinstance(main_program, Program):
        raise TypeError("program_guard: main_program must be a Program, got %s" % type(main_program).__name__)
    if startup_program is not None and not isinstance(startup_program, Program):
        raise TypeError("program_guard: startup_program must be a Program, got %s" % type(startup_program).__name__)
    old_main = switch_main_program(main_program)
    old_startup = switch_startup_program(startup_program) if startup_program is not None else None
    try:
        yield
    finally:
        switch_main_program(old_main)
        if startup_program is not None:
            switch_startup_program(old_startup)
