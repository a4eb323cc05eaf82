"""unfold (im2col in Fluid's layout): numpy forward, gradient, layer and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def unfold_ref(x, k, s=(1, 1), p=(0, 0, 0, 0), d=(1, 1)):
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])])
    oh = (h + p[0] + p[2] - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
    ow = (w + p[1] + p[3] - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
    cols = np.zeros((n, c, k[0], k[1], oh, ow), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                                  j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


CASES = [((2, 3, 5, 4), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
         ((1, 2, 6, 7), (3, 2), (2, 1), (1, 0, 2, 1), (1, 2)),
         ((2, 1, 4, 4), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1))]


@pytest.mark.parametrize("shape,k,s,p,d", CASES)
def test_forward_and_grad(shape, k, s, p, d):
    x = np.random.RandomState(0).uniform(-1, 1, shape)
    attrs = {"kernel_sizes": list(k), "strides": list(s), "paddings": list(p), "dilations": list(d)}
    t = OpTest("unfold", {"X": x}, {"Y": unfold_ref(x, k, s, p, d)}, attrs)
    t.check_output()
    t.check_grad(["X"], "Y", max_relative_error=1e-6)


def test_layer_and_errors():
    xv = np.random.RandomState(1).uniform(-1, 1, (2, 3, 6, 6)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 6, 6], dtype="float32")
        y = fluid.layers.unfold(x, kernel_sizes=3, strides=2, paddings=[1, 0], dilations=1)
        assert tuple(y.shape) == (-1, 27, 6)  # out 3 x 2: paddings [1, 0] mean top = bottom = 1, left = right = 0
        with pytest.raises(fluid.core.EnforceNotMet, match=r"unfold: the 7x7 kernel .* does not fit X 'x'"):
            fluid.layers.unfold(x, kernel_sizes=7)
        with pytest.raises(ValueError, match="unfold: paddings must be an int, \\[h, w\\] or"):
            fluid.layers.unfold(x, kernel_sizes=2, paddings=[1, 1, 1])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[y])[0]
    np.testing.assert_array_equal(got, unfold_ref(xv, (3, 3), (2, 2), (1, 0, 1, 0)))
