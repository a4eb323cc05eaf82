"""Saving and loading persistable variables and inference models (Fluid 1.x ``fluid.io`` names).

Layout of a save directory (Fluid's): one file per variable, named after it (``save_vars`` and friends
with ``filename=None``), or one combined file (``filename=...``); ``save_inference_model`` adds the
program (``__model__`` or ``model_filename``) and ``__model__.meta.json`` (feed and fetch names).
fluidlite adds one file, the manifest ``__fluidlite_manifest__.json``; Fluid opens files by variable
name only and never reads it. See docs/io.md.

File format of one saved tensor (little-endian)::

    b"FLTENSOR" | u32 format version (1) | u32 dtype (VarType) | u32 rank | i64 dims[rank]
    | u64 nbytes | u32 crc32(data) | data

A tensor that holds a LoD is written as format version 2, which adds its LoD after the dims (as Fluid's
tensor files store it)::

    ... i64 dims[rank] | u32 levels | per level: u64 count | u64 offsets[count] | u64 nbytes | ...

A combined file is ``b"FLVARS01" | u32 count`` followed by, per variable sorted by name,
``u32 len(name) | name`` and one tensor record.

**A save is all-or-nothing.** Every file of one save (all the variables, and for an inference model
the program and its metadata too) is written under a temporary name (``.<name>.fltmp-<token>``) and
fsync'ed, and the directory fsync'ed. Then the manifest is replaced atomically (written under a
temporary name, fsync'ed, renamed, the directory fsync'ed) by one that records the size and CRC-32 of
every file of the new version and the temporary name of each file this save wrote: that rename is the
commit point. The temporary files are then renamed over their targets and the directory fsync'ed. A
load reads a listed temporary file where it still exists, so whatever point a save dies at, a load sees
the complete previous version (died before the commit) or the complete new one (after), and it checks
every file it reads against the manifest. The next save finishes the renames of a committed save and
deletes the temporary files of uncommitted ones. Saves hold an exclusive ``flock`` on the directory,
loads a shared one.

Loads read only regular files (a symlink to one is fine), never more bytes than the file has, and
check each header against the program's variable before allocating its data.
"""
import contextlib
import json
import os
import re
import stat
import struct
import warnings
import zlib

import numpy as np

from . import core
from .dataloader import DataLoader, PyReader
from .executor import global_scope
from .framework import Parameter, Program, Variable, VarType, default_main_program, dtype_to_numpy

try:
    import fcntl
except ImportError:  # Windows: no flock; saves and loads of one directory must not overlap there
    fcntl = None

__all__ = ["save_vars", "save_params", "save_persistables", "load_vars", "load_params", "load_persistables",
           "save_inference_model", "load_inference_model", "is_parameter", "is_persistable", "save", "load",
           "load_program_state", "set_program_state", "get_inference_program",
           "DataLoader", "PyReader"]

_TENSOR_MAGIC = b"FLTENSOR"
_COMBINED_MAGIC = b"FLVARS01"
_PROGRAM_MAGIC = (b"FLPROG1\n", b"FLPROG2\n")  # the program format versions (csrc/desc.cc)
_FORMAT_VERSION = 1
_LOD_FORMAT_VERSION = 2  # a tensor record with its LoD
_MAX_LOD_LEVELS = 64
MODEL_FILENAME = "__model__"
META_FILENAME = "__model__.meta.json"
MANIFEST_FILENAME = "__fluidlite_manifest__.json"
_MANIFEST_FORMAT = "fluidlite-save-manifest"
_MANIFEST_VERSION = 1
_TMP_TAG = ".fltmp-"
_TMP_RE = re.compile(r"^\..+\.fltmp-[0-9a-f]{16}$")
# Temporary files of fluidlite before the manifest (tempfile.mkstemp: ".<name>.XXXXXXXX.tmp"); deleted
# only next to a file that a save writes or the manifest lists.
_LEGACY_TMP_RE = re.compile(r"^\.(?P<base>.+)\.[a-z0-9_]{8}\.tmp$")
_O_EXTRA = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def is_parameter(var):
    return isinstance(var, Parameter)


