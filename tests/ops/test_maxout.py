"""maxout (kernels/maxout.cc): forward against numpy for NCHW (axis 1) and NHWC (axis -1 / 3) and other
ranks, the gradient by central differences, Fluid's tie rule (first maximum gets the gradient) and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def _maxout(x, groups, axis):
    axis %= x.ndim
    shape = x.shape[:axis] + (x.shape[axis] // groups, groups) + x.shape[axis + 1:]
    return x.reshape(shape).max(axis=axis + 1)


def _distinct(shape, seed=0):
    rng = np.random.RandomState(seed)
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 2.0  # distinct: no ties


CASES = [((2, 6, 3, 3), 2, 1), ((2, 6, 3, 3), 3, 1), ((2, 3, 3, 4), 2, -1), ((2, 3, 3, 4), 4, 3), ((3, 8), 4, 1),
         ((2, 4, 5), 1, 1)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,groups,axis", CASES)
def test_forward(shape, groups, axis, dtype):
    x = _distinct(shape).astype(dtype)
    OpTest("maxout", {"X": x}, {"Out": _maxout(x, groups, axis)}, {"groups": groups, "axis": axis}).check_output(
        atol=0, rtol=0)


@pytest.mark.parametrize("shape,groups,axis", CASES[:5])
def test_grad(shape, groups, axis):
    x = _distinct(shape, 1)
    OpTest("maxout", {"X": x}, {"Out": np.zeros(1)}, {"groups": groups, "axis": axis}).check_grad(["X"], "Out")


def test_ties_route_the_gradient_to_the_first_max():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[1, 4, 1, 1], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        out = fluid.layers.maxout(x, groups=2)
        dx, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([3.0, 3.0, 1.0, 2.0]).reshape(1, 4, 1, 1)},
                                               fetch_list=[out, dx])
    np.testing.assert_array_equal(got[0].reshape(-1), [3, 2])
    np.testing.assert_array_equal(got[1].reshape(-1), [1, 0, 0, 1])


def test_layer_shape_and_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xm", shape=[6, 4, 4], dtype="float32")
        assert tuple(fluid.layers.maxout(x, groups=3).shape) == (-1, 2, 4, 4)
        assert tuple(fluid.layers.maxout(x, groups=2, axis=-1).shape) == (-1, 6, 4, 2)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"maxout: the size of axis 1 of X 'xm' \[-1, 6, 4, 4\] "
                                                            r"\(6\) must be divisible by groups \(4\)"):
            fluid.layers.maxout(x, groups=4)
        with pytest.raises(ValueError, match="maxout: axis must be 1, -1 or 3 .Fluid 1.8., got 2"):
            fluid.layers.maxout(x, groups=2, axis=2)
        with pytest.raises(fluid.core.EnforceNotMet, match="groups"):
            fluid.layers.maxout(x, groups=0)
