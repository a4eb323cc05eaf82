"""sequence_enumerate: the windows of win_size ids of each sequence, padded past its end; layer and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def enumerate_per_sequence(x, lens, win, pad):
    rows, start = [], 0
    for n in lens:
        seq = list(x[start:start + n, 0])
        for t in range(n):
            window = seq[t:t + win]
            rows.append(window + [pad] * (win - len(window)))
        start += n
    return np.array(rows, x.dtype).reshape(-1, win)


# ragged, windows longer than sequences, one-element sequences, a single sequence, empty sequences
CASES = [([3, 1, 4], 2, 0),
         ([2, 5], 4, -1),
         ([1, 1, 1], 3, 7),
         ([6], 2, 0),
         ([0, 3, 0, 2, 0], 3, 9)]


@pytest.mark.parametrize("lens,win,pad", CASES)
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_forward(lens, win, pad, dtype):
    x = np.random.RandomState(len(lens)).randint(1, 100, (sum(lens), 1)).astype(dtype)
    t = OpTest("sequence_enumerate", {"X": (x, [lens])}, {"Out": (enumerate_per_sequence(x, lens, win, pad), [lens])},
               {"win_size": win, "pad_value": pad})
    t.check_output()


def test_fluid_doc_example():
    x = np.array([[1], [2], [3], [4], [5]], "int64")
    want = np.array([[1, 2], [2, 3], [3, 0], [4, 5], [5, 0]], "int64")
    OpTest("sequence_enumerate", {"X": (x, [[3, 2]])}, {"Out": (want, [[3, 2]])}, {"win_size": 2}).check_output()


def test_layer_and_errors():
    lens = [2, 3]
    xv = np.arange(1, 6, dtype="int64").reshape(5, 1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[1], dtype="int64", lod_level=1)
        y = fluid.layers.sequence_enumerate(x, win_size=3, pad_value=-1)
        assert tuple(y.shape) == (-1, 3) and y.lod_level == 1 and y.stop_gradient
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_enumerate: attribute 'win_size' = 1 is invalid"):
            fluid.layers.sequence_enumerate(x, win_size=1)
        two = fluid.layers.data("two", shape=[2], dtype="int64", lod_level=1)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_enumerate: X 'two' \[-1, 2\] must be \[N, 1\]"):
            fluid.layers.sequence_enumerate(two, win_size=2)
        f = fluid.layers.data("f", shape=[1], dtype="float32", lod_level=1)
        with pytest.raises(TypeError, match=r"sequence_enumerate: 'input' \(f\) must be int32 or int64, got float32"):
            fluid.layers.sequence_enumerate(f, win_size=2)
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed={"x": (xv, [lens])}, fetch_list=[y], return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    np.testing.assert_array_equal(np.array(got), enumerate_per_sequence(xv, lens, 3, -1))
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_enumerate: X 'x' \[5, 1\] has 2 LoD levels "
                                                       r"\{\{0, 1, 2\}\{0, 2, 5\}\}; only one level is supported"):
        exe.run(main, feed={"x": (xv, [[1, 1], lens])}, fetch_list=[y])