def is_persistable(var):
    if var.type in (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.RAW):
        return False
    return var.persistable


# ---------------------------------------------------------------------------- files and directories

def _fail(what, path, msg):
    raise core.EnforceNotMet("cannot load %s from %s: %s" % (what, path, msg))


def _split_name(name):
    """The path components of a file name relative to the save directory ('/' separates subdirectories,
    as in Fluid, whose save op creates them). Absolute names, '..' and reserved names raise ValueError."""
    parts = name.replace(os.sep, "/").split("/")
    if not name or os.path.isabs(name) or any(p in ("", ".", "..") for p in parts):
        raise ValueError("cannot save %r: not a file name inside the save directory" % name)
    if name == MANIFEST_FILENAME or _TMP_RE.match(parts[-1]):
        raise ValueError("cannot save %r: the name is reserved for fluidlite's save manifest and temporary files"
                         % name)
    return parts


def _path(dirname, name):
    return os.path.join(dirname, *name.split("/"))


def _tmp_name(name, token):
    head, _, base = name.rpartition("/")
    return (head + "/" if head else "") + "." + base + _TMP_TAG + token


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY | _O_EXTRA)
    except OSError:  # Windows cannot open a directory; its renames are as durable as it makes them
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(dirname, exclusive):
    """flock the directory: saves exclusively, loads shared. Where that is impossible (no such directory:
    the load then reports the missing file; no fcntl; a file system without flock) it goes on unlocked."""
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(dirname, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_EXTRA)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            pass
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _write_file(path, chunks):
    """Write `chunks` (bytes-like) to the new file `path` and fsync it; returns (size, crc32)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_EXTRA, 0o666)
    size, crc = 0, 0
    with open(fd, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
            size += len(chunk)
            crc = zlib.crc32(chunk, crc)
        f.flush()
        os.fsync(f.fileno())
    return size, crc & 0xFFFFFFFF


_KIND = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]


def _open_regular(path, what):
    """Open `path` for reading if it is a regular file (after following symlinks); returns (file, size).
    Anything else raises before it is read: a FIFO would block, /dev/zero never ends."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            # O_NONBLOCK: if the path became a FIFO since the stat, open returns instead of waiting for a writer.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _O_EXTRA)
            st = os.fstat(fd)
            mode = st.st_mode
            if stat.S_ISREG(mode):
                return open(fd, "rb"), st.st_size
            os.close(fd)
    except FileNotFoundError:
        raise core.EnforceNotMet("cannot load %s: file %s does not exist" % (what, path)) from None
    except OSError as e:
        _fail(what, path, e.strerror or str(e))
    kind = next((k for test, k in _KIND if test(mode)), "not a regular file")
    _fail(what, path, "it is %s, not a regular file" % kind)


# ---------------------------------------------------------------------------- the manifest

def _body_crc(body):
    return zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()) & 0xFFFFFFFF


def _manifest_error(path, msg):
    raise core.EnforceNotMet(
        "the save manifest %s is corrupt (%s). It holds the checksums of the files in its directory; "
        "delete it to load the files unchecked, or save again into a new directory" % (path, msg))


