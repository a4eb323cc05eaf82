"""fluid.save / fluid.load and fluid.io.load_program_state / set_program_state: Fluid 1.6's files.

``save(program, model_path)`` writes, as Fluid does:

- ``model_path + ".pdparams"``: a pickle (protocol 2) of ``{parameter name: ndarray}``;
- ``model_path + ".pdopt"``: the same for the optimizer's variables (persistable, not a Parameter, not a
  data variable: moments, beta pows, learning rate, counters);
- ``model_path + ".pdmodel"``: the program's serialized desc (``program.desc.serialize_to_string()``).

The three files are one all-or-nothing save through io.py's ``_save_files`` (temporary files, fsync, the
manifest as commit point, renames): a crash at any point leaves the previous save loadable. Loads read
plain pickles too (what Fluid writes, no manifest), but unpickle only dicts of numpy arrays: a pickle that
names any other class is refused, as is a truncated or corrupt file, with the file's path in the error.
"""
import io as _io
import os
import pickle
import warnings

import numpy as np

from . import core
from .executor import global_scope
from .framework import Parameter, Program, Variable, dtype_to_numpy
from .io import (MANIFEST_FILENAME, _locked, _save_files, _SavedDir, is_parameter, is_persistable, load_vars)

__all__ = ["save", "load", "load_program_state", "set_program_state"]

_SUFFIXES = (".pdparams", ".pdopt", ".pdmodel")


def _is_optimizer_var(var):
    """Fluid's is_belong_to_optimizer: persistable, not a Parameter, not a fed (data) variable."""
    return not isinstance(var, Parameter) and not var.is_data and is_persistable(var)


def _check_program(caller, program):
    if not isinstance(program, Program):
        raise TypeError("%s: program must be a fluid Program, got %s" % (caller, type(program).__name__))


def _split_path(caller, model_path):
    if not isinstance(model_path, str):
        raise TypeError("%s: model_path must be a str, got %s" % (caller, type(model_path).__name__))
    base = os.path.basename(model_path)
    if not base:
        raise ValueError("%s: model_path must be dirname/filename, got %r (no file name)" % (caller, model_path))
    return os.path.dirname(model_path) or ".", base


def _scope_arrays(caller, vars):
    scope = global_scope()
    out = {}
    for v in vars:
        found = scope.find_var(v.name)
        if found is None or not found.is_initialized():
            raise ValueError("%s: variable %s is not in the scope (did you run the startup program?)"
                             % (caller, v.name))
        out[v.name] = np.array(found.get_tensor())
    return out


def _pickled(obj):
    buf = _io.BytesIO()
    pickle.dump(obj, buf, protocol=2)
    return [buf.getbuffer()]


def save(program, model_path):
    """Save `program`'s parameters, optimizer variables (from the global scope) and the program itself
    to model_path + .pdparams / .pdopt / .pdmodel, all or nothing."""
    _check_program("fluid.save", program)
    dirname, base = _split_path("fluid.save", model_path)
    params = _scope_arrays("fluid.save", [v for v in program.list_vars() if is_parameter(v)])
    opt = _scope_arrays("fluid.save", [v for v in program.list_vars() if _is_optimizer_var(v)])
    _save_files(dirname, [(base + ".pdparams", _pickled(params)), (base + ".pdopt", _pickled(opt)),
                          (base + ".pdmodel", [program.serialize_to_string()])])


class _ArraysOnly(pickle.Unpickler):
    """Unpickles the dicts of numpy arrays that Fluid (and fluid.save) write, and nothing else: a pickle
    runs whatever callable it names, so only numpy's array reconstruction is allowed."""

    _ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("_codecs", "encode"), ("collections", "OrderedDict")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError("it names %s.%s; only dicts of numpy arrays are loaded" % (module, name))
        return super().find_class(module, name)


