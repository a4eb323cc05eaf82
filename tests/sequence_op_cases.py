"""Helpers of the sequence op tests (tests/ops/test_sequence_*.py): LoD offsets from lengths, one op run on LoD
inputs with its outputs fetched as LoDTensors (values and LoD), and a tensor carrying an invalid LoD (which
fluid.create_lod_tensor refuses to build)."""
import numpy as np

import fluidlite as fluid
from op_test import OpTest, lod_feed


def offsets(lengths):
    """[0, l0, l0 + l1, ...]: the offsets of sequences with these lengths."""
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def run_op(op_type, inputs, out_slots, attrs=None):
    """Runs `op_type` once on `inputs` (OpTest's form: arrays, (array, recursive_seq_lens) pairs, or LoDTensors fed
    as they are, e.g. from with_lod); returns {slot: LoDTensor} for each slot in `out_slots`."""
    tensors = {slot: v for slot, v in inputs.items() if isinstance(v, fluid.core.LoDTensor)}
    t = OpTest(op_type, {slot: np.array(v) if slot in tensors else v for slot, v in inputs.items()},
               {slot: None for slot in out_slots}, attrs)
    main, startup, feed, _, out_vars, _ = t._build()
    feed = lod_feed(feed, t.feed_lod)
    for slot, tensor in tensors.items():
        feed["in_%s_%s_var" % (slot, slot.lower())] = tensor
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fetch = [out_vars[key][0] for key in out_vars]
    got = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    return {slot: tensor for (slot, _), tensor in zip(out_vars, got)}


def with_lod(array, lod):
    """A LoDTensor of `array` whose LoD is `lod` (offsets per level), also one whose last level does not end at the
    array's rows: set_lod checks the LoD against the rows the tensor holds then, and set() keeps it."""
    t = fluid.core.LoDTensor()
    array = np.asarray(array)
    rows = lod[-1][-1] if lod and lod[-1] else array.shape[0]
    t.set(np.zeros((rows,) + array.shape[1:], array.dtype), fluid.CPUPlace())
    t.set_lod([list(level) for level in lod])
    t.set(array, fluid.CPUPlace())
    return t


def run_program(main, feed, fetch):
    """Runs `main` once on the CPU; returns the fetched LoDTensors."""
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch, return_numpy=False)
