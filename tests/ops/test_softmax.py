"""softmax: forward vs numpy (axes, dtypes, large logits), gradients vs central differences, axis errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


SOFTMAX_CASES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3),
                 ((4, 1), -1), ((2, 37), -1), ((2, 1, 3), 1)]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_forward(shape, axis, dtype):
    x = np.random.RandomState(0).uniform(-3, 3, shape).astype(dtype)
    OpTest("softmax", {"X": x}, {"Out": np_softmax(x, axis).astype(dtype)}, {"axis": axis}).check_output()


def test_softmax_large_logits_stay_finite():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1e30]], dtype="float32")
    OpTest("softmax", {"X": x}, {"Out": np_softmax(x.astype("float64")).astype("float32")}).check_output()


def check_program_grad(main, feed, loss, x_name, grad_var, rtol=1e-5):
    """Analytic gradient of `loss` w.r.t. feed[x_name] against central differences."""
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed=feed, fetch_list=[grad_var])
    want = OpTest._numeric_grad(exe, main, feed, x_name, loss, 1e-6)
    assert np.abs(want).max() > 1e-3  # the loss really depends on x
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-8)


@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 4), 1), ((3, 2), 0), ((2, 3, 2), 0)])
def test_softmax_grad(shape, axis):
    # mean(softmax) is constant, so weight the softmax by a soft-label cross entropy to get a real gradient.
    rng = np.random.RandomState(1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=list(shape), dtype="float64", append_batch_size=False)
        w = fluid.layers.data(name="w", shape=list(shape), dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y = fluid.layers.softmax(x, axis=axis)
        loss = fluid.layers.mean(fluid.layers.cross_entropy(y, w, soft_label=True))
        g, = fluid.gradients([loss], [x])
    feed = {"x": rng.uniform(-2, 2, shape), "w": rng.uniform(0, 1, shape)}
    check_program_grad(main, feed, loss, "x", g)
    # and the plain OpTest path (gradient ~0 along the axis) must agree too
    OpTest("softmax", {"X": feed["x"]}, {"Out": np_softmax(feed["x"], axis)}, {"axis": axis}).check_grad(["X"], "Out")


def test_softmax_grad_op_uses_out_only():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        y = fluid.layers.softmax(x)
        loss = fluid.layers.reduce_max(y, dim=[0, 1])
        gx, = fluid.gradients([loss], [x])
    grad_op = [op for op in main.global_block().ops if op.type == "softmax_grad"][0]
    assert sorted(grad_op.input_names) == ["Out", "Out@GRAD"]
    # d max(softmax)/dx, checked by hand: row r*, col c*: y(1-y) at the max, -y_max*y_j elsewhere in that row
    xv = np.random.RandomState(3).uniform(-1, 1, (3, 4))
    g, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[gx])
    y = np_softmax(xv)
    r, c = np.unravel_index(y.argmax(), y.shape)
    want = np.zeros_like(xv)
    want[r] = -y[r, c] * y[r]
    want[r, c] += y[r, c]
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-14)


def test_softmax_axis_out_of_range():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="xs", shape=[3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"softmax: axis=2 is out of range for X 'xs' \[3, 4\]"):
            fluid.layers.softmax(x, axis=2)
