"""sequence_slice: forward against numpy written per sequence, the output LoD, the gradient (zeros outside the
slices), the layer and the bounds errors naming the sequence."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import offsets, run_op

RNG = np.random.RandomState(9)


def slice_ref(x, lens, off, length):
    """Out's sequence i = rows [off[i], off[i] + length[i]) of x's sequence i."""
    o = offsets(lens)
    parts = [x[o[i] + off[i]:o[i] + off[i] + length[i]] for i in range(len(lens))]
    return np.concatenate(parts), list(length)


def col(values, dtype="int64"):
    return np.array(values, dtype).reshape(-1, 1)


@pytest.mark.parametrize("lens, off, length", [
    ([3, 2], [0, 1], [2, 1]),            # Fluid's example
    ([4, 0, 3], [1, 0, 3], [3, 0, 0]),   # an empty sequence, an empty slice at a sequence's end
    ([5], [2], [3]),                     # a single sequence
    ([1, 1, 1], [0, 0, 1], [1, 1, 0]),   # one-element sequences
])
def test_slice(lens, off, length):
    x = RNG.uniform(-1, 1, (sum(lens), 2, 2))
    out, out_lens = slice_ref(x, lens, off, length)
    t = OpTest("sequence_slice", {"X": (x, [lens]), "Offset": col(off), "Length": col(length)},
               {"Out": (out, [out_lens])})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_slice_two_levels_int32_offsets_and_integer_data():
    x = np.arange(14, dtype="int64").reshape(7, 2)
    lens, off, length = [3, 1, 3], [1, 0, 0], [2, 1, 3]
    out, out_lens = slice_ref(x, lens, off, length)
    OpTest("sequence_slice", {"X": (x, [[2, 1], lens]), "Offset": col(off, "int32"), "Length": col(length, "int32")},
           {"Out": (out, [[2, 1], out_lens])}).check_output()
    xf = RNG.uniform(-1, 1, (7, 2))
    t = OpTest("sequence_slice", {"X": (xf, [[2, 1], lens]), "Offset": col(off), "Length": col(length)},
               {"Out": (slice_ref(xf, lens, off, length)[0], [[2, 1], out_lens])})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_slice_bounds_errors():
    x = (np.zeros((5, 2), "float32"), [[3, 2]])
    for off, length, bad in [([0, 1], [2, 2], "1"), ([-1, 0], [1, 1], "0"), ([0, 0], [-1, 1], "0")]:
        s = int(bad)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_slice: sequence %d of X 'in_X_x_var' LoD "
                                                           r"\{\{0, 3, 5\}\} has %d rows, so Offset\[%d\] = %d and "
                                                           r"Length\[%d\] = %d must satisfy 0 <= offset, 0 <= length "
                                                           r"and offset \+ length <= %d"
                           % (s, [3, 2][s], s, off[s], s, length[s], [3, 2][s])):
            run_op("sequence_slice", {"X": x, "Offset": col(off), "Length": col(length)}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_slice: Length 'in_Length_length_var' must be "
                                                       r"\[2, 1\] \(one value per sequence of X 'in_X_x_var' LoD "
                                                       r"\{\{0, 3, 5\}\}\), got \[3, 1\]"):
        run_op("sequence_slice", {"X": x, "Offset": col([0, 0]), "Length": col([1, 1, 1])}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_slice: Offset 'in_Offset_offset_var' \[2\] must be "
                                                       r"\[N, 1\]: one value per sequence of X"):
        run_op("sequence_slice", {"X": x, "Offset": np.zeros(2, "int64"), "Length": col([1, 1])}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_slice: Offset 'in_Offset_offset_var' \[2, 1\] must "
                                                       r"be int64 \(or int32\), got float32"):
        run_op("sequence_slice", {"X": x, "Offset": col([0, 0], "float32"), "Length": col([1, 1])}, ["Out"])


def test_layer_and_training():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2], dtype="float32", lod_level=1)
        off = fluid.layers.data("off", shape=[1], dtype="int64")
        length = fluid.layers.data("len", shape=[1], dtype="int64")
        h = fluid.layers.fc(x, size=3)
        out = fluid.layers.sequence_slice(h, off, length)
        assert out.shape == (-1, 3) and out.lod_level == 1 and off.stop_gradient and length.stop_gradient
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(0.5).minimize(loss)
        with pytest.raises(TypeError, match=r"sequence_slice: 'offset' \(f\) must be int32 or int64, got float32"):
            fluid.layers.sequence_slice(h, fluid.layers.data("f", shape=[1], dtype="float32"), length)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = RNG.uniform(-1, 1, (5, 2)).astype("float32")
    feed = {"x": (xv, [[3, 2]]), "off": col([1, 0]), "len": col([2, 2])}
    before, = exe.run(main, feed=feed, fetch_list=[loss])
    after, = exe.run(main, feed=feed, fetch_list=[loss])
    assert after < before
    got, = exe.run(main, feed=feed, fetch_list=[out], return_numpy=False)
    assert got.recursive_sequence_lengths() == [[2, 2]]