def _read_manifest(dirname):
    """The manifest of `dirname` as {"files": {name: {"size", "crc32"}}, "temporaries": {name: tmp}}, or None
    when there is none (a directory written by Fluid or by fluidlite before manifests)."""
    path = os.path.join(dirname, MANIFEST_FILENAME)
    if not os.path.lexists(path):
        return None
    f, size = _open_regular(path, "the save manifest")
    with f:
        data = f.read(size)
    try:
        m = json.loads(data.decode("utf-8"))
        body = {k: m[k] for k in ("format", "version", "files", "temporaries")}
        crc = m["crc32"]
    except (ValueError, KeyError, TypeError) as e:
        _manifest_error(path, "%s: %s" % (type(e).__name__, e))
    if body["format"] != _MANIFEST_FORMAT:
        _manifest_error(path, "format %r" % (body["format"],))
    if crc != _body_crc(body):
        _manifest_error(path, "its own checksum does not match")
    if body["version"] != _MANIFEST_VERSION:
        raise core.EnforceNotMet("the save manifest %s has version %r; this fluidlite reads version %d"
                                 % (path, body["version"], _MANIFEST_VERSION))
    files, temporaries = body["files"], body["temporaries"]
    try:
        for name, e in files.items():
            _split_name(name)
            if not (isinstance(e["size"], int) and isinstance(e["crc32"], int)):
                raise ValueError("entry %r" % name)
        for name, tmp in temporaries.items():
            _split_name(name)
            # Only this name's own temporary file: a save renames it, never anything else.
            if name not in files or not isinstance(tmp, str) or not re.fullmatch(
                    re.escape(_tmp_name(name, "")) + "[0-9a-f]{16}", tmp):
                raise ValueError("temporary-file entry %r" % name)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        _manifest_error(path, "bad %s" % e)
    return {"files": files, "temporaries": temporaries}


def _write_manifest(dirname, files, temporaries, token):
    body = {"format": _MANIFEST_FORMAT, "version": _MANIFEST_VERSION, "files": files, "temporaries": temporaries}
    body["crc32"] = _body_crc(body)
    tmp = os.path.join(dirname, _tmp_name(MANIFEST_FILENAME, token))
    _write_file(tmp, [json.dumps(body, sort_keys=True, indent=1).encode()])
    os.replace(tmp, os.path.join(dirname, MANIFEST_FILENAME))
    _fsync_dir(dirname)


def _roll_forward_and_clean(dirname, names):
    """Before a save: finish the renames of a committed save that was interrupted, then delete the
    temporary files of uncommitted ones. Returns the manifest's file entries (those still on disk)."""
    m = _read_manifest(dirname)
    files = dict(m["files"]) if m else {}
    listed = set()
    for name, tmp in (m["temporaries"] if m else {}).items():
        tmp_path = _path(dirname, tmp)
        listed.add(tmp_path)
        if os.path.lexists(tmp_path):
            os.replace(tmp_path, _path(dirname, name))
    known = set(files) | set(names) | {MANIFEST_FILENAME}
    by_dir = {}
    for name in known:
        head, _, base = name.rpartition("/")
        by_dir.setdefault(head, set()).add(base)
    for head, bases in by_dir.items():
        d = _path(dirname, head) if head else dirname
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            legacy = _LEGACY_TMP_RE.match(e.name)
            if (_TMP_RE.match(e.name) or (legacy and legacy.group("base") in bases)) and \
                    e.path not in listed and e.is_file(follow_symlinks=False):
                try:
                    os.unlink(e.path)
                except OSError:
                    pass
    return {n: e for n, e in files.items() if os.path.lexists(_path(dirname, n))}


