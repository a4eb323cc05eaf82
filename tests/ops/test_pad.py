"""pad, pad2d (constant / reflect / edge, Paddings input) and pad_constant_like: numpy forward, gradients,
layers and shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,paddings", [((3, 4), [1, 2, 0, 3]), ((2, 3, 4), [0, 0, 2, 1, 1, 1]), ((5,), [2, 0])])
def test_pad_forward(shape, paddings, dtype):
    x = np.random.RandomState(0).uniform(-1, 1, shape).astype(dtype)
    pairs = [(paddings[2 * i], paddings[2 * i + 1]) for i in range(len(shape))]
    OpTest("pad", {"X": x}, {"Out": np.pad(x, pairs, constant_values=1.5)},
           {"paddings": paddings, "pad_value": 1.5}).check_output()


def test_pad_grad():
    x = np.random.RandomState(1).uniform(-1, 1, (2, 3, 4))
    OpTest("pad", {"X": x}, {"Out": np.pad(x, [(1, 0), (0, 2), (1, 1)])},
           {"paddings": [1, 0, 0, 2, 1, 1]}).check_grad(["X"], "Out", max_relative_error=1e-6)


def pad2d_ref(x, p, mode, value=0.0):
    np_mode = {"constant": "constant", "reflect": "reflect", "edge": "edge"}[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, [(0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])], mode=np_mode, **kw)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("p", [[1, 2, 3, 0], [0, 0, 0, 0], [2, 2, 1, 3]])
def test_pad2d_forward_and_grad(mode, p):
    x = np.random.RandomState(2).uniform(-1, 1, (2, 3, 4, 5))
    attrs = {"paddings": p, "mode": mode, "pad_value": -0.5}
    t = OpTest("pad2d", {"X": x}, {"Out": pad2d_ref(x, p, mode, -0.5)}, attrs)
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_pad2d_paddings_input():
    x = np.random.RandomState(3).uniform(-1, 1, (1, 2, 3, 3)).astype("float32")
    p = np.array([1, 0, 2, 1], "int32")
    OpTest("pad2d", {"X": x, "Paddings": p}, {"Out": pad2d_ref(x, p, "reflect")},
           {"mode": "reflect"}).check_output()


def test_pad_constant_like_forward_and_grad():
    rng = np.random.RandomState(4)
    x = rng.uniform(-1, 1, (4, 5, 3))
    y = rng.uniform(-1, 1, (2, 5, 1))
    want = np.pad(y, [(0, 2), (0, 0), (0, 2)], constant_values=2.0)
    t = OpTest("pad_constant_like", {"X": x, "Y": y}, {"Out": want}, {"pad_value": 2.0})
    t.check_output()
    t.check_grad(["Y"], "Out", max_relative_error=1e-6)


def test_layers():
    rng = np.random.RandomState(5)
    xv = rng.uniform(-1, 1, (2, 3, 4, 4)).astype("float32")
    yv = rng.uniform(-1, 1, (2, 3, 2, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4, 4], dtype="float32")
        y = fluid.layers.data("y", shape=[3, 2, 4], dtype="float32")
        p = fluid.layers.data("p", shape=[4], dtype="int32", append_batch_size=False)
        a = fluid.layers.pad(x, paddings=[0, 0, 1, 0, 0, 2, 1, 1], pad_value=3.0)
        b = fluid.layers.pad2d(x, paddings=[1, 1, 2, 0], mode="edge")
        c = fluid.layers.pad2d(x, paddings=p, mode="reflect")
        d = fluid.layers.pad_constant_like(x, y, pad_value=-1.0)
    assert tuple(a.shape) == (-1, 4, 6, 6) and tuple(b.shape) == (-1, 3, 6, 6) and tuple(d.shape) == (-1, 3, 4, 4)
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed={"x": xv, "y": yv, "p": np.array([2, 1, 0, 3], "int32")}, fetch_list=[a, b, c, d])
    np.testing.assert_array_equal(got[0], np.pad(xv, [(0, 0), (1, 0), (0, 2), (1, 1)], constant_values=3.0))
    np.testing.assert_array_equal(got[1], pad2d_ref(xv, [1, 1, 2, 0], "edge"))
    np.testing.assert_array_equal(got[2], pad2d_ref(xv, [2, 1, 0, 3], "reflect"))
    np.testing.assert_array_equal(got[3], np.pad(yv, [(0, 0), (0, 0), (0, 2), (0, 0)], constant_values=-1.0))


def test_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4, 4], dtype="float32")
        y = fluid.layers.data("y", shape=[3, 5, 4], dtype="float32")
        with pytest.raises(ValueError, match=r"pad: paddings must hold 2 \* rank = 8 values >= 0 for x x"):
            fluid.layers.pad(x, paddings=[1, 1])
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"pad2d: reflect padding top 4 / bottom 0 must be less than the height 4 of "
                                 r"X 'x' \[-1, 3, 4, 4\]"):
            fluid.layers.pad2d(x, paddings=[4, 0, 0, 0], mode="reflect")
        with pytest.raises(ValueError, match="pad2d: mode must be 'constant', 'reflect' or 'edge'"):
            fluid.layers.pad2d(x, mode="circular")
        with pytest.raises(ValueError, match="pad2d: data_format must be 'NCHW'"):
            fluid.layers.pad2d(x, data_format="NHWC")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"pad_constant_like: Y 'y' \[-1, 3, 5, 4\] is larger than X 'x' \[-1, 3, 4, 4\] "
                                 r"at dim 2"):
            fluid.layers.pad_constant_like(x, y)
