"""relu6, leaky_relu, flatten (flatten2): forward against numpy, gradients, layers, build-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(17)


def away_from(x, points, gap=0.01):
    """x with values within `gap` of a kink moved off it, so central differences stay on one side."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + 2 * gap
    return x


SHAPES = [(5,), (3, 4), (2, 1, 3), (1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threshold", [6.0, 1.5])
def test_relu6_forward(shape, dtype, threshold):
    x = rng.uniform(-3, 9, shape).astype(dtype)
    OpTest("relu6", {"X": x}, {"Out": np.clip(x, 0, threshold)}, {"threshold": threshold}).check_output()


@pytest.mark.parametrize("threshold", [6.0, 0.5])
def test_relu6_grad(threshold):
    x = away_from(rng.uniform(-2, 8, (4, 6)), [0.0, threshold])
    OpTest("relu6", {"X": x}, {"Out": np.clip(x, 0, threshold)}, {"threshold": threshold}).check_grad(["X"], "Out")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha", [0.02, 0.3])
def test_leaky_relu_forward(shape, dtype, alpha):
    x = rng.uniform(-2, 2, shape).astype(dtype)
    want = np.where(x >= 0, x, x * np.asarray(alpha, dtype=dtype))
    OpTest("leaky_relu", {"X": x}, {"Out": want}, {"alpha": alpha}).check_output()


@pytest.mark.parametrize("alpha", [0.02, 0.5])
def test_leaky_relu_grad(alpha):
    x = away_from(rng.uniform(-2, 2, (3, 7)), [0.0])
    OpTest("leaky_relu", {"X": x}, {"Out": np.where(x >= 0, x, alpha * x)}, {"alpha": alpha}).check_grad(["X"], "Out")


def test_relu6_leaky_relu_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[8])
        x.stop_gradient = False
        a = fluid.layers.relu6(x)
        b = fluid.layers.relu6(x, threshold=2.0)
        c = fluid.layers.leaky_relu(x)
        d = fluid.layers.leaky_relu(x, alpha=0.1)
        loss = fluid.layers.mean(fluid.layers.sums([a, b, c, d]))
        gx, = fluid.gradients([loss], [x])
    xv = rng.uniform(-4, 8, (3, 8)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[a, b, c, d, gx])
    np.testing.assert_allclose(got[0], np.clip(xv, 0, 6))
    np.testing.assert_allclose(got[1], np.clip(xv, 0, 2))
    np.testing.assert_allclose(got[2], np.where(xv >= 0, xv, np.float32(0.02) * xv), rtol=1e-6)
    np.testing.assert_allclose(got[3], np.where(xv >= 0, xv, np.float32(0.1) * xv), rtol=1e-6)
    want = ((xv > 0) & (xv < 6)).astype(float) + ((xv > 0) & (xv < 2)) + np.where(xv >= 0, 1, 0.02) + np.where(xv >= 0, 1, 0.1)
    np.testing.assert_allclose(got[4], want / xv.size, rtol=1e-5)


# ------------------------------------------------------------------ flatten

FLATTEN_CASES = [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4, 5), 2), ((7,), 1), ((1, 1, 3), 2)]


@pytest.mark.parametrize("shape,axis", FLATTEN_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_flatten2_forward(shape, axis, dtype):
    x = (rng.uniform(-5, 5, shape)).astype(dtype)
    rows = int(np.prod(shape[:axis]))
    OpTest("flatten2", {"X": x}, {"Out": x.reshape(rows, -1), "XShape": None}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shape,axis", FLATTEN_CASES)
def test_flatten2_grad(shape, axis):
    x = rng.uniform(-1, 1, shape)
    t = OpTest("flatten2", {"X": x}, {"Out": x.reshape(int(np.prod(shape[:axis])), -1), "XShape": None},
               {"axis": axis})
    t.check_grad(["X"], "Out")


def test_flatten_layer_shapes_and_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4, 5])
        x.stop_gradient = False
        f1 = fluid.layers.flatten(x)
        f2 = fluid.layers.flatten(x, axis=2)
        f0 = fluid.layers.flatten(x, axis=0)
        w = fluid.layers.data("w", shape=[60])
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(f1, w))
        gx, = fluid.gradients([loss], [x])
    assert f1.shape == (-1, 60) and f2.shape == (-1, 20) and f0.shape == (1, -1)
    assert [o.type for o in main.global_block().ops].count("flatten2") == 3
    xv = rng.uniform(-1, 1, (2, 3, 4, 5)).astype("float32")
    wv = rng.uniform(-1, 1, (2, 60)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "w": wv}, fetch_list=[f1, f2, f0, gx])
    np.testing.assert_array_equal(got[0], xv.reshape(2, 60))
    np.testing.assert_array_equal(got[1], xv.reshape(6, 20))
    np.testing.assert_array_equal(got[2], xv.reshape(1, 120))
    np.testing.assert_array_equal(got[3], wv.reshape(2, 3, 4, 5))


def test_flatten_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"flatten2: axis 4 is out of range \[0, 3\] for "
                                                           r"X 'x' \[-1, 3, 4\]"):
            fluid.layers.flatten(x, axis=4)
        with pytest.raises(ValueError, match="axis must be a non-negative int"):
            fluid.layers.flatten(x, axis=-1)
        block = fluid.default_main_program().global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"flatten2: axis -1 is out of range"):
            block.append_op(type="flatten2", inputs={"X": x}, outputs={"Out": out}, attrs={"axis": -1})
