"""Saving and loading persistable variables and inference models (Fluid 1.x ``fluid.io`` names).

File format of one saved tensor (little-endian)::

    b"FLTENSOR" | u32 format version (1) | u32 dtype (VarType) | u32 rank | i64 dims[rank]
    | u64 nbytes | u32 crc32(data) | data

A combined file (``filename=...``) is ``b"FLVARS01" | u32 count`` followed by, per variable sorted by
name, ``u32 len(name) | name`` and one tensor record. Every file is written to a temporary name in the
same directory, flushed, fsync'ed and renamed over the target, so a crash mid-save leaves the previous
file intact. Loading checks magic, sizes and the CRC and names the file and variable on any mismatch.
"""
import json
import os
import struct
import tempfile
import zlib

import numpy as np

from . import core
from .executor import global_scope
from .framework import Parameter, Program, Variable, VarType, default_main_program, dtype_to_numpy

__all__ = ["save_vars", "save_params", "save_persistables", "load_vars", "load_params", "load_persistables",
           "save_inference_model", "load_inference_model", "is_parameter", "is_persistable"]

_TENSOR_MAGIC = b"FLTENSOR"
_COMBINED_MAGIC = b"FLVARS01"
_FORMAT_VERSION = 1
MODEL_FILENAME = "__model__"
META_FILENAME = "__model__.meta.json"


def is_parameter(var):
    return isinstance(var, Parameter)


def is_persistable(var):
    if var.type in (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.RAW):
        return False
    return var.persistable


def _atomic_write(path, data):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _encode_tensor(arr, dtype):
    arr = np.ascontiguousarray(arr)
    data = arr.tobytes()
    header = _TENSOR_MAGIC + struct.pack("<III", _FORMAT_VERSION, int(dtype), arr.ndim)
    header += struct.pack("<%dq" % arr.ndim, *arr.shape) if arr.ndim else b""
    return header + struct.pack("<QI", len(data), zlib.crc32(data) & 0xFFFFFFFF) + data


class _Reader:
    def __init__(self, data, path, what):
        self.data, self.pos, self.path, self.what = data, 0, path, what

    def fail(self, msg):
        raise core.EnforceNotMet("cannot load %s from %s: %s" % (self.what, self.path, msg))

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            self.fail("the file is truncated or corrupt (needed %d bytes at offset %d, file has %d)"
                      % (n, self.pos, len(self.data)))
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))


def _decode_tensor(reader):
    if reader.take(8) != _TENSOR_MAGIC:
        reader.fail("not a fluidlite tensor file (bad magic)")
    version, dtype, rank = reader.unpack("<III")
    if version != _FORMAT_VERSION:
        reader.fail("unsupported format version %d" % version)
    if rank > 9:
        reader.fail("corrupt header (rank %d)" % rank)
    dims = list(reader.unpack("<%dq" % rank)) if rank else []
    nbytes, crc = reader.unpack("<QI")
    try:
        np_dtype = dtype_to_numpy(VarType(dtype))
    except (ValueError, KeyError):
        reader.fail("corrupt header (dtype %d)" % dtype)
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) * np_dtype.itemsize != nbytes:
        reader.fail("corrupt header (dims %s, %d bytes)" % (dims, nbytes))
    data = reader.take(nbytes)
    if zlib.crc32(data) & 0xFFFFFFFF != crc:
        reader.fail("checksum mismatch: the data is corrupt")
    return np.frombuffer(data, dtype=np_dtype).reshape(dims).copy(), VarType(dtype)


def _scope_array(scope, var):
    found = scope.find_var(var.name)
    if found is None or not found.is_initialized():
        raise ValueError("cannot save variable %s: it is not in the scope (did you run the startup program?)"
                         % var.name)
    return np.array(found.get_tensor())


def _select(main_program, vars, predicate):
    program = main_program or default_main_program()
    if vars is None:
        vars = [v for v in program.list_vars() if predicate(v)]
    return program, [program.global_block()._var_recursive(v) if isinstance(v, str) else v for v in vars]


