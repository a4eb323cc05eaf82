"""reverse: forward against numpy.flip for every dtype and axis pattern, gradients, axis errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(5)

REVERSE_CASES = [
    ((7,), [0]),
    ((4, 5), [0]),
    ((4, 5), [1]),
    ((4, 5), [0, 1]),
    ((4, 5), [-1]),
    ((3, 4, 6), [0]),          # whole contiguous blocks of 4*6 move
    ((3, 4, 6), [1]),          # runs of 6 inside each outer block
    ((3, 4, 6), [2]),          # single elements, innermost
    ((3, 4, 6), [0, 2]),
    ((3, 4, 6), [-3, -2, -1]),
    ((2, 3, 1, 5), [2, 3]),    # a size-1 axis
    ((1, 1), [0, 1]),
    ((0, 3), [0]),             # empty
    ((300, 70), [0]),          # big enough to split over threads
]


@pytest.mark.parametrize("shape,axis", REVERSE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_reverse_forward(shape, axis, dtype):
    x = (rng.uniform(0, 100, shape)).astype(dtype)
    OpTest("reverse", {"X": x}, {"Out": np.flip(x, axis=tuple(axis))}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shape,axis", [c for c in REVERSE_CASES if 0 < np.prod(c[0]) <= 100])
def test_reverse_grad(shape, axis):
    x = rng.uniform(-1, 1, shape)
    OpTest("reverse", {"X": x}, {"Out": np.flip(x, axis=tuple(axis))}, {"axis": axis}).check_grad(["X"], "Out")


def test_reverse_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", shape=[None, 3, 4], dtype="float32")
        one = fluid.layers.reverse(x, 1)
        two = fluid.layers.reverse(x, axis=(0, -1))
        assert one.shape == (-1, 3, 4) and two.dtype == x.dtype
    xv = rng.uniform(-1, 1, (5, 3, 4)).astype("float32")
    a, b = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[one, two])
    np.testing.assert_array_equal(a, xv[:, ::-1])
    np.testing.assert_array_equal(b, xv[::-1, :, ::-1])


def test_reverse_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape=[2, 3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reverse: axis 2 is out of range for X 'x' \[2, 3\] "
                                                           r"\(rank 2, valid range \[-2, 2\)\)"):
            fluid.layers.reverse(x, 2)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reverse: axis names dim 1 of X 'x' \[2, 3\] twice"):
            fluid.layers.reverse(x, [1, -1])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op reverse: attribute 'axis' = \[\] is invalid: "
                                                           r"must have 1 to \d+ values, not 0"):
            fluid.layers.reverse(x, [])
        with pytest.raises(TypeError, match=r"reverse: 'axis' must be an int or a list/tuple of ints, got 1.5"):
            fluid.layers.reverse(x, 1.5)
        s = fluid.data("s", shape=[2], dtype="int8")
        with pytest.raises(TypeError, match=r"reverse: 'x' \(s\) must be float32 or float64 or int32 or int64 or "
                                            r"uint8 or bool, got int8"):
            fluid.layers.reverse(s, 0)
