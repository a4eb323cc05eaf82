"""Feeding from Python generators: ``fluid.io.DataLoader``, ``fluid.io.PyReader`` and the reader objects of
``layers.py_reader`` (Fluid 1.3-1.8).

One background thread per epoch runs the user's generator and prepares each batch (contiguous arrays of the
variable's dtype, shapes checked against the feed variables) while the executor runs with the GIL released.
Prepared batches wait in a queue of ``capacity`` batches (``_BatchQueue``; closing it wakes both sides, so
no path blocks forever). The worker references only the queue, the generator and the converter, never the
loader: an abandoned loader is collected and its finalizer closes the queue, which ends the thread.

Iterable loaders yield, per step, one dict name -> LoDTensor per place (a list of LoDTensors with
``return_list``). Non-iterable ones (and py_reader) bind themselves to their program (``Program._readers``,
kept by ``clone``, dropped by pruning for inference): ``Executor.run`` then takes the next batch from each
started reader and raises ``core.EOFException`` when one runs dry.
"""
import collections
import itertools
import logging
import threading
import weakref

import numpy as np

from . import core, unique_name
from .batch import batch
from .data_feeder import _SlotConverter
from .framework import Variable, convert_np_dtype_to_dtype_, default_main_program, dtype_to_numpy

__all__ = ["DataLoader", "PyReader"]

_log = logging.getLogger("fluidlite.dataloader")
_PREPARE_EVENT = "DataLoader::prepare_batch"


# ----------------------------------------------------------------------------------------- the queue

class _BatchQueue:
    """A bounded FIFO with Fluid's LoDTensorBlockingQueue semantics: ``push`` waits for room and returns
    False once closed; ``pop`` waits for an item and returns ``_CLOSED`` once closed and empty."""

    def __init__(self, capacity):
        self._items = collections.deque()
        self._capacity = capacity
        self._closed = False
        self._cond = threading.Condition()

    def push(self, item):
        with self._cond:
            while len(self._items) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def pop(self):
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            if not self._items:
                return _CLOSED
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self, drop=False):
        with self._cond:
            self._closed = True
            if drop:
                self._items.clear()
            self._cond.notify_all()

    def size(self):
        return len(self._items)


_CLOSED = object()
_END = object()  # pushed after the generator's last batch


class _Failure:
    """The generator's (or the converter's) exception, re-raised in the consumer with its traceback."""

    def __init__(self, exc):
        self.exc = exc


class _Epoch:
    """One pass over the generator: the worker thread and its queue."""

    def __init__(self, source, prepare, capacity, name):
        self.queue = _BatchQueue(capacity)
        self.thread = threading.Thread(target=_work, args=(source, prepare, self.queue), name=name, daemon=True)
        self.thread.start()

    def close(self):
        self.queue.close(drop=True)
        if self.thread is not threading.current_thread():
            self.thread.join()


def _prepare_traced(prepare, batch):
    """prepare(batch) inside the profiler range DataLoader::prepare_batch (one C++ call when it is off)."""
    token = core.push_event(_PREPARE_EVENT) if core.is_profiler_enabled() else -1
    try:
        return prepare(batch)
    finally:
        core.pop_event(token)


def _work(source, prepare, queue):
    """The worker: generator -> prepared batch -> queue. Holds no reference to the loader."""
    try:
        for batch in source():
            if queue._closed:
                return
            item = batch if prepare is None else _prepare_traced(prepare, batch)
            if not queue.push(item):
                return
        queue.push(_END)
    except BaseException as exc:  # noqa: BLE001  (handed to the consumer, which re-raises it)
        _log.warning("Your reader has raised an exception!")
        queue.push(_Failure(exc))
    finally:
        queue.close()


# ------------------------------------------------------------------------------------ converting data

class _Slot:
    """What a feed variable expects: name, declared shape (-1 = any), numpy dtype, lod level; and the variable
    (a lod_level > 0 slot's samples go through DataFeeder's conversion)."""
    __slots__ = ("name", "shape", "dtype", "lod_level", "var")

    def __init__(self, var):
        self.name, self.shape, self.lod_level = var.name, tuple(int(d) for d in var.shape), int(var.lod_level or 0)
        self.dtype = np.dtype(dtype_to_numpy(convert_np_dtype_to_dtype_(var.dtype)))
        self.var = var


