"""split: forward against numpy, gradients, shape errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


SPLIT_CASES = [
    # shape, num, sections, axis
    ((4, 6), 2, [], 0),
    ((4, 6), 3, [], 1),
    ((4, 6), 3, [], -1),
    ((2, 6, 3), 0, [1, 2, 3], 1),
    ((2, 6, 3), 0, [4, -1], -2),
    ((3, 2, 5), 0, [2, 0, 3], 2),
    ((5, 2), 1, [], 0),
]


def split_ref(x, num, sections, axis):
    if num:
        return np.split(x, num, axis)
    sizes = list(sections)
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis)


def split_test(x, num, sections, axis):
    parts = split_ref(x, num, sections, axis)
    return OpTest("split", {"X": x}, {"Out": [("o%d" % i, p) for i, p in enumerate(parts)]},
                  {"num": num, "sections": sections, "axis": axis})


@pytest.mark.parametrize("shape,num,sections,axis", SPLIT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_split_forward(shape, num, sections, axis, dtype):
    split_test((rand(*shape) * 10).astype(dtype), num, sections, axis).check_output()


@pytest.mark.parametrize("shape,num,sections,axis", SPLIT_CASES)
def test_split_grad(shape, num, sections, axis):
    split_test(rand(*shape), num, sections, axis).check_grad(["X"], "Out")


def test_split_grad_with_unused_outputs_is_zero_there():
    # Only the middle part reaches the loss: the other parts' gradients are missing and count as zeros.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2, 6], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        parts = fluid.layers.split(x, 3, dim=1)
        loss = fluid.layers.mean(parts[1])
        gx, = fluid.gradients([loss], [x])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": rand(2, 6)}, fetch_list=[gx])
    expect = np.zeros((2, 6))
    expect[:, 2:4] = 1.0 / 4
    np.testing.assert_allclose(got, expect)


def test_split_layer_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[6, 4], dtype="float32")  # [-1, 6, 4]
        assert [p.shape for p in fluid.layers.split(x, [1, -1, 2], dim=1)] == [(-1, 1, 4), (-1, 3, 4), (-1, 2, 4)]
        assert [p.shape for p in fluid.layers.split(x, 2, dim=-1)] == [(-1, 6, 2)] * 2
        assert [p.shape for p in fluid.layers.split(x, 2, dim=0)] == [(-1, 6, 4)] * 2


def test_split_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[5, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: X 'x' \[5, 4\] dim 5 at axis 0 is not divisible "
                                                           r"by num=2"):
            fluid.layers.split(x, 2, dim=0)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: sections \[2, 2\] sum to 4 but X 'x' \[5, 4\] has "
                                                           r"5 at axis 0"):
            fluid.layers.split(x, [2, 2], dim=0)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"split: axis 2 is out of range \[-2, 2\) for X 'x'"):
            fluid.layers.split(x, 2, dim=2)