def _save_files(dirname, items):
    """Save `items` ([(name, chunks)] where chunks is an iterable of bytes-like, produced lazily) into
    `dirname` as one all-or-nothing version (see the module docstring)."""
    os.makedirs(dirname, exist_ok=True)
    names = [n for n, _ in items]
    for n in names:
        _split_name(n)
    if len(set(names)) != len(names):
        raise ValueError("cannot save two files named %s" % sorted({n for n in names if names.count(n) > 1}))
    token = os.urandom(8).hex()
    with _locked(dirname, exclusive=True):
        files = _roll_forward_and_clean(dirname, names)
        temporaries, written, dirs = {}, [], {dirname}
        try:
            for name, chunks in items:
                tmp = _tmp_name(name, token)
                tmp_path = _path(dirname, tmp)
                d = os.path.dirname(tmp_path)
                if d not in dirs:
                    os.makedirs(d, exist_ok=True)
                    dirs.add(d)
                written.append(tmp_path)
                size, crc = _write_file(tmp_path, chunks)
                files[name] = {"size": size, "crc32": crc}
                temporaries[name] = tmp
            for d in dirs:  # the temporary files' names are durable before the manifest points at them
                _fsync_dir(d)
        except BaseException:
            for p in written:  # not committed: the previous version stands; drop this one's files
                try:
                    os.unlink(p)
                except OSError:
                    pass
            raise
        # The commit point: from here on a load gets this version. The manifest keeps listing the
        # temporary files (a load reads one where it still exists); the next save's manifest replaces it.
        _write_manifest(dirname, files, temporaries, token)
        for name, tmp in temporaries.items():
            os.replace(_path(dirname, tmp), _path(dirname, name))
        for d in dirs:  # so that Fluid, which reads no manifest, sees the new files after a power loss too
            _fsync_dir(d)


class _SavedDir:
    """A save directory being loaded: where each file is (a committed save's temporary file if it was
    not renamed yet) and what the manifest says it holds."""

    def __init__(self, dirname):
        self.dirname = dirname
        self.manifest = _read_manifest(dirname)

    def expected(self, name):
        return self.manifest["files"].get(name) if self.manifest else None

    def open(self, name, what):
        """A _FileReader over file `name`, checked against the manifest when it lists the file."""
        path = _path(self.dirname, name)
        if self.manifest and name in self.manifest["temporaries"]:
            tmp_path = _path(self.dirname, self.manifest["temporaries"][name])
            if os.path.lexists(tmp_path):
                path = tmp_path
        f, size = _open_regular(path, what)
        expected = self.expected(name)
        if expected is not None and expected["size"] != size:
            f.close()
            _fail(what, path, "the file has %d bytes, the save manifest %s records %d: the file is truncated or "
                  "was replaced after the save" % (size, os.path.join(self.dirname, MANIFEST_FILENAME),
                                                   expected["size"]))
        return _FileReader(f, size, path, what, expected, os.path.join(self.dirname, MANIFEST_FILENAME))

    def read_bytes(self, name, what):
        with self.open(name, what) as r:
            data = r.take(r.size)
            r.finish()
        return data


class _FileReader:
    """Reads a file front to back, never past the size it had when opened, keeping a CRC-32 of what it
    read; finish() checks it against the manifest's."""

    def __init__(self, f, size, path, what, expected, manifest_path):
        self.f, self.size, self.path, self.what = f, size, path, what
        self.expected, self.manifest_path = expected, manifest_path
        self.pos, self.crc = 0, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def fail(self, msg):
        _fail(self.what, self.path, msg)

    def _need(self, n):
        if n < 0 or n > self.size - self.pos:
            self.fail("the file is truncated or corrupt (needed %d bytes at offset %d, file has %d)"
                      % (n, self.pos, self.size))

    def take(self, n):
        self._need(n)
        out = self.f.read(n)
        if len(out) != n:
            self.fail("the file shrank while it was read")
        self.pos += n
        if self.expected is not None:
            self.crc = zlib.crc32(out, self.crc)
        return out

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def read_into(self, arr):
        buf = memoryview(arr.reshape(-1).view(np.uint8))
        self._need(len(buf))
        done = 0
        while done < len(buf):
            n = self.f.readinto(buf[done:])
            if not n:
                self.fail("the file shrank while it was read")
            done += n
        self.pos += done
        if self.expected is not None:
            self.crc = zlib.crc32(buf, self.crc)

    def finish(self):
        if self.pos != self.size:
            self.fail("%d unexpected bytes after the data at offset %d" % (self.size - self.pos, self.pos))
        if self.expected is not None and self.crc & 0xFFFFFFFF != self.expected["crc32"]:
            self.fail("checksum mismatch: the CRC-32 of the file is %08x, the save manifest %s records %08x; the "
                      "file is corrupt or was replaced after the save (save again, or delete the manifest to "
                      "load unchecked files)" % (self.crc & 0xFFFFFFFF, self.manifest_path, self.expected["crc32"]))


