"""sequence_reverse: rows reversed inside each sequence (LoD unchanged), its gradient, layer and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def reverse_per_sequence(x, lens):
    out, start = np.empty_like(x), 0
    for n in lens:
        out[start:start + n] = x[start:start + n][::-1]
        start += n
    return out


# ragged, one-element sequences, a single sequence, empty sequences (first, middle, last), rank 3 steps
CASES = [([3, 1, 4], (2,)),
         ([1, 1], (3,)),
         ([5], (1,)),
         ([0, 2, 0, 3, 0], (2,)),
         ([2, 3], (2, 3))]


@pytest.mark.parametrize("lens,step", CASES)
def test_forward_and_grad(lens, step):
    x = np.random.RandomState(len(lens)).uniform(-1, 1, (sum(lens),) + step)
    t = OpTest("sequence_reverse", {"X": (x, [lens])}, {"Y": (reverse_per_sequence(x, lens), [lens])})
    t.check_output()
    t.check_grad(["X"], "Y", max_relative_error=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int8", "float32"])
def test_other_dtypes(dtype):
    lens = [2, 4]
    x = np.arange(12).reshape(6, 2).astype(dtype)
    OpTest("sequence_reverse", {"X": (x, [lens])}, {"Y": (reverse_per_sequence(x, lens), [lens])}).check_output()


def test_many_rows_split_over_threads():
    # 20000 rows x 8: large enough for ParallelForEachSequence to cut the rows into slices.
    rng = np.random.RandomState(5)
    lens = list(rng.randint(0, 40, 1000))
    x = rng.uniform(-1, 1, (sum(lens), 8)).astype("float32")
    OpTest("sequence_reverse", {"X": (x, [lens])}, {"Y": (reverse_per_sequence(x, lens), [lens])}).check_output()


def test_layer_and_errors():
    lens = [3, 2]
    xv = np.arange(10, dtype="int64").reshape(5, 2)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2], dtype="int64", lod_level=1)
        y = fluid.layers.sequence_reverse(x)
        assert tuple(y.shape) == (-1, 2) and y.lod_level == 1 and y.dtype == x.dtype
        named = fluid.layers.sequence_reverse(x, name="rev")
        assert named.name == "rev"
        flat = fluid.layers.data("flat", shape=[5], dtype="float32", append_batch_size=False, lod_level=1)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reverse: X 'flat' \[5\] must have rank >= 2"):
            fluid.layers.sequence_reverse(flat)
        b = fluid.layers.data("b", shape=[1], dtype="bool", lod_level=1)
        with pytest.raises(TypeError, match=r"fluid.layers.sequence_reverse: 'x' \(b\) must be float32 or float64 or "
                                            r"int8 or int32 or int64, got bool"):
            fluid.layers.sequence_reverse(b)
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed={"x": (xv, [lens])}, fetch_list=[y], return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    np.testing.assert_array_equal(np.array(got), reverse_per_sequence(xv, lens))
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reverse: X 'x' \[5, 2\] has 2 LoD levels "
                                                       r"\{\{0, 1, 2\}\{0, 3, 5\}\}; only one level is supported"):
        exe.run(main, feed={"x": (xv, [[1, 1], lens])}, fetch_list=[y])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_reverse: X 'x' \[5, 2\] must be a LoDTensor"):
        exe.run(main, feed={"x": xv}, fetch_list=[y])