def _read_state(saved, path, name):
    """{name: ndarray} from the pickle file `name` of the _SavedDir `saved` (checked against its manifest
    where it lists the file)."""
    data = saved.read_bytes(name, "the saved state")
    try:
        state = _ArraysOnly(_io.BytesIO(data), encoding="latin1").load()
    except Exception as e:  # a corrupt pickle can raise nearly anything; name the file
        raise core.EnforceNotMet("cannot load the saved state from %s: the file is truncated or corrupt, or not a "
                                 "pickle of {name: ndarray} (%s: %s)" % (path, type(e).__name__, e)) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, np.ndarray)
                                              for k, v in state.items()):
        raise core.EnforceNotMet("cannot load the saved state from %s: it holds %s, not a dict of {name: ndarray}"
                                 % (path, type(state).__name__))
    return state


def _prefix(model_path):
    for suffix in _SUFFIXES:
        if model_path.endswith(suffix):
            return model_path[:-len(suffix)]
    return model_path


def _check_array(caller, var, arr, path):
    want_dtype = np.dtype(dtype_to_numpy(var.dtype))
    if arr.dtype != want_dtype:
        raise ValueError("%s: variable %s is %s in %s, the program declares %s"
                         % (caller, var.name, arr.dtype, path, want_dtype))
    want = list(var.shape)
    if len(want) != arr.ndim or any(w >= 0 and w != a for w, a in zip(want, arr.shape)):
        raise ValueError("%s: variable %s has shape %s in %s, the program declares %s"
                         % (caller, var.name, list(arr.shape), path, want))


def load(program, model_path, executor=None, var_list=None):
    """Load what `save` wrote (model_path with or without a .pdparams/.pdopt/.pdmodel suffix) into the
    global scope: every parameter of `program` from .pdparams and, if the program has optimizer
    variables, every one of them from .pdopt. A missing name or a shape/dtype mismatch raises naming the
    variable; all files are read and checked before any variable is set. A directory (or a single file)
    written by save_vars/save_params/save_persistables loads as Fluid's fallback does (needs `executor`)."""
    _check_program("fluid.load", program)
    if executor is not None and not hasattr(executor, "place"):
        raise TypeError("fluid.load: executor must be a fluid Executor, got %s" % type(executor).__name__)
    prefix = _prefix(model_path)
    dirname, base = _split_path("fluid.load", prefix)
    if not os.path.exists(prefix + ".pdparams"):
        return _load_old_format(program, model_path, executor, var_list)
    place = executor.place if executor is not None else core.cpu_place()
    params = [v for v in program.list_vars() if is_parameter(v)]
    opt_vars = [v for v in program.list_vars() if _is_optimizer_var(v)]
    arrays = {}
    with _locked(dirname, exclusive=False):
        saved = _SavedDir(dirname)
        for suffix, vars in ((".pdparams", params), (".pdopt", opt_vars)):
            if suffix == ".pdopt" and not vars:
                continue
            path = prefix + suffix
            if not os.path.exists(path):
                raise ValueError("fluid.load: the program has optimizer variables (%s) but %s does not exist"
                                 % (", ".join(v.name for v in vars[:3]), path))
            state = _read_state(saved, path, base + suffix)
            for v in vars:
                if v.name not in state:
                    raise ValueError("fluid.load: can not find variable %s in the model file %s" % (v.name, path))
                _check_array("fluid.load", v, state[v.name], path)
                arrays[v.name] = state[v.name]
    scope = global_scope()
    for name, arr in arrays.items():
        scope.var(name).get_tensor().set(arr, place)


def _load_old_format(program, model_path, executor, var_list):
    if executor is None:
        raise ValueError("fluid.load: %s.pdparams does not exist; loading files of save_vars/save_params/"
                         "save_persistables needs an executor" % _prefix(model_path))
    if os.path.isdir(model_path):
        if var_list is None:
            load_vars(executor, model_path, program, predicate=is_persistable)
        else:
            load_vars(executor, model_path, program, vars=var_list)
        return
    dirname, base = _single_file_save(model_path, var_list, "fluid.load")
    load_vars(executor, dirname, program, vars=var_list, filename=base)


def _single_file_save(model_path, var_list, caller):
    """(folder, file name) of a combined save_vars/save_persistables file, which needs var_list."""
    if not os.path.exists(model_path):
        raise ValueError("%s: neither %s.pdparams nor %s exists" % (caller, _prefix(model_path), model_path))
    if var_list is None:
        raise ValueError("%s: %s is a single file of save_vars/save_persistables (filename=...); pass var_list, "
                         "the variables it holds" % (caller, model_path))
    dirname, base = os.path.split(model_path)
    return dirname or ".", base