# ---------------------------------------------------------------------------- tensors

def _tensor_chunks(arr, lod, dtype):
    arr = np.ascontiguousarray(arr)
    data = memoryview(arr.reshape(-1).view(np.uint8))
    version = _LOD_FORMAT_VERSION if lod else _FORMAT_VERSION
    header = _TENSOR_MAGIC + struct.pack("<III", version, int(dtype), arr.ndim)
    header += struct.pack("<%dq" % arr.ndim, *arr.shape) if arr.ndim else b""
    if lod:
        header += struct.pack("<I", len(lod))
        for level in lod:
            header += struct.pack("<Q%dQ" % len(level), len(level), *level)
    return [header + struct.pack("<QI", len(data), zlib.crc32(data) & 0xFFFFFFFF), data]


def _read_lod(reader, dims):
    """The LoD block of a version-2 record, checked: the level count and each level's length against what is
    left of the file (before reading it), then the offsets (from 0, never decreasing, each level ending at the
    next one's entries, the last at the tensor's rows), so a crafted file cannot hand ops a LoD that reads
    past the tensor."""
    (levels,) = reader.unpack("<I")
    if levels == 0 or levels > _MAX_LOD_LEVELS:
        reader.fail("corrupt header (%d LoD levels)" % levels)
    lod = []
    for _ in range(levels):
        (n,) = reader.unpack("<Q")
        if n < 2 or n * 8 > reader.size - reader.pos:
            reader.fail("corrupt header (a LoD level of %d offsets)" % n)
        lod.append(list(reader.unpack("<%dQ" % n)))
    problem = core.lod_problem(lod, dims[0] if dims else 0)
    if problem:
        reader.fail("corrupt LoD: %s" % problem)
    return lod


def _check_against_var(reader, var, dtype, dims):
    if var is None:
        return
    if dtype != var.dtype:
        reader.fail("the file holds %s, the program declares %s" % (dtype.name, var.dtype.name))
    want = list(var.shape)
    if len(want) != len(dims) or any(w >= 0 and w != a for w, a in zip(want, dims)):
        reader.fail("the file holds shape %s, the program declares %s" % (list(dims), want))


_NP_DTYPES = {}  # VarType value -> numpy dtype, filled on first use


def _np_dtype(value):
    if not _NP_DTYPES:
        for vt in VarType.__members__.values():
            try:
                _NP_DTYPES[int(vt)] = (vt, dtype_to_numpy(vt))
            except (ValueError, KeyError, TypeError):
                pass
    return _NP_DTYPES.get(value, (None, None))


