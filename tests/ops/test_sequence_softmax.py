"""sequence_softmax: softmax over each sequence of a one-value-per-step LoDTensor, gradient, layer, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def softmax_per_sequence(x, lens):
    out, start = np.empty_like(x), 0
    for n in lens:
        seq = x[start:start + n].astype(np.float64)
        e = np.exp(seq - seq.max()) if n else seq
        out[start:start + n] = e / e.sum() if n else e
        start += n
    return out


# (lengths of the last level, upper levels, shape of a step): ragged, one-element, a single sequence, an empty one
# in the middle and at the end, two LoD levels, the [N] form.
CASES = [([3, 1, 4, 2], [], (1,)),
         ([1], [], (1,)),
         ([7], [], ()),
         ([2, 0, 3, 0], [], (1,)),
         ([2, 3, 1, 4], [[1, 3]], (1,))]


@pytest.mark.parametrize("lens,upper,step", CASES)
def test_forward_and_grad(lens, upper, step):
    x = np.random.RandomState(len(lens)).uniform(-2, 2, (sum(lens),) + step)
    lod = upper + [lens]
    t = OpTest("sequence_softmax", {"X": (x, lod)}, {"Out": (softmax_per_sequence(x, lens), lod)})
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-5)


def test_numerically_stable_in_float32():
    # exp(100) overflows float32: the max is subtracted first, so each sequence still sums to 1.
    x = np.array([[100.0], [101.0], [-100.0], [99.0], [98.0]], "float32")
    t = OpTest("sequence_softmax", {"X": (x, [[3, 2]])}, {"Out": (softmax_per_sequence(x, [3, 2]), [[3, 2]])})
    t.check_output(atol=1e-6)


def test_layer_and_errors():
    lens = [2, 3]
    xv = np.random.RandomState(3).uniform(-1, 1, (5, 1)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[1], dtype="float32", lod_level=1)
        y = fluid.layers.sequence_softmax(x)
        assert tuple(y.shape) == (-1, 1) and y.lod_level == 1
        op = main.global_block().ops[-1]
        assert op.type == "sequence_softmax" and op.attr("use_cudnn") is False and op.attr("data_format") == "AnyLayout"
        wide = fluid.layers.data("wide", shape=[2], dtype="float32", lod_level=1)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"sequence_softmax: X 'wide' \[-1, 2\] must be \[N\] or \[N, 1\]: one value per"):
            fluid.layers.sequence_softmax(wide)
        ids = fluid.layers.data("ids", shape=[1], dtype="int64", lod_level=1)
        with pytest.raises(TypeError, match=r"sequence_softmax: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.sequence_softmax(ids)
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed={"x": (xv, [lens])}, fetch_list=[y], return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    np.testing.assert_allclose(np.array(got), softmax_per_sequence(xv, lens), rtol=1e-6)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_softmax: X 'x' \[5, 1\] must be a LoDTensor with "
                                                       r"at least 1 LoD level\(s\), got 0"):
        exe.run(main, feed={"x": xv}, fetch_list=[y])
    bad = fluid.create_lod_tensor(xv, [lens], fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, 3, 4\]\]: the last level ends at 4 "
                                         r"but the tensor has 5 rows"):
        bad.set_lod([[0, 3, 4]])