def save_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Save `vars` (or those of `main_program` matching `predicate`) from the global scope."""
    program, vars = _select(main_program, vars, predicate or is_persistable)
    scope = global_scope()
    os.makedirs(dirname, exist_ok=True)
    if filename is None:
        for v in vars:
            _atomic_write(os.path.join(dirname, v.name), _encode_tensor(_scope_array(scope, v), v.dtype))
        return
    body = [_COMBINED_MAGIC, struct.pack("<I", len(vars))]
    for v in sorted(vars, key=lambda v: v.name):
        name = v.name.encode()
        body += [struct.pack("<I", len(name)), name, _encode_tensor(_scope_array(scope, v), v.dtype)]
    _atomic_write(os.path.join(dirname, filename), b"".join(body))


def save_params(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise core.EnforceNotMet("cannot load %s: file %s does not exist" % (what, path)) from None


def _store(scope, place, var, arr, dtype, path):
    if dtype != var.dtype:
        raise core.EnforceNotMet("cannot load variable %s from %s: the file holds %s, the program declares %s"
                                 % (var.name, path, dtype.name, var.dtype.name))
    want = list(var.shape)
    if len(want) != arr.ndim or any(w >= 0 and w != a for w, a in zip(want, arr.shape)):
        raise core.EnforceNotMet("cannot load variable %s from %s: the file holds shape %s, the program declares %s"
                                 % (var.name, path, list(arr.shape), want))
    scope.var(var.name).get_tensor().set(arr, place)


def load_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    program, vars = _select(main_program, vars, predicate or is_persistable)
    scope, place = global_scope(), executor.place
    if filename is None:
        for v in vars:
            path = os.path.join(dirname, v.name)
            arr, dtype = _decode_tensor(_Reader(_read(path, "variable " + v.name), path, "variable " + v.name))
            _store(scope, place, v, arr, dtype, path)
        return
    path = os.path.join(dirname, filename)
    reader = _Reader(_read(path, "combined variables"), path, "combined variables")
    if reader.take(8) != _COMBINED_MAGIC:
        reader.fail("not a fluidlite combined-variables file (bad magic)")
    (count,) = reader.unpack("<I")
    loaded = {}
    for _ in range(count):
        (n,) = reader.unpack("<I")
        name = reader.take(n).decode("utf-8", "replace")
        reader.what = "variable " + name
        loaded[name] = _decode_tensor(reader)
    for v in vars:
        if v.name not in loaded:
            raise core.EnforceNotMet("cannot load variable %s: %s does not contain it" % (v.name, path))
        _store(scope, place, v, *loaded[v.name], path)


def load_params(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_persistables(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def _prune_program(program, targets):
    """A test-mode copy of `program` keeping only the ops that `targets` depend on."""
    pruned = program.clone(for_test=True)
    block = pruned.global_block()
    needed = {t.name if isinstance(t, Variable) else t for t in targets}
    ops = list(block.ops)
    keep = [False] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if any(o in needed for o in op.output_arg_names):
            keep[i] = True
            needed.update(op.input_arg_names)
    for i in range(len(ops) - 1, -1, -1):
        if not keep[i]:
            block._remove_op(i)
    for name in list(block.vars):
        if name not in needed:
            block._remove_var(name)
    return pruned


def save_inference_model(dirname, feeded_var_names, target_vars, executor, main_program=None,
                         model_filename=None, params_filename=None, export_for_deployment=True):
    """Save the inference subgraph of `main_program` (pruned to what `target_vars` need) and its
    parameters. Returns the names of the fetch targets."""
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    program = main_program or default_main_program()
    for name in feeded_var_names:
        if program.global_block()._find_var_recursive(name) is None:
            raise ValueError("save_inference_model: feed variable %s is not in the program" % name)
    pruned = _prune_program(program, target_vars)
    for name in feeded_var_names:
        if name not in pruned.global_block().vars:
            raise ValueError("save_inference_model: feed variable %s is not needed by the targets %s"
                             % (name, [t.name for t in target_vars]))
    os.makedirs(dirname, exist_ok=True)
    fetch_names = [t.name for t in target_vars]
    save_persistables(executor, dirname, pruned, params_filename)
    meta = {"format": "fluidlite-inference-model", "version": _FORMAT_VERSION, "feed": list(feeded_var_names),
            "fetch": fetch_names, "params_filename": params_filename}
    _atomic_write(os.path.join(dirname, META_FILENAME), json.dumps(meta, indent=1).encode())
    _atomic_write(os.path.join(dirname, model_filename or MODEL_FILENAME), pruned.serialize_to_string())
    return fetch_names


def load_inference_model(dirname, executor, model_filename=None, params_filename=None):
    """Returns [program, feed_target_names, fetch_targets] and loads the parameters into the scope."""
    model_path = os.path.join(dirname, model_filename or MODEL_FILENAME)
    program = Program.parse_from_string(_read(model_path, "the inference program"))
    meta_path = os.path.join(dirname, META_FILENAME)
    try:
        meta = json.loads(_read(meta_path, "the inference model metadata").decode())
        feed, fetch = meta["feed"], meta["fetch"]
    except (ValueError, KeyError) as e:
        raise core.EnforceNotMet("cannot load the inference model metadata from %s: %s" % (meta_path, e)) from None
    if params_filename is None:
        params_filename = meta.get("params_filename")
    load_persistables(executor, dirname, program, params_filename)
    block = program.global_block()
    return [program, feed, [block.var(n) for n in fetch]]