def _read_tensor(reader, var, with_lod=False):
    """One tensor record: its array, or (array, LoD) with `with_lod`. The header is checked (and against
    `var`, when given) before the data is allocated, and the data's size against what is left of the file."""
    magic, version, dtype, rank = struct.unpack("<8sIII", reader.take(20))
    if magic != _TENSOR_MAGIC:
        reader.fail("not a fluidlite tensor file (bad magic)")
    if version not in (_FORMAT_VERSION, _LOD_FORMAT_VERSION):
        reader.fail("unsupported format version %d" % version)
    if rank > 9:
        reader.fail("corrupt header (rank %d)" % rank)
    dims = list(struct.unpack("<%dq" % rank, reader.take(8 * rank)))
    lod = _read_lod(reader, dims) if version == _LOD_FORMAT_VERSION else []
    nbytes, crc = struct.unpack("<QI", reader.take(12))
    vartype, np_dtype = _np_dtype(dtype)
    if np_dtype is None:
        reader.fail("corrupt header (dtype %d)" % dtype)
    count = 1
    for d in dims:
        count *= d
    if any(d < 0 for d in dims) or count * np_dtype.itemsize != nbytes:
        reader.fail("corrupt header (dims %s, %d bytes)" % (dims, nbytes))
    _check_against_var(reader, var, vartype, dims)
    if nbytes > reader.size - reader.pos:
        reader.fail("the file is truncated or corrupt (the header announces %d bytes of data at offset %d, the "
                    "file has %d)" % (nbytes, reader.pos, reader.size))
    arr = np.empty(dims, dtype=np_dtype)
    reader.read_into(arr)
    # With a manifest entry the whole file's CRC (checked by finish) covers the data; else check the record's.
    if reader.expected is None and zlib.crc32(memoryview(arr.reshape(-1).view(np.uint8))) & 0xFFFFFFFF != crc:
        reader.fail("checksum mismatch: the data is corrupt")
    return (arr, lod) if with_lod else arr


def _scope_tensor(scope, var):
    """(array, LoD) of `var` in `scope`."""
    found = scope.find_var(var.name)
    if found is None or not found.is_initialized():
        raise ValueError("cannot save variable %s: it is not in the scope (did you run the startup program?)"
                         % var.name)
    t = found.get_tensor()
    return np.array(t), t.lod()


def _select(main_program, vars, predicate):
    program = main_program or default_main_program()
    if vars is None:
        vars = [v for v in program.list_vars() if predicate(v)]
    out, seen = [], set()
    for v in vars:
        v = program.global_block()._var_recursive(v) if isinstance(v, str) else v
        if v.name not in seen:
            seen.add(v.name)
            out.append(v)
    return program, out


def _var_items(vars, filename):
    """The (name, chunks) items of a save of `vars` from the global scope: one file per variable, or the
    combined file `filename`. Chunks are produced while the file is written (one variable in memory at a
    time); every variable is checked to be in the scope first, so a missing one fails before any write."""
    scope = global_scope()
    for v in vars:
        found = scope.find_var(v.name)
        if found is None or not found.is_initialized():
            _scope_tensor(scope, v)  # raises the error
    if filename is None:
        return [(v.name, _lazy(lambda v=v: _tensor_chunks(*_scope_tensor(scope, v), v.dtype))) for v in vars]

    def combined():
        yield _COMBINED_MAGIC + struct.pack("<I", len(vars))
        for v in sorted(vars, key=lambda v: v.name):
            name = v.name.encode()
            yield struct.pack("<I", len(name)) + name
            arr, lod = _scope_tensor(scope, v)
            yield from _tensor_chunks(arr, lod, v.dtype)

    return [(filename, combined())]


def _lazy(make):
    yield from make()


def save_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Save `vars` (or those of `main_program` matching `predicate`) from the global scope, all or
    nothing: after a crash at any point a load sees either the previous save or this one."""
    _, vars = _select(main_program, vars, predicate or is_persistable)
    _save_files(dirname, _var_items(vars, filename))


def save_params(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def _read_vars(saved, vars, filename):
    """{name: (ndarray, LoD)} of `vars` read from `saved` (a _SavedDir), every file checked; nothing is stored."""
    if filename is None:
        out = {}
        for v in vars:
            with saved.open(v.name, "variable " + v.name) as r:
                out[v.name] = _read_tensor(r, v, with_lod=True)
                r.finish()
        return out
    by_name = {v.name: v for v in vars}
    loaded = {}
    with saved.open(filename, "combined variables") as r:
        if r.take(8) != _COMBINED_MAGIC:
            r.fail("not a fluidlite combined-variables file (bad magic)")
        (count,) = r.unpack("<I")
        for _ in range(count):
            (n,) = r.unpack("<I")
            name = r.take(n).decode("utf-8", "replace")
            r.what = "variable " + name
            arr = _read_tensor(r, by_name.get(name), with_lod=True)
            if name in by_name:
                loaded[name] = arr
        r.what = "combined variables"
        r.finish()
    for v in vars:
        if v.name not in loaded:
            raise core.EnforceNotMet("cannot load variable %s: %s does not contain it" % (v.name, r.path))
    return loaded


def _store(arrays, vars, place):
    """Set each variable of `vars` in the global scope to its (array, LoD) from `arrays`."""
    scope = global_scope()
    for v in vars:
        arr, lod = arrays[v.name]
        t = scope.var(v.name).get_tensor()
        t.set_lod([])  # set() keeps a tensor's LoD: the old one must not be checked against the new rows
        t.set(arr, place)
        t.set_lod(lod)


def load_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Load `vars` (or those of `main_program` matching `predicate`) into the global scope. Every file is
    read and checked (against the save manifest where there is one) before any variable is set."""
    _, vars = _select(main_program, vars, predicate or is_persistable)
    with _locked(dirname, exclusive=False):
        arrays = _read_vars(_SavedDir(dirname), vars, filename)
    _store(arrays, vars, executor.place)


