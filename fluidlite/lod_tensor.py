"""fluid.create_lod_tensor and fluid.create_random_int_lodtensor: LoDTensors from Python data (Fluid 1.8's
lod_tensor.py).

LoD here is given as recursive sequence lengths (``[[2, 3]]``: two sequences of 2 and 3 rows), the
form Fluid's Python API prefers; the tensor stores offsets (``[[0, 2, 5]]``, see LoDTensor.lod()).
"""
import numpy as np

from . import core

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]


class InvalidLoDError(ValueError, AssertionError):
    """A LoD that does not fit its data. A ValueError, and an AssertionError as Fluid 1.8's asserts raise, so that
    code catching either keeps working."""


def flatten_sequences(seqs, levels, lengths):
    """The rows of `seqs`, a list of sequences nested `levels` deep, appending each level's sequence
    lengths to `lengths` (create_lod_tensor, and DataFeeder per sample)."""
    rows = []
    for seq in seqs:
        lengths[0].append(len(seq))
        rows.extend(seq if levels == 1 else flatten_sequences(seq, levels - 1, lengths[1:]))
    return rows


def _as_lengths(recursive_seq_lens):
    """recursive_seq_lens as a list of lists of ints: any sequence of sequences of integers (a numpy array too, as
    Fluid's pybind conversion takes)."""
    try:
        return [[int(n) for n in level] for level in recursive_seq_lens]
    except (TypeError, ValueError):
        raise TypeError("create_lod_tensor: recursive_seq_lens must be a list of lists of sequence lengths "
                        "(e.g. [[2, 3]]), got %r" % (recursive_seq_lens,)) from None


def create_lod_tensor(data, recursive_seq_lens, place):
    """A LoDTensor on `place` from `data` with LoD `recursive_seq_lens` (lengths per level).

    `data` is a numpy array (its rows are the last level's entries), a LoDTensor (its values are used,
    its own LoD is not), or a list of sequences: as in Fluid, each innermost item becomes one row and a
    trailing dim of 1 is added (``[[1, 2], [3, 4, 5]]`` with ``[[2, 3]]`` gives int64 rows of shape [5, 1]).
    Fluid 1.8 takes one level of lists; here the lists may nest one level per LoD level."""
    if isinstance(data, core.LoDTensor):
        return create_lod_tensor(np.array(data), recursive_seq_lens, place)
    recursive_seq_lens = _as_lengths(recursive_seq_lens)
    if isinstance(data, list):
        levels = len(recursive_seq_lens)
        if levels == 0:
            raise InvalidLoDError("create_lod_tensor: a list needs at least one level of recursive_seq_lens, got []")
        lengths = [[] for _ in range(levels)]
        try:
            rows = flatten_sequences(data, levels, lengths)
        except TypeError as e:
            raise InvalidLoDError("create_lod_tensor: data does not nest %d level(s) deep as recursive_seq_lens %r "
                                  "says (%s)" % (levels, recursive_seq_lens, e)) from None
        if lengths != [list(level) for level in recursive_seq_lens]:
            raise InvalidLoDError("create_lod_tensor: data and recursive_seq_lens do not match: the sequence "
                                  "lengths of data are %r, recursive_seq_lens is %r" % (lengths, recursive_seq_lens))
        try:
            arr = np.array(rows)
        except ValueError:  # numpy >= 1.24: rows of different shapes
            arr = None
        if arr is None or arr.dtype == object:
            raise TypeError("create_lod_tensor: the rows of data have different shapes; each row must have the same "
                            "shape")
        return create_lod_tensor(arr.reshape(arr.shape + (1,)), recursive_seq_lens, place)
    if isinstance(data, np.ndarray):
        problem = core.lengths_problem(recursive_seq_lens, data.shape[0] if data.ndim else 0)
        if problem:
            raise InvalidLoDError("create_lod_tensor: the provided lod info is invalid for data of shape %s: %s"
                                  % (list(data.shape), problem))
        t = core.LoDTensor()
        t.set(data, place)
        t.set_recursive_sequence_lengths(recursive_seq_lens)
        return t
    raise TypeError("create_lod_tensor: data should be either a LoDTensor, a Numpy array or a list, got %s"
                    % type(data).__name__)


def create_random_int_lodtensor(recursive_seq_lens, base_shape, place, low, high):
    """A LoDTensor of int64 values drawn uniformly from [low, high] (both inclusive) with shape
    [total last-level length] + base_shape and LoD `recursive_seq_lens`."""
    if not isinstance(base_shape, list):
        raise TypeError("create_random_int_lodtensor: base_shape should be a list, got %s" % type(base_shape).__name__)
    recursive_seq_lens = _as_lengths(recursive_seq_lens)
    if not recursive_seq_lens:
        raise InvalidLoDError("create_random_int_lodtensor: recursive_seq_lens must have at least one level")
    if low > high:
        raise ValueError("create_random_int_lodtensor: low (%d) must not exceed high (%d)" % (low, high))
    shape = [sum(recursive_seq_lens[-1])] + list(base_shape)
    data = np.random.randint(low, high + 1, size=shape).astype("int64")
    return create_lod_tensor(data, recursive_seq_lens, place)
