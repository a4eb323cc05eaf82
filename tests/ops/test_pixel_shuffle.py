"""pixel_shuffle and space_to_depth: numpy forward (space_to_depth in Fluid's reorg order), gradients, layers."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def pixel_shuffle_ref(x, r):
    n, c, h, w = x.shape
    return x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (r * r), h * r, w * r)


def space_to_depth_ref(x, b):
    """Fluid's kernel, element by element: X's (n, k, j, i) goes to flat position w2 + W*b*(h2 + H*b*(c2 + oc*n))."""
    n, c, h, w = x.shape
    oc = c // (b * b)
    out = np.zeros(x.size, x.dtype)
    for (bn, k, j, i), v in np.ndenumerate(x):
        c2, o = k % oc, k // oc
        w2, h2 = i * b + o % b, j * b + o // b
        out[w2 + w * b * (h2 + h * b * (c2 + oc * bn))] = v
    return out.reshape(n, c * b * b, h // b, w // b)


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 2), 2), ((1, 9, 2, 3), 3), ((2, 3, 2, 2), 1)])
def test_pixel_shuffle(shape, r):
    x = np.random.RandomState(0).uniform(-1, 1, shape)
    t = OpTest("pixel_shuffle", {"X": x}, {"Out": pixel_shuffle_ref(x, r)}, {"upscale_factor": r})
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_pixel_shuffle_layout():
    # Out[n, c, h*r + i, w*r + j] = X[n, c*r*r + i*r + j, h, w], spelled out for one element.
    x = np.arange(2 * 8 * 3 * 2, dtype="float64").reshape(2, 8, 3, 2)
    out = pixel_shuffle_ref(x, 2)
    assert out[1, 1, 2 * 2 + 1, 1 * 2 + 0] == x[1, 1 * 4 + 1 * 2 + 0, 2, 1]


@pytest.mark.parametrize("shape,b", [((2, 4, 4, 6), 2), ((1, 9, 3, 6), 3), ((1, 8, 4, 4), 2)])
def test_space_to_depth(shape, b):
    x = np.random.RandomState(1).uniform(-1, 1, shape)
    t = OpTest("space_to_depth", {"X": x}, {"Out": space_to_depth_ref(x, b)}, {"blocksize": b})
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_layers_and_errors():
    xv = np.random.RandomState(2).uniform(-1, 1, (2, 8, 4, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[8, 4, 4], dtype="float32")
        a = fluid.layers.pixel_shuffle(x, upscale_factor=2)
        b = fluid.layers.space_to_depth(x, blocksize=2)
        assert tuple(a.shape) == (-1, 2, 8, 8) and tuple(b.shape) == (-1, 32, 2, 2)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"pixel_shuffle: the 8 channels of X 'x' \[-1, 8, 4, 4\] are not divisible by "
                                 r"upscale_factor\^2 = 9"):
            fluid.layers.pixel_shuffle(x, upscale_factor=3)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"space_to_depth: the 8 channels of X 'x' \[-1, 8, 4, 4\] are not divisible by "
                                 r"blocksize\^2 = 16"):
            fluid.layers.space_to_depth(x, blocksize=4)
        with pytest.raises(TypeError, match="space_to_depth: blocksize must be a positive int"):
            fluid.layers.space_to_depth(x, blocksize=0)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[a, b])
    np.testing.assert_array_equal(got[0], pixel_shuffle_ref(xv, 2))
    np.testing.assert_array_equal(got[1], space_to_depth_ref(xv, 2))
