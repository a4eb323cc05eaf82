"""Row norms and similarities (kernels/similarity.cc): cos_sim (Y with N rows or one row broadcast) and norm
(layers.l2_normalize) against numpy, their gradients against central differences, and the shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_cos_sim(x, y):
    n = x.shape[0]
    xf, yf = x.reshape(n, -1), y.reshape(y.shape[0], -1)
    xn = np.sqrt((xf * xf).sum(1, keepdims=True))
    yn = np.sqrt((yf * yf).sum(1, keepdims=True))
    out = (xf * yf).sum(1, keepdims=True) / (xn * yn)
    return out, xn, yn


@pytest.mark.parametrize("xshape,yshape", [((5, 4), (5, 4)), ((5, 4), (1, 4)), ((3, 2, 3), (3, 2, 3)),
                                           ((3, 2, 3), (1, 2, 3))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cos_sim_forward(xshape, yshape, dtype):
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, xshape).astype(dtype)
    y = rng.uniform(-1, 1, yshape).astype(dtype)
    out, xn, yn = np_cos_sim(x.astype("float64"), y.astype("float64"))
    OpTest("cos_sim", {"X": x, "Y": y}, {"Out": out.astype(dtype), "XNorm": xn.astype(dtype),
                                         "YNorm": yn.astype(dtype)}).check_output()


@pytest.mark.parametrize("yrows", [4, 1])
def test_cos_sim_grad(yrows):
    rng = np.random.RandomState(2)
    x = rng.uniform(-1, 1, (4, 3))
    y = rng.uniform(-1, 1, (yrows, 3))
    out, xn, yn = np_cos_sim(x, y)
    OpTest("cos_sim", {"X": x, "Y": y}, {"Out": out, "XNorm": xn, "YNorm": yn}).check_grad(
        ["X", "Y"], "Out", max_relative_error=1e-4)


def test_cos_sim_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[4], dtype="float32")
        out = fluid.layers.cos_sim(x, y)
        assert out.shape == (-1, 1)
        y5 = fluid.layers.data(name="y5", shape=[5], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"cos_sim: X 'x' \[-1, 4\] and Y 'y5' \[-1, 5\] must "
                                                           r"have the same dims after the first \(dim 1\)"):
            fluid.layers.cos_sim(x, y5)
        a = fluid.layers.data(name="a", shape=[3, 4], dtype="float32", append_batch_size=False)
        b = fluid.layers.data(name="b", shape=[2, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"cos_sim: Y 'b' \[2, 4\] must have as many rows as X 'a' \[3, 4\] or one row"):
            fluid.layers.cos_sim(a, b)
        v = fluid.layers.data(name="v", shape=[4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"cos_sim: X 'v' \[4\] and Y 'v' \[4\] must have the "
                                                           r"same rank, at least 2"):
            fluid.layers.cos_sim(v, v)
    rng = np.random.RandomState(3)
    xv, yv = rng.rand(3, 4).astype("float32"), rng.rand(3, 4).astype("float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=[out])
    np.testing.assert_allclose(got, np_cos_sim(xv, yv)[0], rtol=1e-5)


def np_l2_normalize(x, axis, eps):
    norm = np.sqrt((x * x).sum(axis=axis, keepdims=True) + eps)
    return x / norm, norm


@pytest.mark.parametrize("shape,axis", [((4, 5), 1), ((4, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((6,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_norm_forward(shape, axis, dtype):
    x = np.random.RandomState(4).uniform(-1, 1, shape).astype(dtype)
    out, norm = np_l2_normalize(x.astype("float64"), axis, 1e-10)
    OpTest("norm", {"X": x}, {"Out": out.astype(dtype), "Norm": norm.astype(dtype)},
           {"axis": axis, "epsilon": 1e-10}).check_output()


@pytest.mark.parametrize("shape,axis", [((3, 4), 1), ((2, 3, 2), 1), ((2, 3, 2), 0)])
def test_norm_grad(shape, axis):
    x = np.random.RandomState(5).uniform(-1, 1, shape)
    out, norm = np_l2_normalize(x, axis, 1e-10)
    OpTest("norm", {"X": x}, {"Out": out, "Norm": norm}, {"axis": axis, "epsilon": 1e-10}).check_grad(["X"], "Out")


def test_l2_normalize_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3, 4], dtype="float32")
        rows = fluid.layers.l2_normalize(x, axis=1)
        last = fluid.layers.l2_normalize(x, axis=-1, epsilon=1e-6)
        v = fluid.layers.data(name="v", shape=[5], dtype="float32", append_batch_size=False)
        flat = fluid.layers.l2_normalize(v, axis=3)  # a 1-D input is normalised along axis 0, as in Fluid
        assert rows.shape == (-1, 3, 4)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"norm: axis=3 is out of range for X 'x' \[-1, 3, 4\] \(rank 3"):
            fluid.layers.l2_normalize(x, axis=3)
    rng = np.random.RandomState(6)
    xv = rng.randn(2, 3, 4).astype("float32")
    vv = rng.randn(5).astype("float32")
    a, b, c = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "v": vv}, fetch_list=[rows, last, flat])
    np.testing.assert_allclose(a, np_l2_normalize(xv, 1, 1e-12)[0], rtol=1e-5)
    np.testing.assert_allclose(b, np_l2_normalize(xv, -1, 1e-6)[0], rtol=1e-5)
    np.testing.assert_allclose(c, np_l2_normalize(vv, 0, 1e-12)[0], rtol=1e-5)
