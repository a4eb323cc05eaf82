"""Program / Block / Variable / Operator: thin Python wrappers over the C++ descs (the single source of
truth for the IR). Names and semantics follow Fluid 1.x ``paddle.fluid.framework``.

``Block.vars`` and ``Block.ops`` are read-only views computed from the block desc, so an edit made
through the descs (C++ or Python) is always seen. Wrapper objects are cached per block, keyed by the
desc's ``id()`` (a process-unique number, never reused), and only ever found through an id read from
the desc: membership and order always come from C++.

Only a few facts live in Python alone, as in Fluid: ``Variable.stop_gradient``, ``error_clip``, and the
Parameter attributes (that the variable is a Parameter, ``trainable``, ``optimize_attr``,
``regularizer``, ``gradient_clip_attr``, ``do_model_average``). They are kept in ONE table owned by the
Program, ``{block index: {variable name: row}}``, with a row only for a variable whose facts differ
from the defaults; the wrappers read and write through it, and ``clone()`` copies it.
"""
import collections.abc
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


def grad_var_name(var_name):
    """The name of `var_name`'s gradient variable (Fluid's ``var_name + "@GRAD"``)."""
    return var_name + core.names()["grad_suffix"]


def in_dygraph_mode():
    return False


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# The bench's models are user programs that ship inside the package: their lines are creation sites.
_BENCH_MODELS_DIR = os.path.join(_PACKAGE_DIR, "bench", "models")


def _library_frame(filename):
    return ((filename.startswith(_PACKAGE_DIR) and not filename.startswith(_BENCH_MODELS_DIR))
            or filename == contextlib.__file__)


