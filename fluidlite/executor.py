"""Executor, scopes and places.

``Executor.run`` prepares a (program, feed names, fetch names, scope) combination once in C++ and keeps
the prepared program on the Program object, keyed also by the program's version counter: any edit of
the program re-prepares, an unchanged program never does. Each run is one C++ call with the GIL
released; no Python runs per op.

The cache holds its scopes weakly: an entry (with its prepared program and the kid scope of its
temporaries) dies with its scope, and a program keeps at most ``EXEC_CACHE_LIMIT`` entries (the oldest
goes first), so a fresh Scope per run does not grow memory.
"""
import contextlib
import weakref

import numpy as np

from . import core, dlpack
from .framework import Program, Variable, default_main_program, dtype_to_numpy
from .numpy_compat import ScalarArray
from .profiler._session import _note_program
from .profiler._session import _state as _profiler_state

__all__ = ["Executor", "global_scope", "scope_guard", "Scope", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace"]

Scope = core.Scope
core._set_fetch_scalar_type(ScalarArray)  # fetched losses of shape [1] (and rows) accept float(): numpy_compat.py


CPUPlace, CUDAPlace, CUDAPinnedPlace = core.CPUPlace, core.CUDAPlace, core.CUDAPinnedPlace


_global_scope = core.Scope()
_scope_stack = [_global_scope]


def global_scope():
    """The scope `Executor.run` uses when none is given (``scope_guard`` can switch it)."""
    return _scope_stack[-1]


@contextlib.contextmanager
def scope_guard(scope):
    if not isinstance(scope, core.Scope):
        raise TypeError("scope_guard expects a fluidlite Scope, got %s" % type(scope).__name__)
    _scope_stack.append(scope)
    try:
        yield
    finally:
        _scope_stack.pop()


def _fetch_name(item):
    if isinstance(item, Variable):
        return item.name
    if isinstance(item, str):
        return item
    raise TypeError("fetch_list items must be Variables or variable names, got %s" % type(item).__name__)


EXEC_CACHE_LIMIT = 16  # prepared (feed, fetch, scope) combinations kept per program


class _CacheEntry:
    __slots__ = ("prepared", "version", "scope", "feed_names")

    def __init__(self, prepared, version, scope_ref, feed_names):
        self.prepared, self.version, self.scope, self.feed_names = prepared, version, scope_ref, feed_names


def _forget(program_ref, key):
    """The weakref callback of a cached scope: its entry goes when the scope goes."""
    def callback(_):
        program = program_ref()
        if program is not None:
            program._exec_cache.pop(key, None)
    return callback


class Executor:
    """Runs programs on one place: ``Executor(fluid.CPUPlace())``."""

    def __init__(self, place=None):
        self.place = place if place is not None else core.cpu_place()
        if not isinstance(self.place, core.Place):
            raise TypeError("Executor: place must be fluid.CPUPlace() or fluid.CUDAPlace(i), got %s"
                            % type(self.place).__name__)
        if self.place.is_cuda_pinned_place():  # as Fluid: pinned memory holds data, kernels run on a device
            raise ValueError("Executor: CUDAPinnedPlace is host memory for staging data, not a place to run "
                             "programs: use fluid.CPUPlace() or fluid.CUDAPlace(i)")
        self._place_key = str(self.place)
        self._closed = False

    def close(self):
        self._closed = True

    def _check_program(self, program, feed_names, fetch_names):
        block = program.global_block()
        for name in fetch_names:
            if block._find_var_recursive(name) is None:
                raise ValueError("fetch_list: variable '%s' is not in the program (it has %d variables)"
                                 % (name, len(block.vars)))
        for name in feed_names:
            if block._find_var_recursive(name) is None:
                raise ValueError("feed: variable '%s' is not in the program" % name)
        # A data variable that some op reads must be fed (or produced by an earlier op).
        produced = set(feed_names)
        for op in block.ops:
            for name in op.input_arg_names:
                if name in produced:
                    continue
                var = block._find_var_recursive(name)
                if var is not None and var.is_data and not var.persistable:
                    raise ValueError("feed: variable '%s' is required by op %s (created at %s) but is missing from "
                                     "the feed dict (fed: %s)" % (name, op.type, op.desc.creation_site() or "?",
                                                                 sorted(feed_names) or "nothing"))
            produced.update(op.output_arg_names)

    def _prepare(self, program, key, feed_names, fetch_names, scope, passes, fetch_on_device=False):
        self._check_program(program, feed_names, fetch_names)
        prepared = core.PreparedProgram(program.desc, 0, scope, self.place, list(feed_names), list(fetch_names),
                                        list(passes), fetch_on_device)
        entry = _CacheEntry(prepared, program.desc.version(), weakref.ref(scope, _forget(weakref.ref(program), key)),
                            feed_names)
        cache = program._exec_cache
        cache.pop(key, None)
        while len(cache) >= EXEC_CACHE_LIMIT:
            cache.pop(next(iter(cache)))  # the oldest (a run still using it keeps its own reference)
        cache[key] = entry
        return entry

    def run(self, program=None, feed=None, fetch_list=None, feed_var_name="feed", fetch_var_name="fetch",
            scope=None, return_numpy=True, use_program_cache=True, _passes=None, fetch_on_device=False):
        """Run `program` (default: the default main program) once. `feed` maps variable names to numpy
        arrays, LoDTensors (fed with their LoD), ``(array, recursive_seq_lens)`` pairs (a LoDTensor with that LoD),
        arrays of other libraries that support DLPack (CuPy, torch, JAX: shared, not copied through the host),
        lists or scalars; returns one numpy array per `fetch_list`
        entry (a ScalarArray for rank >= 1, see numpy_compat.py; LoDTensors with their LoD if return_numpy=False).
        A single Variable or name as `fetch_list` is a list of one, as in Fluid.

        fetch_on_device=True (fluidlite's): the results stay on the program's place and come back as LoDTensors
        (return_numpy is ignored), for ``cupy.from_dlpack(t)`` / ``torch.from_dlpack(t)`` without a host copy."""
        if fetch_on_device:
            return_numpy = False
        if not _profiler_state.recording or _profiler_state.in_run:
            return self._run(program, feed, fetch_list, scope, return_numpy, _passes, fetch_on_device)
        # Profiled: the whole call is an event, so the Python side (feed checks, the program cache, numpy
        # conversion of feeds and fetches) shows as its self time beside the C++ Executor::run, and the advisor
        # finds the Python time between runs from these events. Only the outermost call (a CompiledProgram runs
        # through here again).
        _profiler_state.in_run = True
        token = core.push_run_event()
        try:
            return self._run(program, feed, fetch_list, scope, return_numpy, _passes, fetch_on_device)
        finally:
            core.pop_event(token)
            _profiler_state.in_run = False

    def _run(self, program, feed, fetch_list, scope, return_numpy, passes=None, fetch_on_device=False):
        if self._closed:
            raise RuntimeError("Executor.run called after close()")
        if program is None:
            program = default_main_program()
        if not isinstance(program, Program):
            from .compiler import CompiledProgram  # here: compiler.py imports this module
            if isinstance(program, CompiledProgram):
                return program._run(self, feed, fetch_list, scope, return_numpy)
            raise TypeError("Executor.run: program must be a fluidlite Program, got %s" % type(program).__name__)
        if scope is None:
            scope = _scope_stack[-1]
        elif not isinstance(scope, core.Scope):
            raise TypeError("Executor.run: scope must be a fluidlite Scope, got %s" % type(scope).__name__)
        if feed is None:
            feed = {}
        elif isinstance(feed, (list, tuple)) and len(feed) == 1:
            feed = feed[0]  # one dict per place, as an iterable DataLoader yields (Fluid takes a list of one)
        if not isinstance(feed, dict):
            raise TypeError("feed must be a dict of {name: numpy array}, got %s" % type(feed).__name__)
        if program._readers:
            feed = _read_feed(program._readers, feed)
        feed_names = tuple(feed)
        if isinstance(fetch_list, (str, Variable)):
            fetch_list = [fetch_list]  # as Fluid 1.6+'s _check_fetch_list: one target, a list of one result
        fetch_names = tuple(_fetch_name(f) for f in fetch_list) if fetch_list else ()
        if passes is None:  # a plain run: BuildStrategy()'s passes (CompiledProgram passes its own)
            passes = _passes_for(program)
        key = (self._place_key, feed_names, fetch_names, id(scope), passes, bool(fetch_on_device))
        entry = program._exec_cache.get(key)
        if entry is None or entry.version != program.desc.version() or entry.scope() is not scope:
            entry = self._prepare(program, key, feed_names, fetch_names, scope, passes, bool(fetch_on_device))
        if _profiler_state.recording:  # the advisor reads the programs a profile ran
            _note_program(program)
        values = [feed[n] for n in feed_names]
        for i, v in enumerate(values):
            if not isinstance(v, (np.ndarray, core.LoDTensor)):  # a LoDTensor is fed as is, LoD included
                # a DLPack array is shared as is: the feed op copies it to the executor's place if elsewhere
                values[i] = dlpack.from_dlpack(v) if dlpack.is_dlpack_array(v) else _as_array(v, feed_names[i], program)
        return entry.prepared.run(values, return_numpy)


    def prepared_program(self, program=None, feed=None, fetch_list=None, scope=None, build_strategy=None):
        """The program as this executor runs it: the private copy with the IR passes applied and the feed and
        fetch ops added, as a read-only Program whose ``print`` starts with what each pass changed. `feed`
        names (a dict or a list of names) and `fetch_list` are those of the run; nothing runs."""
        from .compiler import CompiledProgram, passes_for
        if isinstance(program, CompiledProgram):
            build_strategy = build_strategy or program._build_strategy
            program = program._program
        program = program if program is not None else default_main_program()
        scope = scope if scope is not None else _scope_stack[-1]
        feed_names = tuple(feed or ())
        if isinstance(fetch_list, (str, Variable)):
            fetch_list = [fetch_list]
        fetch_names = tuple(_fetch_name(f) for f in fetch_list) if fetch_list else ()
        self._check_program(program, feed_names, fetch_names)
        prepared = core.PreparedProgram(program.desc, 0, scope, self.place, list(feed_names), list(fetch_names),
                                        list(passes_for(program, build_strategy)))
        return PreparedView(prepared)


class PreparedView(Program):
    """Executor.prepared_program's result: the prepared copy of a program (read it, print it; it does not run).
    ``pass_results`` lists what each pass did."""

    def __init__(self, prepared):
        self._prepared = prepared  # owns the desc
        self._init_from_desc(prepared.program(), {})
        self.pass_results = prepared.pass_results()

    def __str__(self):
        lines = ["// IR passes: %s" % (", ".join(r["pass"] for r in self.pass_results) or "none")]
        for r in self.pass_results:
            lines.append("//   " + r["summary"])
            lines.extend("//     " + d for d in r["details"])
        return "\n".join(lines) + "\n" + super().__str__()


_PASSES_FOR = []


def _passes_for(program):
    if not _PASSES_FOR:  # imported on first use: compiler.py imports this module
        from .compiler import passes_for
        _PASSES_FOR.append(passes_for)
    return _PASSES_FOR[0](program)


def _read_feed(readers, feed):
    """The feed plus the next batch of each reader bound to the program (dataloader.py); raises
    core.EOFException at the end of an epoch."""
    feed = dict(feed)
    for reader in readers:
        reader._feed_next(feed)
    return feed


def _is_lod_pair(value):
    """Whether a fed value is Fluid's ``(data, recursive_seq_lens)`` pair: a tuple of an array (or nested list)
    and a list of lists of ints."""
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], (list, tuple))):
        return False
    lens = value[1]
    return bool(lens) and all(isinstance(level, (list, tuple)) for level in lens) and (
        isinstance(value[0], np.ndarray) or isinstance(value[0], (list, tuple)))