def load_program_state(model_path, var_list=None):
    """{name: ndarray} of what `save` wrote: .pdparams and, where it exists, .pdopt. A directory of
    save_vars files (or one combined file with var_list) is read as Fluid's fallback does."""
    prefix = _prefix(model_path)
    dirname, base = _split_path("load_program_state", prefix)
    if not os.path.exists(prefix + ".pdparams"):
        return _program_state_old_format(model_path, var_list)
    with _locked(dirname, exclusive=False):
        saved = _SavedDir(dirname)
        state = _read_state(saved, prefix + ".pdparams", base + ".pdparams")
        if os.path.exists(prefix + ".pdopt"):
            state.update(_read_state(saved, prefix + ".pdopt", base + ".pdopt"))
    return state


def _program_state_old_format(model_path, var_list):
    from .io import _read_tensor, _read_vars, _TENSOR_MAGIC
    if var_list is not None and not all(isinstance(v, Variable) for v in var_list):
        raise TypeError("load_program_state: var_list must be a list of Variables")
    if os.path.isdir(model_path):
        with _locked(model_path, exclusive=False):
            saved = _SavedDir(model_path)
            if var_list is not None:
                return {k: arr for k, (arr, _) in _read_vars(saved, var_list, None).items()}
            state = {}  # every tensor file of the directory, named after its variable (Fluid's fallback)
            for e in sorted(os.scandir(model_path), key=lambda e: e.name):
                if e.name.startswith(".") or e.name == MANIFEST_FILENAME or not e.is_file():
                    continue
                with open(e.path, "rb") as f:
                    if f.read(len(_TENSOR_MAGIC)) != _TENSOR_MAGIC:
                        continue
                with saved.open(e.name, "variable " + e.name) as r:
                    state[e.name] = _read_tensor(r, None)
                    r.finish()
            return state
    dirname, base = _single_file_save(model_path, var_list, "load_program_state")
    with _locked(dirname, exclusive=False):  # {name: ndarray}, as Fluid's: a LoD is not part of a program state
        return {k: arr for k, (arr, _) in _read_vars(_SavedDir(dirname), var_list, base).items()}


def set_program_state(program, state_dict):
    """Copy `state_dict` ({name: ndarray}) into the persistable variables of `program` in the global scope.
    A shape or dtype that differs from the scope's tensor raises naming the variable (before anything is
    set); variables not in the scope and unused keys are warned about, as in Fluid."""
    _check_program("set_program_state", program)
    if not isinstance(state_dict, dict):
        raise TypeError("set_program_state: state_dict must be a dict of {name: ndarray}, got %s"
                        % type(state_dict).__name__)
    scope = global_scope()
    todo = []
    for var in program.list_vars():
        if not is_persistable(var) or var.name not in state_dict:
            continue
        found = scope.find_var(var.name)
        if found is None or not found.is_initialized():
            warnings.warn("set_program_state: variable %s is not set: it is not in the scope (run the startup "
                          "program first)" % var.name, stacklevel=2)
            continue
        old = np.array(found.get_tensor())
        new = np.asarray(state_dict[var.name])
        if old.shape != new.shape:
            raise ValueError("set_program_state: shape mismatch for variable %s: the program's tensor has shape %s, "
                             "the state has %s" % (var.name, list(old.shape), list(new.shape)))
        if old.dtype != new.dtype:
            raise ValueError("set_program_state: dtype mismatch for variable %s: the program's tensor is %s, the "
                             "state has %s" % (var.name, old.dtype, new.dtype))
        todo.append((found.get_tensor(), new))
    for tensor, new in todo:
        tensor.set(new, tensor._place())
    used = {v.name for v in program.list_vars() if is_persistable(v)}
    unused = sorted(k for k in state_dict if k not in used)
    if unused:
        warnings.warn("set_program_state: these entries are not set, the program has no such persistable "
                      "variable: %s" % " ".join(unused), stacklevel=2)