def _user_callstack(limit=4):
    """'path.py:LINE' for the innermost frames outside fluidlite (where the user created an op)."""
    frame = sys._getframe(2)
    # contextlib's frames too: ops appended when a `with loop.block():` ends were created by the user's `with`.
    while frame is not None and _library_frame(frame.f_code.co_filename):
        frame = frame.f_back
    stack = []
    while frame is not None and len(stack) < limit:
        stack.append("%s:%d" % (frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return stack


class _VarFacts:
    """The Python-only facts of one variable: a row of ``Program._var_facts``."""

    __slots__ = ("stop_gradient", "error_clip", "is_parameter", "trainable", "optimize_attr", "regularizer",
                 "gradient_clip_attr", "do_model_average")

    def __init__(self, stop_gradient=False, error_clip=None):
        self.stop_gradient = stop_gradient
        self.error_clip = error_clip
        self.is_parameter = False  # the Parameter attributes below mean something only when this is True
        self.trainable = True
        self.optimize_attr = None
        self.regularizer = None
        self.gradient_clip_attr = None
        self.do_model_average = None

    def copy(self):
        c = _VarFacts.__new__(_VarFacts)
        c.stop_gradient, c.error_clip, c.is_parameter, c.trainable = (
            self.stop_gradient, self.error_clip, self.is_parameter, self.trainable)
        c.optimize_attr, c.regularizer, c.gradient_clip_attr, c.do_model_average = (
            self.optimize_attr, self.regularizer, self.gradient_clip_attr, self.do_model_average)
        return c


_DEFAULT_FACTS = _VarFacts()  # what a variable without a row reads (never written)


class Variable:
    """A variable in a block. Create through ``Block.create_var`` or the layers.

    A wrapper over a ``VarDesc``: everything but the Python-only facts (stop_gradient, error_clip) is
    read from and written to the desc."""

    def __init__(self, block, type=VarType.LOD_TENSOR, name=None, shape=None, dtype=None, lod_level=None,
                 persistable=None, stop_gradient=False, is_data=False, need_check_feed=False, **kwargs):
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
        self._id = desc.id()
        self._name = name
        self._op = None
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
        if need_check_feed:
            desc.set_need_check_feed(True)
        # The facts: a new variable gets a row only when they are not the defaults (any row is stale, left
        # by a desc removed behind our back); a redeclaration's facts win, as Fluid's new wrapper's do.
        rows, error_clip = block._facts, kwargs.get("error_clip")
        facts = None if is_new else rows.get(name)
        if facts is not None:
            facts.stop_gradient, facts.error_clip = stop_gradient, error_clip
        elif stop_gradient or error_clip is not None or isinstance(self, Parameter):  # a Parameter always has one
            rows[name] = _VarFacts(stop_gradient, error_clip)
        elif is_new and name in rows:
            del rows[name]
        # The block hands out this wrapper from now on, unless the variable is a Parameter and this is a
        # plain redeclaration: it stays a Parameter (the block keeps handing out a Parameter wrapper).
        if facts is None or not facts.is_parameter or isinstance(self, Parameter):
            block._var_wrappers[self._id] = self

    # --- Python-only facts (the Program's side table)
    def _facts(self):
        return self.block._facts.get(self._name, _DEFAULT_FACTS)

    def _facts_for_write(self):
        rows = self.block._facts
        facts = rows.get(self._name)
        if facts is None:
            facts = rows[self._name] = _VarFacts()
        return facts

    @property
    def stop_gradient(self):
        facts = self.block._facts.get(self._name)
        return facts.stop_gradient if facts is not None else False

    @stop_gradient.setter
    def stop_gradient(self, value):
        self._facts_for_write().stop_gradient = value

    @property
    def error_clip(self):
        return self._facts().error_clip

    @error_clip.setter
    def error_clip(self, value):
        self._facts_for_write().error_clip = value

    @property
    def op(self):
        """The op that last wrote this variable: the last op of its block, in program order, that writes
        it; if none does, the op of another block (a sub-block) recorded when it was appended, as long as
        that op is still in its block and still writes this variable; else None."""
        name = self._name
        for op in reversed(self.block._ops_snapshot()):
            if name in op.output_arg_names:
                return op
        op = self._op
        if op is not None and op.block._holds_op(op) and name in op.output_arg_names:
            return op
        return None

    @op.setter
    def op(self, op):
        self._op = op

    # --- desc-backed properties
    @property
    def name(self):
        return self._name  # a VarDesc's name never changes

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

    @property
    def need_check_feed(self):
        """True for fluid.data variables: Executor.run checks a fed value's shape and dtype against them."""
        return self.desc.need_check_feed()

    def to_string(self, throw_on_error=False, with_details=False):
        s = "%svar %s : %s.shape%s.dtype(%s)" % ("persist " if self.persistable else "", self.name,
                                                 self.type.name, self.shape, dtype_to_str(self.dtype)
                                                 if self.type in (VarType.LOD_TENSOR, VarType.LOD_TENSOR_ARRAY)
                                                 else "")
        if self.lod_level > 0:  # as Fluid's VarDesc text (lod_tensor { lod_level: N }) and print(program)
            s += ".lod_level(%d)" % self.lod_level
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
    def __pow__(self, o): return self._binary(o, "elementwise_pow")
    def __rpow__(self, o): return self._binary(o, "elementwise_pow", True)
    def __floordiv__(self, o): return self._binary(o, "elementwise_floordiv")
    def __rfloordiv__(self, o): return self._binary(o, "elementwise_floordiv", True)
    def __mod__(self, o): return self._binary(o, "elementwise_mod")
    def __rmod__(self, o): return self._binary(o, "elementwise_mod", True)
    def __neg__(self):
        from .layers import scale
        return scale(self, scale=-1.0)

    def __getitem__(self, item):
        from .layers import nn
        return nn.getitem(self, item)

    __iter__ = None  # indexing does not make a Variable iterable: its length is not known when the program is built

    __hash__ = object.__hash__


def _param_fact(name, doc):
    def get(self):
        facts = self.block._facts.get(self._name)
        return getattr(facts if facts is not None else _DEFAULT_FACTS, name)

    def set(self, value):
        setattr(self._facts_for_write(), name, value)
    return property(get, set, doc=doc)


class Parameter(Variable):
    """A persistable, trainable variable with a fixed shape. Its attributes live in the Program's side
    table, so every wrapper of the variable (and every clone of the program) sees them."""

    def __init__(self, block, shape, dtype, **kwargs):
        if shape is None or dtype is None:
            raise ValueError("a Parameter needs both shape and dtype")
        for s in shape:
            if s < 0:
                raise ValueError("a Parameter's shape must be known; got %s" % (list(shape),))
        kwargs.setdefault("persistable", True)
        super().__init__(block, shape=shape, dtype=dtype, **kwargs)
        facts = block._facts[self._name]  # made by Variable.__init__
        facts.is_parameter = True
        facts.trainable = kwargs.get("trainable", True)
        facts.optimize_attr = kwargs.get("optimize_attr", {"learning_rate": 1.0})
        facts.regularizer = kwargs.get("regularizer")
        facts.gradient_clip_attr = kwargs.get("gradient_clip_attr")
        facts.do_model_average = kwargs.get("do_model_average")

    trainable = _param_fact("trainable", "whether optimizers update this parameter")
    optimize_attr = _param_fact("optimize_attr", "{'learning_rate': factor} applied to the global learning rate")
    regularizer = _param_fact("regularizer", "this parameter's weight decay (wins over the optimizer's)")
    gradient_clip_attr = _param_fact("gradient_clip_attr", "this parameter's gradient clipping")
    do_model_average = _param_fact("do_model_average", "whether ModelAverage includes this parameter")

    def __repr__(self):
        return "Parameter(%s, shape=%s, dtype=%s)" % (self.name, self.shape, dtype_to_str(self.dtype))


class Operator:
    """An op in a block; wraps an OpDesc."""

    def __init__(self, block, desc):
        self.block = block
        self.desc = desc
        self._id = desc.id()

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


class _VarsView(collections.abc.Mapping):
    """``Block.vars``: a read-only mapping name -> Variable over the block desc, in creation order.

    Lookups ask the desc; iteration and ``len`` use the block's snapshot of the names, ``values()`` and
    ``items()`` its snapshot of the wrappers, each rebuilt when the block desc's ``vars_version()``
    changed (a var added or removed). ``keys()``, ``values()`` and ``items()`` return lists."""

    __slots__ = ("_block",)

    def __init__(self, block):
        self._block = block

    def __getitem__(self, name):
        v = self._block._find_var(name) if isinstance(name, str) else None
        if v is None:
            raise KeyError(name)
        return v

    def get(self, name, default=None):
        v = self._block._find_var(name) if isinstance(name, str) else None
        return default if v is None else v

    def __contains__(self, name):
        return isinstance(name, str) and self._block.desc.var_id(name) != 0

    def __iter__(self):
        return iter(self._block._var_names())

    def __len__(self):
        return len(self._block._var_names())

    def keys(self):
        return list(self._block._var_names())

    def values(self):
        return list(self._block._vars_snapshot().values())

    def items(self):
        return list(self._block._vars_snapshot().items())

    def __repr__(self):
        return "<vars of block %d: %s>" % (self._block._idx, ", ".join(self._block._var_names()))


class _OpsView(collections.abc.Sequence):
    """``Block.ops``: a read-only sequence of Operator over the block desc (index, slice, len,
    iteration, reversed). It reads the block's snapshot, rebuilt when the block desc's ``ops_version()``
    changed (an op inserted or removed); iterating goes over the snapshot taken when the iteration
    starts. Compares equal to a list or tuple of the same Operator objects."""

    __slots__ = ("_block",)

    def __init__(self, block):
        self._block = block

    def __getitem__(self, index):
        return self._block._ops_snapshot()[index]

    def __len__(self):
        return len(self._block._ops_snapshot())

    def __iter__(self):
        return iter(self._block._ops_snapshot())

    def __reversed__(self):
        return reversed(self._block._ops_snapshot())

    def __contains__(self, op):
        return isinstance(op, Operator) and self._block._holds_op(op)

    def index(self, op, *args):
        return self._block._ops_snapshot().index(op, *args)

    def __eq__(self, other):
        if isinstance(other, _OpsView):
            other = other._block._ops_snapshot()
        if isinstance(other, (list, tuple)):
            return self._block._ops_snapshot() == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return repr(self._block._ops_snapshot())


class Block:
    def __init__(self, program, idx):
        self.program = program
        self.desc = program.desc.block(idx)
        self._idx = idx
        self._facts = program._var_facts.setdefault(idx, {})  # this block's rows of the program's table
        self._var_wrappers = {}  # VarDesc.id() -> Variable (a cache: only found through ids read from the desc)
        self._op_wrappers = {}   # OpDesc.id() -> Operator (likewise)
        self._names_cache, self._names_version = None, -1  # [var name] in creation order, at desc.vars_version()
        self._vars_cache, self._vars_version = None, -1  # name -> Variable in creation order, at desc.vars_version()
        self._ops_cache, self._ops_version = None, -1    # [Operator] in order, at desc.ops_version()
        self._vars_view = _VarsView(self)
        self._ops_view = _OpsView(self)

    @property
    def vars(self):
        """Read-only mapping name -> Variable of this block, in creation order (a view of the desc)."""
        return self._vars_view

    @property
    def ops(self):
        """Read-only sequence of this block's Operators, in order (a view of the desc)."""
        return self._ops_view

    # --- the views' machinery
    def _wrap_var(self, desc, vid, name=None):
        if name is None:
            name = desc.name()
        facts = self._facts.get(name)
        cls = Parameter if facts is not None and facts.is_parameter else Variable
        v = cls.__new__(cls)
        v.block, v.desc, v._id, v._name, v._op = self, desc, vid, name, None
        self._var_wrappers[vid] = v
        return v

    def _find_var(self, name):
        """The wrapper of local variable `name`, or None."""
        vid = self.desc.var_id(name)
        if not vid:
            return None
        v = self._var_wrappers.get(vid)
        return v if v is not None else self._wrap_var(self.desc.find_var(name), vid)

    def _var_names(self):
        version = self.desc.vars_version()  # bumped by every var added or removed, by C++ or Python
        if self._names_version != version:
            self._names_cache, self._names_version = self.desc.var_names(), version
        return self._names_cache

    def _vars_snapshot(self):
        version = self.desc.vars_version()
        if self._vars_version != version:
            cache, snap = self._var_wrappers, {}
            for name, vid in zip(self._var_names(), self.desc.var_ids()):
                v = cache.get(vid)
                snap[name] = v if v is not None else self._wrap_var(self.desc.find_var(name), vid, name)
            self._var_wrappers = {v._id: v for v in snap.values()}  # drop wrappers of removed descs
            self._vars_cache, self._vars_version = snap, version
        return self._vars_cache

    def _ops_snapshot(self):
        version = self.desc.ops_version()  # bumped by every op inserted or removed, by C++ or Python
        if self._ops_version != version:
            cache, snap = self._op_wrappers, []
            for i, oid in enumerate(self.desc.op_ids()):
                op = cache.get(oid)
                if op is None:
                    op = cache[oid] = Operator(self, self.desc.op(i))
                snap.append(op)
            self._op_wrappers = {op._id: op for op in snap}  # drop wrappers of removed descs
            self._ops_cache, self._ops_version = snap, version
        return self._ops_cache

    def _wrap_op(self, desc):
        """The wrapper of an op desc just added to this block (cached, so the view hands out this one)."""
        op = Operator(self, desc)
        self._op_wrappers[op._id] = op
        return op

    def _holds_op(self, op):
        """Whether `op` (this very wrapper) is one of this block's current ops."""
        self._ops_snapshot()
        return self._op_wrappers.get(getattr(op, "_id", None)) is op

    @property
    def idx(self):
        return self._idx

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
        v = self._find_var(name)
        if v is None:
            raise ValueError("var %s not in this block" % name)
        return v

    def _find_var_recursive(self, name):
        block = self
        while True:
            v = block._find_var(name)
            if v is not None:
                return v
            if block.parent_idx < 0:
                return None
            block = self.program.block(block.parent_idx)

    def _var_recursive(self, name):
        v = self._find_var_recursive(name)
        if v is None:
            raise ValueError("var %s is not in block %d or its parents" % (name, self.idx))
        return v

    def has_var(self, name):
        return self.desc.var_id(name) != 0

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
        rows = self._facts  # wrap only the parameters
        return [self._find_var(n) for n in self._var_names() if rows.get(n, _DEFAULT_FACTS).is_parameter]

    def iter_parameters(self):
        return iter(self.all_parameters())

    def _remove_var(self, name):
        self._var_wrappers.pop(self.desc.var_id(name), None)
        self.desc.remove_var(name)
        self._facts.pop(name, None)

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
        op = Operator(self, self.desc.append_op(type, ins, outs, attrs, index))
        self._op_wrappers[op._id] = op  # the view hands out this wrapper (as _wrap_op, inlined: hot path)
        for vs in (outputs or {}).values():
            for v in vs if isinstance(vs, (list, tuple)) else [vs]:
                if isinstance(v, Variable):
                    v._op = op
        return op

    def _prepend_op(self, *args, **kwargs):
        kwargs["index"] = 0
        return self.append_op(*args, **kwargs)

    def _insert_op(self, index, *args, **kwargs):
        kwargs["index"] = index
        return self.append_op(*args, **kwargs)

    def _remove_op(self, index):
        self.desc.remove_op(index, index + 1)  # the next snapshot drops its wrapper from the cache

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

    # Non-iterable DataLoaders/py_readers bound to this program: Executor.run feeds from them (Fluid's read
    # op). Kept by clone(), as Fluid clones the read op; dropped when pruning for inference.
    _readers = ()

    def __init__(self):
        self._init_from_desc(core.ProgramDesc(), {})

    def _init_from_desc(self, desc, var_facts, random_seed=0, is_test=False):
        self.desc = desc
        # The Python-only facts of the variables: {block idx: {var name: _VarFacts}}, a row only where they
        # differ from the defaults. The one place they live (each Block holds its inner dict); clone() copies it.
        self._var_facts = var_facts
        self._blocks = [Block(self, i) for i in range(desc.num_blocks())]
        self.current_block_idx = 0
        self.random_seed = random_seed
        self._op_role = OpRole.Forward
        self._op_role_var = []
        self._exec_cache = {}
        self._is_test = is_test

    # --- blocks
    @property
    def blocks(self):
        """The blocks, in index order (a block appended to the desc directly shows up too)."""
        n = self.desc.num_blocks()
        while len(self._blocks) < n:
            self._blocks.append(Block(self, len(self._blocks)))
        return self._blocks

    def global_block(self):
        return self._blocks[0]

    def block(self, index):
        if 0 <= index < len(self._blocks):
            return self._blocks[index]
        return self.blocks[index]

    def current_block(self):
        try:
            return self._blocks[self.current_block_idx]
        except IndexError:  # a block appended to the desc directly
            return self.blocks[self.current_block_idx]

    @property
    def num_blocks(self):
        return self.desc.num_blocks()

    def _create_block(self, parent_idx=None):
        parent = self.current_block() if parent_idx is None else self.block(parent_idx)
        self.desc.append_block(parent.desc)
        self.current_block_idx = self.desc.num_blocks() - 1
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
    def clone(self, for_test=False):
        """A deep copy, with the Python-only facts (stop_gradient, Parameters). ``for_test=True`` sets
        ``is_test=True`` on every op that has that attribute and, as Fluid 1.8's prune_backward does, drops the
        backward and optimizer ops (op_role Backward or Optimize) of a program cloned after ``minimize``: the
        test program computes the forward pass only, and running it never updates a parameter."""
        p = Program.__new__(Program)
        facts = {idx: {name: f.copy() for name, f in rows.items()} for idx, rows in self._var_facts.items()}
        p._init_from_desc(core.ProgramDesc(self.desc), facts, self.random_seed, for_test)
        p._readers = self._readers
        if for_test:
            training = int(OpRole.Backward) | int(OpRole.Optimize)
            for block in p.blocks:
                for i in reversed(range(len(block.ops))):
                    op = block.ops[i]
                    if op.has_attr("op_role") and int(op.attr("op_role")) & training:
                        block._remove_op(i)
                    elif op.has_attr("is_test"):
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
        # The Python-only facts are not serialized.
        p._init_from_desc(core.ProgramDesc.parse_from_string(binary_str), {})
        return p

    def to_string(self, throw_on_error=False, with_details=False):
        return self.desc.to_string()

    def __str__(self):
        return self.to_string()

    def __repr__(self):
        return "<fluidlite.Program %d blocks, %d ops in block 0>" % (self.num_blocks, len(self.global_block().ops))


def _program_of_params(params_grads, caller):
    """The program of the parameters of [(param, grad)]: where ops that update them belong (the
    default main program when the list is empty). Raises ValueError for parameters of several programs."""
    program, first = None, None
    for param, _ in params_grads:
        if program is None:
            program, first = param.block.program, param
        elif param.block.program is not program:
            raise ValueError("%s: parameters %s and %s belong to different programs; update each program's "
                             "parameters separately" % (caller, first.name, param.name))
    return program if program is not None else default_main_program()


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


# Fluid 1.x exports the place lists from fluid.framework too (places.py imports only core, so no cycle).
from .places import cpu_places, cuda_pinned_places, cuda_places  # noqa: E402,F401
from .core import is_compiled_with_cuda  # noqa: E402,F401