def _slots_of(feed_list, caller):
    slots = []
    for v in feed_list:
        if not isinstance(v, Variable):
            raise TypeError("%s: feed_list items must be Variables (from fluid.data or fluid.layers.data), got %s"
                            % (caller, type(v).__name__))
        slots.append(_Slot(v))
    return slots


def _compatible(shape, declared):
    return len(shape) == len(declared) and all(d < 0 or d == s for s, d in zip(shape, declared))


def _prepare_batch(slots, batch, caller):
    """One batch from a batch generator (one item per feed variable) -> contiguous arrays in feed order.
    Same-kind dtypes (float64 -> float32, int32 -> int64) are cast to the variable's; across kinds the data's
    dtype stays, as when fed to Executor.run. A rank mismatch with the same number of elements is reshaped
    to the declared shape; anything else that contradicts a declared dimension is an error."""
    if isinstance(batch, (np.ndarray, core.LoDTensor)):
        batch = [batch]
    try:
        items = list(batch)
    except TypeError:
        raise TypeError("%s: a batch must be a list or tuple with one array per feed variable (%s), got %s"
                        % (caller, ", ".join(s.name for s in slots), type(batch).__name__)) from None
    if len(items) != len(slots):
        raise ValueError("%s: a batch has %d items but there are %d feed variables (%s)"
                         % (caller, len(items), len(slots), ", ".join(s.name for s in slots)))
    out = []
    for slot, item in zip(slots, items):
        if isinstance(item, core.LoDTensor):
            if item.lod():
                out.append(item)  # a LoD batch goes through as built (its checks are the ops')
                continue
            item = item._share_numpy()
        arr = np.asarray(item)
        if arr.dtype == object:
            raise TypeError("%s: the data for variable '%s' is not a regular array (nested lists of different "
                            "lengths?); build a LoDTensor with fluid.create_lod_tensor for sequence data"
                            % (caller, slot.name))
        if arr.dtype != slot.dtype and arr.dtype.kind == slot.dtype.kind:
            arr = arr.astype(slot.dtype)
        if not _compatible(arr.shape, slot.shape):
            fixed = int(np.prod([d for d in slot.shape if d >= 0]))
            if len(arr.shape) != len(slot.shape) and slot.shape.count(-1) == 1 and fixed and arr.size % fixed == 0:
                arr = arr.reshape(slot.shape)
            else:
                raise ValueError("%s: variable '%s' expects shape %s (-1: any), got data of shape %s"
                                 % (caller, slot.name, list(slot.shape), list(arr.shape)))
        out.append(np.ascontiguousarray(arr))
    return out


def _samples_to_batch(slots, samples, caller):
    """A list of samples (one item per feed variable each) -> one batch. A lod_level > 0 variable's items are
    nested sequences, converted as fluid.DataFeeder converts them (Fluid's set_sample_list_generator runs a
    DataFeeder): a LoDTensor whose recursive sequence lengths are the items' lengths. A lod_level 0 variable's
    items are stacked with np.array in the variable's dtype (same-kind casts only) and reshaped to its shape."""
    columns = [[] for _ in slots]
    converters = [_SlotConverter(s.var, core.CPUPlace(), caller) if s.lod_level else None for s in slots]
    for i, sample in enumerate(samples):
        if len(sample) != len(slots):
            raise ValueError("%s: sample %d of a batch has %d items but there are %d feed variables (%s)"
                             % (caller, i, len(sample), len(slots), ", ".join(s.name for s in slots)))
        for col, conv, item in zip(columns, converters, sample):
            if conv is not None:
                conv.feed(i, item)
            else:
                col.append(item)
    out = []
    for slot, col, conv in zip(slots, columns, converters):
        if conv is not None:
            out.append(conv.done())
            continue
        arr = np.array(col)
        if arr.dtype == object:
            raise TypeError("%s: the samples for variable '%s' do not stack into a regular array (different "
                            "shapes?)" % (caller, slot.name))
        if arr.dtype != slot.dtype:
            if not np.can_cast(arr.dtype, slot.dtype, "same_kind"):
                raise TypeError("%s: variable '%s' is %s but its samples are %s (casting would lose values)"
                                % (caller, slot.name, slot.dtype, arr.dtype))
            arr = arr.astype(slot.dtype)
        shape = (-1,) + slot.shape[1:] if slot.shape and slot.shape[0] < 0 else slot.shape
        if shape and not _compatible(arr.shape, shape):
            fixed = int(np.prod([d for d in shape if d >= 0]))
            if list(shape).count(-1) <= 1 and fixed and arr.size % fixed == 0 and \
                    (-1 in shape or arr.size == fixed):
                arr = arr.reshape(shape)
            else:
                raise ValueError("%s: variable '%s' expects samples of shape %s, got %s (a batch of %d)"
                                 % (caller, slot.name, list(slot.shape[1:]), list(arr.shape[1:]), len(col)))
        out.append(np.ascontiguousarray(arr))
    return out