def load_params(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_persistables(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def _prune_program(program, targets):
    """A test-mode copy of `program` keeping only the ops that `targets` depend on."""
    pruned = program.clone(for_test=True)
    pruned._readers = ()  # the inference program is fed, not read (Fluid prunes the read op)
    block = pruned.global_block()
    needed = {t.name if isinstance(t, Variable) else t for t in targets}
    ops = list(block.ops)
    keep = [False] * len(ops)
    kept_vars = set(needed)
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if any(o in needed for o in op.output_arg_names):
            keep[i] = True
            needed.update(op.input_arg_names)
            # Every output of a kept op stays declared, read or not (batch_norm's SavedMean/SavedVariance).
            kept_vars.update(op.input_arg_names)
            kept_vars.update(op.output_arg_names)
    for i in range(len(ops) - 1, -1, -1):
        if not keep[i]:
            block._remove_op(i)
    for name in list(block.vars):
        if name not in kept_vars:
            block._remove_var(name)
    return pruned


def save_inference_model(dirname, feeded_var_names, target_vars, executor, main_program=None,
                         model_filename=None, params_filename=None, export_for_deployment=True,
                         program_only=False):
    """Save the inference subgraph of `main_program` (pruned to what `target_vars` need) and its
    parameters, all or nothing (program, metadata and parameters are one version). Returns the names
    of the fetch targets. As in Fluid 1.8: export_for_deployment=False saves the whole program unpruned
    as ``<model_filename>.main_program`` with every persistable (load_inference_model does not read it);
    program_only=True saves no parameters (with a warning); params_filename keeps only its base name."""
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    elif not isinstance(feeded_var_names, (list, tuple)) or not all(isinstance(n, str) for n in feeded_var_names):
        raise ValueError("save_inference_model: feeded_var_names should be a list of str, got %r"
                         % (feeded_var_names,))
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    elif not isinstance(target_vars, (list, tuple)) or not target_vars or \
            not all(isinstance(v, Variable) for v in target_vars):
        raise ValueError("save_inference_model: target_vars should be a Variable or a non-empty list of Variables, "
                         "got %r" % (target_vars,))
    if main_program is not None and not isinstance(main_program, Program):
        raise TypeError("save_inference_model: main_program should be a Program or None, got %s"
                        % type(main_program).__name__)
    program = main_program or default_main_program()
    for name in feeded_var_names:
        if program.global_block()._find_var_recursive(name) is None:
            raise ValueError("save_inference_model: feed variable %s is not in the program" % name)
    if params_filename is not None:
        params_filename = os.path.basename(params_filename)
    model_name = model_filename or MODEL_FILENAME
    if export_for_deployment:
        saved = _prune_program(program, target_vars)
        for name in feeded_var_names:
            if name not in saved.global_block().vars:
                raise ValueError("save_inference_model: feed variable %s is not needed by the targets %s"
                                 % (name, [t.name for t in target_vars]))
    else:
        saved, model_name = program, model_name + ".main_program"
    fetch_names = [t.name for t in target_vars]
    meta = {"format": "fluidlite-inference-model", "version": _FORMAT_VERSION, "feed": list(feeded_var_names),
            "fetch": fetch_names, "params_filename": params_filename}
    items = []
    if program_only:
        warnings.warn("save_inference_model: program_only=True, the parameters of the program are not saved",
                      stacklevel=2)
    else:
        _, params = _select(saved, None, is_persistable)
        items = _var_items(params, params_filename)
    items.append((META_FILENAME, [json.dumps(meta, indent=1).encode()]))
    items.append((model_name, [saved.serialize_to_string()]))
    _save_files(dirname, items)
    return fetch_names


def load_inference_model(dirname, executor, model_filename=None, params_filename=None):
    """Returns [program, feed_target_names, fetch_targets] and loads the parameters into the scope.
    The program file is checked against the save manifest; a fluidlite program without one (saved
    before manifests, or the manifest was deleted) loads with a warning."""
    model_name = model_filename or MODEL_FILENAME
    with _locked(dirname, exclusive=False):
        saved = _SavedDir(dirname)
        model_bytes = saved.read_bytes(model_name, "the inference program")
        meta_bytes = saved.read_bytes(META_FILENAME, "the inference model metadata")
        model_path = _path(dirname, model_name)
        if saved.expected(model_name) is None and model_bytes.startswith(_PROGRAM_MAGIC):
            warnings.warn("%s has no checksum: %s has no save manifest listing it (saved by an older fluidlite, "
                          "or the manifest was deleted), so a corrupt program would go unnoticed; save the model "
                          "again to add one" % (model_path, dirname), stacklevel=2)
        try:
            program = Program.parse_from_string(model_bytes)
        except core.EnforceNotMet as e:
            raise core.EnforceNotMet("cannot load the inference program from %s: %s" % (model_path, e)) from None
        meta_path = _path(dirname, META_FILENAME)
        try:
            meta = json.loads(meta_bytes.decode())
            feed, fetch = meta["feed"], meta["fetch"]
        except (ValueError, KeyError, TypeError) as e:
            raise core.EnforceNotMet("cannot load the inference model metadata from %s: %s"
                                     % (meta_path, e)) from None
        if params_filename is None:
            params_filename = meta.get("params_filename")
        _, params = _select(program, None, is_persistable)
        arrays = _read_vars(saved, params, params_filename)
    _store(arrays, params, executor.place)
    # BuildStrategy.inference_optimize=None (the default) applies the inference passes to this program
    # (batch_norm folding, fc and conv + bias + activation fusion: compiler.passes_for).
    program._is_inference = True
    block = program.global_block()
    return [program, feed, [block.var(n) for n in fetch]]


def get_inference_program(target_vars, main_program=None):
    """The test-mode copy of `main_program` pruned to what `target_vars` need (what save_inference_model
    saves)."""
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    return _prune_program(main_program or default_main_program(), target_vars)


# fluid.save / fluid.load (Fluid 1.6's .pdparams/.pdopt/.pdmodel) live in their own module; fluid.io has them.
from .program_state import load, load_program_state, save, set_program_state  # noqa: E402,F401

# Fluid 1.6+ also exports paddle.batch and the paddle.reader decorators from fluid.io.
from .batch import batch  # noqa: E402
from .reader.decorator import (  # noqa: E402,F401
    ComposeNotAligned, Fake, PipeReader, buffered, cache, chain, compose, firstn, map_readers, multiprocess_reader,
    shuffle, xmap_readers,
)
from .reader import decorator as _decorator  # noqa: E402

__all__ += ["batch"] + _decorator.__all__
