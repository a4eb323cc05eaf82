"""fluid.DataFeeder: turns a mini-batch of Python samples into the feed dict of LoDTensors.

A mini-batch is a list of samples; a sample has one field per variable of `feed_list`. Per variable the
fields are stacked with the variable's dtype and, as Fluid does, reshaped to its declared shape when the
ranks differ and at most one dim is unknown (a [-1, 1] label from scalars, a [-1, 784] image from
28x28 arrays). For lod_level > 0 a field is a nested sequence: its lengths become the tensor's
recursive sequence lengths and its innermost items its rows. Errors name the variable, the sample
index and the shapes involved.
"""
import bisect

import numpy as np

from . import core
from .framework import Variable, default_main_program, dtype_to_numpy
from .lod_tensor import flatten_sequences
from .places import cpu_num

__all__ = ["DataFeeder"]


class _SlotConverter:
    """Collects one variable's fields over a mini-batch (Fluid's DataToLoDTensorConverter). Also what
    DataLoader/PyReader sample generators convert LoD variables with (dataloader.py), as Fluid's do."""

    def __init__(self, var, place, caller="DataFeeder"):
        self.name, self.place, self.lod_level = var.name, place, var.lod_level
        self.shape = list(var.shape)
        self.checked = var.need_check_feed  # fluid.data: the executor would reject any other shape
        self.dtype = dtype_to_numpy(var.dtype)
        self.caller = caller
        self.rows = []  # innermost items, in order
        self.sample_start = []  # index into rows where each sample's items begin
        self.lengths = [[] for _ in range(self.lod_level)]

    def feed(self, index, value):
        self.sample_start.append(len(self.rows))
        if self.lod_level == 0:
            self.rows.append(value)
            return
        try:
            self.rows.extend(flatten_sequences([value], self.lod_level, self.lengths))
        except TypeError:
            raise TypeError("%s: variable '%s' has lod_level %d, but sample %d's field %r is not a sequence "
                            "nested that deep" % (self.caller, self.name, self.lod_level, index, value)) from None

    def _sample_of(self, row):
        return bisect.bisect_right(self.sample_start, row) - 1

    def _describe(self):
        return "variable '%s' (declared shape %s, %s)" % (self.name, self.shape, self.dtype.name)

    def _row_shapes_error(self):
        """The first row whose shape differs from row 0's, or which does not convert to the dtype."""
        first = None
        for i, row in enumerate(self.rows):
            try:
                shape = np.shape(np.asarray(row, dtype=self.dtype))
            except (TypeError, ValueError) as e:
                return "sample %d's value %r does not convert to %s: %s" % (self._sample_of(i), row, self.dtype.name, e)
            if first is None:
                first = shape
            elif shape != first:
                return ("sample %d has shape %s but sample %d has shape %s: all samples must have the same shape"
                        % (self._sample_of(i), shape, self._sample_of(0), first))
        return None

    def _row_size_error(self, per_row):
        for i, row in enumerate(self.rows):
            shape = np.shape(row)
            if int(np.prod(shape)) != per_row:
                return ("sample %d has shape %s (%d elements), but each row needs %d elements to reshape the batch to "
                        "the declared shape" % (self._sample_of(i), shape, int(np.prod(shape)), per_row))
        return None

    def done(self):
        try:
            arr = np.array(self.rows, dtype=self.dtype)
        except (TypeError, ValueError) as e:
            raise ValueError("%s: %s: %s" % (self.caller, self._describe(), self._row_shapes_error() or e)) from None
        known = [d for d in self.shape if d >= 0]
        if sum(d < 0 for d in self.shape) <= 1 and arr.ndim != len(self.shape):
            try:
                arr = arr.reshape(self.shape)
            except ValueError:
                reason = None
                if self.shape and self.shape[0] < 0:
                    reason = self._row_size_error(int(np.prod(known)))
                raise ValueError("%s: %s: cannot reshape the batch of shape %s to the declared shape%s" % (
                    self.caller, self._describe(), arr.shape, ": " + reason if reason else "")) from None
        elif self.checked and arr.ndim == len(self.shape):
            for d, (want, got) in enumerate(zip(self.shape, arr.shape)):
                if want >= 0 and want != got:
                    bad = ""
                    if d > 0:  # name the first sample whose own shape is off
                        for i, row in enumerate(self.rows):
                            if np.shape(row)[d - 1:d] != (want,):
                                bad = ": sample %d has shape %s" % (self._sample_of(i), np.shape(row))
                                break
                    raise ValueError("%s: %s: the batch has shape %s (dim %d is %d, not %d)%s"
                                     % (self.caller, self._describe(), arr.shape, d, got, want, bad))
        t = core.LoDTensor()
        t.set(arr, self.place)
        if self.lod_level > 0:
            problem = core.lengths_problem(self.lengths, arr.shape[0] if arr.ndim else 0)
            if problem:  # the nested lists' innermost items did not become one row each
                raise ValueError("%s: %s: its sequence lengths %s do not fit the batch of shape %s: %s" % (
                    self.caller, self._describe(), self.lengths, arr.shape, problem))
            t.set_recursive_sequence_lengths(self.lengths)
        return t