def _as_tensor(value):
    if isinstance(value, core.LoDTensor):
        return value
    t = core.LoDTensor()
    t.set(value, core.cpu_place())
    return t


# -------------------------------------------------------------------------------- the generator loader

class DataLoader:
    """Fluid 1.5+'s ``fluid.io.DataLoader``; ``from_generator`` is the form fluidlite has."""

    @staticmethod
    def from_generator(feed_list=None, capacity=None, use_double_buffer=True, iterable=True, return_list=False,
                       use_multiprocess=False, drop_last=True):
        """A loader fed by a Python generator (see the module docstring). ``use_multiprocess`` is
        dygraph-only in Fluid and ignored in static mode, as here. ``drop_last`` drops a trailing group of
        batches smaller than the number of places (with one place, nothing)."""
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list, drop_last)

    @staticmethod
    def from_dataset(dataset, places, drop_last=True):
        raise NotImplementedError("DataLoader.from_dataset: fluid.Dataset (InMemoryDataset/QueueDataset) is a "
                                  "Fluid 1.x API not implemented in fluidlite; see docs/compat.md")


class GeneratorLoader:
    _ids = itertools.count()

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True, return_list=False,
                 drop_last=True, _caller="DataLoader"):
        if not capacity:
            raise ValueError("Please give value to capacity.")
        if not feed_list:
            raise Exception("Feed list must be given under static mode.")
        if int(capacity) < 1:
            raise ValueError("%s: capacity must be a positive number of batches, got %r" % (_caller, capacity))
        self._caller = _caller
        self._feed_list = list(feed_list)
        self._slots = _slots_of(self._feed_list, _caller)
        self._capacity = int(capacity)
        self._use_double_buffer = bool(use_double_buffer)
        self._iterable = bool(iterable)
        self._return_list = bool(return_list)
        self._drop_last = bool(drop_last)
        self._batch_source = None   # () -> iterator of raw batches
        self._prepare = None        # raw batch -> list of arrays in feed order
        self._places = None
        self._epoch = None
        self._finalizer = None
        self._name = "%s_%d" % (_caller, next(GeneratorLoader._ids))
        if not self._iterable:
            _bind(self._program_of_feed_list(), self)

    def _program_of_feed_list(self):
        """Where the reader binds: the program of the feed variables (Fluid appends its read op to the
        default main program, which is that program whenever the loader is built under its guard)."""
        programs = {id(v.block.program): v.block.program for v in self._feed_list}
        if len(programs) != 1:
            raise ValueError("%s: the feed variables belong to %d different programs (%s)" % (
                self._caller, len(programs), ", ".join(v.name for v in self._feed_list)))
        return next(iter(programs.values()))

    # --- properties Fluid has
    @property
    def iterable(self):
        return self._iterable

    @property
    def queue(self):
        """The queue of prepared batches of the running epoch (None when not running)."""
        return self._epoch.queue if self._epoch is not None else None

    # --- data sources
    def set_sample_generator(self, reader, batch_size, drop_last=True, places=None):
        """`reader` yields one sample (one item per feed variable); batches of `batch_size` are formed here."""
        if not batch_size or int(batch_size) <= 0:
            raise ValueError("%s.set_sample_generator: batch_size must be larger than 0, got %r"
                             % (self._caller, batch_size))
        self._check_reader(reader, "set_sample_generator")
        return self.set_sample_list_generator(batch(reader, int(batch_size), drop_last), places)

    def set_sample_list_generator(self, reader, places=None):
        """`reader` yields a list of samples per batch (what ``paddle.batch`` makes)."""
        self._check_reader(reader, "set_sample_list_generator")
        slots, caller = self._slots, self._caller
        self._set_source(reader, lambda samples: _prepare_batch(slots, _samples_to_batch(slots, samples, caller),
                                                                caller), places)
        return self

    def set_batch_generator(self, reader, places=None):
        """`reader` yields one batch per step: a list/tuple with one array (or LoDTensor) per feed variable."""
        self._check_reader(reader, "set_batch_generator")
        slots, caller = self._slots, self._caller
        self._set_source(reader, lambda batch: _prepare_batch(slots, batch, caller), places)
        return self

    def _check_reader(self, reader, method):
        if not callable(reader):
            raise TypeError("%s.%s: reader must be a callable that returns an iterator (a generator function), "
                            "got %s" % (self._caller, method, type(reader).__name__))

    def _set_source(self, reader, prepare, places):
        if self._iterable:
            if places is None:
                raise ValueError("Places cannot be None when DataLoader is iterable")
            places = list(places) if isinstance(places, (list, tuple)) else [places]
            if not places:
                raise ValueError("%s: places is an empty list" % self._caller)
            self._places = places
        elif places is not None:
            _log.info("places would be ommited when DataLoader is not iterable")
        self._batch_source, self._prepare = reader, prepare

    # --- running epochs
    def _start_epoch(self):
        if self._batch_source is None:
            raise RuntimeError("%s: no data source: call set_sample_generator, set_sample_list_generator or "
                               "set_batch_generator first" % self._caller)
        self._stop_epoch()
        prepare = self._prepare
        if self._iterable:
            names, as_list = [s.name for s in self._slots], self._return_list
            base = prepare

            def prepare(batch):
                tensors = [_as_tensor(a) for a in base(batch)]
                return tensors if as_list else dict(zip(names, tensors))
        if not self._use_double_buffer:
            self._late_prepare, prepare = prepare, None
        else:
            self._late_prepare = None
        self._epoch = _Epoch(self._batch_source, prepare, self._capacity, self._name)
        # An abandoned loader's epoch only has its queue closed (the worker then ends after its current
        # item): garbage collection and interpreter exit never wait on a user's generator.
        self._finalizer = weakref.finalize(self, self._epoch.queue.close, True)
        self._finalizer.atexit = False

    def _stop_epoch(self):
        """Close the epoch's queue and join its worker (it stops after the item it is producing)."""
        if self._epoch is not None:
            self._finalizer.detach()
            epoch, self._epoch, self._finalizer = self._epoch, None, None
            epoch.close()

    def _next_batch(self):
        """The next prepared batch, or _END/_CLOSED; re-raises the worker's exception."""
        item = self._epoch.queue.pop()
        if isinstance(item, _Failure):
            self._stop_epoch()
            raise item.exc.with_traceback(item.exc.__traceback__)
        if item is _END or item is _CLOSED:
            return _END
        if self._late_prepare is not None:  # use_double_buffer=False: prepared here, on the consumer's thread
            item = _prepare_traced(self._late_prepare, item)
        return item

    # --- iterable use
    def __call__(self):
        return self

    def __iter__(self):
        if not self._iterable:
            raise RuntimeError("%s is not iterable (it was created with iterable=False): call start() and run "
                               "the program until fluid.core.EOFException" % self._caller)
        self._start_epoch()
        return self

    def __next__(self):
        if self._epoch is None:
            raise StopIteration
        group = []
        for _ in self._places:
            item = self._next_batch()
            if item is _END:
                break
            group.append(item)
        if not group or (len(group) < len(self._places) and self._drop_last):
            self._stop_epoch()
            raise StopIteration
        return group

    next = __next__

    # --- non-iterable use
    def start(self):
        """Start an epoch (non-iterable loaders): the worker thread begins filling the queue."""
        if self._iterable:
            raise RuntimeError("start() cannot be called when DataLoader is iterable")
        if self._epoch is not None:
            raise RuntimeError("%s.start(): the reader is already started; call reset() after "
                               "fluid.core.EOFException (or to abandon the epoch) before starting again"
                               % self._caller)
        self._start_epoch()

    def reset(self):
        """End the epoch: the worker thread stops and is joined; start() may be called again."""
        if self._iterable:
            raise RuntimeError("reset() cannot be called when DataLoader is iterable")
        self._stop_epoch()

    def _feed_next(self, feed):
        """Executor.run's hook: put the next batch into `feed`, or raise EOFException."""
        if self._epoch is None:
            raise core.EOFException("%s: the reader is not started (call start() before Executor.run, and "
                                    "reset() then start() for each new epoch)" % self._caller)
        item = self._next_batch()
        if item is _END:
            raise core.EOFException("There is no next data: %s has finished its epoch; call reset() (then "
                                    "start() for the next epoch)" % self._caller)
        for slot, value in zip(self._slots, item):
            if slot.name in feed:
                raise ValueError("feed: variable '%s' is read by %s of this program (non-iterable); do not "
                                 "feed it too" % (slot.name, self._caller))
            feed[slot.name] = value