def _as_array(value, name, program):
    """Fluid's conversion of a fed Python value: a scalar becomes a 1-element array and a list an array,
    both of the variable's declared dtype."""
    dtype = dtype_to_numpy(program.global_block()._find_var_recursive(name).dtype)
    if np.isscalar(value):
        return np.array([value], dtype=dtype)
    if _is_lod_pair(value):
        from .lod_tensor import create_lod_tensor  # lod_tensor.py imports core only; kept local as the rest
        try:
            return create_lod_tensor(np.asarray(value[0], dtype=dtype), value[1], core.CPUPlace())
        except ValueError as e:
            raise ValueError("feed: variable '%s': %s" % (name, e)) from None
    if isinstance(value, (list, tuple)):
        try:
            arr = np.array(value)
        except ValueError:  # numpy >= 1.24: a ragged list
            arr = None
        if arr is None or arr.dtype == object:
            raise TypeError("feed: variable '%s': failed to convert the fed list to a regular ndarray: usually this "
                            "means it holds nested lists of different lengths. Please consider using "
                            "'fluid.create_lod_tensor' to convert it to a LoD-Tensor." % name)
        return arr.astype(dtype, copy=False)
    raise TypeError("feed: variable '%s': convert data of type %s to a tensor is not supported (feed a numpy array, "
                    "a LoDTensor, a list or a scalar)" % (name, type(value).__name__))