class DataFeeder:
    """``DataFeeder(feed_list, place, program=None)``: `feed_list` holds Variables or names of variables
    of `program`'s global block (default: the default main program)."""

    def __init__(self, feed_list, place, program=None):
        program = program if program is not None else default_main_program()
        self.feed_vars = []
        for each in feed_list:
            if isinstance(each, str):
                var = program.global_block()._find_var_recursive(each)
                if var is None:
                    raise ValueError("DataFeeder: variable '%s' of feed_list is not in the program's global block"
                                     % each)
                each = var
            if not isinstance(each, Variable):
                raise TypeError("DataFeeder: feed_list items must be Variables or variable names, got %s"
                                % type(each).__name__)
            self.feed_vars.append(each)
        self.feed_names = [v.name for v in self.feed_vars]
        self.feed_dtypes = [v.dtype for v in self.feed_vars]
        self.feed_shapes = [list(v.shape) for v in self.feed_vars]
        self.feed_lod_level = [v.lod_level for v in self.feed_vars]
        self.place = place

    def feed(self, iterable):
        """`iterable` is one mini-batch (a list of samples); returns {name: LoDTensor on the place}."""
        return self._feed(iterable, self.place)

    def _feed(self, iterable, place):
        converters = [_SlotConverter(v, place) for v in self.feed_vars]
        n = len(converters)
        for index, sample in enumerate(iterable):
            try:
                fields = len(sample)
            except TypeError:
                raise TypeError("DataFeeder.feed: sample %d is a %s, not a sequence of %d field(s) (one per variable "
                                "of feed_list %s)" % (index, type(sample).__name__, n, self.feed_names)) from None
            if fields != n:
                raise ValueError("DataFeeder.feed: the number of fields in data (%d) does not match len(feed_list) "
                                 "(%d): sample %d has %d field(s), feed_list is %s"
                                 % (fields, n, index, fields, self.feed_names))
            for conv, value in zip(converters, sample):
                conv.feed(index, value)
        return {conv.name: conv.done() for conv in converters}

    def _num_places(self, num_places):
        if num_places is not None:
            return int(num_places)
        if isinstance(self.place, core.CUDAPlace):
            from .places import cuda_places
            return len(cuda_places())
        return cpu_num()

    def feed_parallel(self, iterable, num_places=None):
        """Yields one feed dict per device; `iterable` holds one mini-batch per device (num_places, else the
        CUDA device count for a CUDAPlace or env CPU_NUM)."""
        n = self._num_places(num_places)
        batches = list(iterable)
        if len(batches) != n:
            raise ValueError("DataFeeder.feed_parallel takes one mini-batch per device: %d device(s), %d mini-batch(es)"
                             % (n, len(batches)))
        if isinstance(self.place, core.CUDAPlace):
            places = [core.CUDAPlace(i) for i in range(n)]
        else:
            places = [core.CPUPlace() for _ in range(n)]
        for place, batch in zip(places, batches):
            yield self._feed(batch, place)

    def decorate_reader(self, reader, multi_devices, num_places=None, drop_last=True):
        """A reader of feed dicts from a reader of mini-batches: one dict per batch, or with multi_devices a list
        of one dict per device per group of batches (a final short group is dropped when drop_last, else it
        raises ValueError, as in Fluid)."""
        def feeding_reader():
            if not multi_devices:
                for batch in reader():
                    yield self.feed(batch)
                return
            n = self._num_places(num_places)
            group = []
            for batch in reader():
                group.append(batch)
                if len(group) == n:
                    yield list(self.feed_parallel(group, n))
                    group = []
            if group and not drop_last:
                raise ValueError("DataFeeder.decorate_reader: %d mini-batch(es) are left over for %d devices; "
                                 "only drop_last=True is implemented for a short final group" % (len(group), n))
        return feeding_reader