def _bind(program, reader):
    """Make `program` read from `reader` on every Executor.run (see Program._readers)."""
    for other in program._readers:
        taken = [s.name for s in other._slots if s.name in {t.name for t in reader._slots}]
        if taken:
            raise ValueError("%s: variable '%s' is already filled by %s, bound to this program (non-iterable); "
                             "create one reader per set of variables and reuse it across epochs (start/reset)"
                             % (reader._caller, taken[0], other._caller))
    program._readers = program._readers + (reader,)


class PyReader:
    """Fluid 1.5's ``fluid.io.PyReader``: a thin wrapper over ``DataLoader.from_generator``."""

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True, return_list=False):
        self._loader = GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list,
                                       _caller="PyReader")

    @property
    def queue(self):
        return self._loader.queue

    @property
    def iterable(self):
        return self._loader.iterable

    def __call__(self):
        return self

    def __iter__(self):
        self._loader.__iter__()
        return self

    def __next__(self):
        return self._loader.__next__()

    def start(self):
        self._loader.start()

    def reset(self):
        self._loader.reset()

    def decorate_sample_generator(self, sample_generator, batch_size, drop_last=True, places=None):
        self._loader.set_sample_generator(sample_generator, batch_size, drop_last, places)

    def decorate_sample_list_generator(self, reader, places=None):
        self._loader.set_sample_list_generator(reader, places)

    def decorate_batch_generator(self, reader, places=None):
        self._loader.set_batch_generator(reader, places)


# ------------------------------------------------------------------------------------------ py_reader

class PyReaderVar:
    """What ``layers.py_reader`` returns: Fluid's reader Variable with its patched-on methods. The data
    variables come from ``layers.read_file(reader)``, which binds the reader to that program."""

    def __init__(self, capacity, shapes, dtypes, lod_levels, name, use_double_buffer):
        self.name = name
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.dtypes = [convert_np_dtype_to_dtype_(d) for d in dtypes]
        self.lod_levels = list(lod_levels)
        self.capacity = capacity
        self.use_double_buffer = use_double_buffer
        self._loader = None
        self._source = None  # ("batch" | "sample_list", reader) set before read_file

    def _bind(self, feed_list):
        if self._loader is not None:
            raise ValueError("read_file: py_reader '%s' is already read by %s; create one py_reader per read_file"
                             % (self.name, ", ".join(v.name for v in self._loader._feed_list)))
        self._loader = GeneratorLoader(feed_list, self.capacity, self.use_double_buffer, iterable=False,
                                       _caller="py_reader '%s'" % self.name)
        if self._source is not None:
            self._decorate(*self._source)

    def _decorate(self, kind, reader):
        if self._loader is None:
            self._source = (kind, reader)  # applied by read_file
        elif kind == "batch":
            self._loader.set_batch_generator(reader)
        else:
            self._loader.set_sample_list_generator(reader)

    def decorate_tensor_provider(self, func):
        """`func` yields one batch per step (one array or LoDTensor per slot)."""
        self._decorate("batch", func)

    decorate_batch_generator = decorate_tensor_provider

    def decorate_paddle_reader(self, reader):
        """`reader` yields lists of samples (``paddle.batch``'s output)."""
        self._decorate("sample_list", reader)

    decorate_sample_list_generator = decorate_paddle_reader

    def _loader_or_raise(self, method):
        if self._loader is None:
            raise RuntimeError("py_reader '%s'.%s(): call fluid.layers.read_file(reader) first (it creates the "
                               "data variables the reader fills)" % (self.name, method))
        return self._loader

    def start(self):
        self._loader_or_raise("start").start()

    def reset(self):
        if self._loader is not None:
            self._loader.reset()

    @property
    def queue(self):
        return self._loader.queue if self._loader is not None else None


class DoubleBufferReader:
    """``layers.double_buffer(reader)``: the same reader, marked to prepare one batch ahead (on CPU there is
    no device copy to overlap; the `place` argument is checked and otherwise unused)."""

    def __init__(self, reader, name):
        self.underlying = reader
        self.name = name

    def __getattr__(self, item):
        return getattr(self.underlying, item)


def py_reader(capacity, shapes, dtypes, lod_levels=None, name=None, use_double_buffer=True):
    if not capacity or int(capacity) < 1:
        raise ValueError("py_reader: capacity must be a positive number of batches, got %r" % (capacity,))
    if len(shapes) != len(dtypes):
        raise ValueError("py_reader: %d shapes but %d dtypes" % (len(shapes), len(dtypes)))
    if lod_levels is None:
        lod_levels = [0] * len(shapes)
    elif len(lod_levels) != len(shapes):
        raise ValueError("py_reader: %d shapes but %d lod_levels" % (len(shapes), len(lod_levels)))
    name = name if name is not None else unique_name.generate("create_py_reader")
    return PyReaderVar(int(capacity), shapes, dtypes, lod_levels, name, use_double_buffer)


def create_py_reader_by_data(capacity, feed_list, name=None, use_double_buffer=True):
    if not isinstance(feed_list, list):
        raise TypeError("create_py_reader_by_data: feed_list should be a list of Variable instead of %s"
                        % type(feed_list).__name__)
    reader = py_reader(capacity, [v.shape for v in feed_list], [v.dtype for v in feed_list],
                       [v.lod_level for v in feed_list], name, use_double_buffer)
    reader._feed_vars = list(feed_list)
    return reader


def double_buffer(reader, place=None, name=None):
    if not isinstance(reader, (PyReaderVar, DoubleBufferReader)):
        raise TypeError("double_buffer: reader must be what fluid.layers.py_reader returns, got %s"
                        % type(reader).__name__)
    if place is not None and not isinstance(place, type(core.cpu_place())):
        raise ValueError("double_buffer: fluidlite runs on CPU; place must be a CPUPlace, got %s" % (place,))
    base = reader.underlying if isinstance(reader, DoubleBufferReader) else reader
    base.use_double_buffer = True
    return DoubleBufferReader(base, name if name is not None else unique_name.generate("double_buffer"))


def read_file(reader):
    """The data variables `reader` fills on each Executor.run (one Variable, or a list of them)."""
    base = reader.underlying if isinstance(reader, DoubleBufferReader) else reader
    if not isinstance(base, PyReaderVar):
        raise TypeError("read_file: reader must be what fluid.layers.py_reader (or create_py_reader_by_data, "
                        "double_buffer) returns, got %s" % type(reader).__name__)
    feed_vars = getattr(base, "_feed_vars", None)
    if feed_vars is None:
        block = default_main_program().current_block()
        feed_vars = [block.create_var(name=unique_name.generate_with_ignorable_key("read_file.tmp"), shape=shape,
                                      dtype=dtype, lod_level=lod, stop_gradient=True, is_data=True)
                     for shape, dtype, lod in zip(base.shapes, base.dtypes, base.lod_levels)]
    base._bind(feed_vars)
    return feed_vars[0] if len(feed_vars) == 1 else feed_vars
