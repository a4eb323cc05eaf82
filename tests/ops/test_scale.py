"""scale: forward on float and int dtypes, the layer, its gradient (a scale op)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest

SHAPES = [(3, 4), (1,), (2, 1, 5), (1, 1)]


def run(main, startup=None, feed=None, fetch_list=()):
    exe = fluid.Executor(fluid.CPUPlace())
    if startup is not None:
        exe.run(startup)
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch_list))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias_after_scale", [True, False])
def test_scale_float(shape, dtype, bias_after_scale):
    x = np.random.RandomState(0).uniform(-2, 2, shape).astype(dtype)
    s, b = 1.5, -0.25
    want = s * x + b if bias_after_scale else s * (x + b)
    OpTest("scale", {"X": x}, {"Out": want.astype(dtype)},
           {"scale": s, "bias": b, "bias_after_scale": bias_after_scale}).check_output()


def test_scale_defaults_are_identity():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    OpTest("scale", {"X": x}, {"Out": x}).check_output()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_scale_int(dtype):
    x = np.arange(-6, 6, dtype=dtype).reshape(3, 4)
    OpTest("scale", {"X": x}, {"Out": (3 * x + 2).astype(dtype)}, {"scale": 3.0, "bias": 2.0}).check_output()
    OpTest("scale", {"X": x}, {"Out": (3 * (x + 2)).astype(dtype)},
           {"scale": 3.0, "bias": 2.0, "bias_after_scale": False}).check_output()


def test_scale_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0, bias=1.0)
        z = -x
    assert y.shape == (-1, 3) and y.dtype == x.dtype
    xv = np.array([[1, 2, 3], [4, 5, 6]], "float32")
    got_y, got_z = run(main, startup, {"x": xv}, [y, z])
    np.testing.assert_allclose(got_y, 2 * xv + 1)
    np.testing.assert_allclose(got_z, -xv)


@pytest.mark.parametrize("bias_after_scale", [True, False])
def test_scale_check_grad(bias_after_scale):
    x = np.random.RandomState(1).uniform(-1, 1, (3, 4))
    s, b = -2.5, 0.75
    want = s * x + b if bias_after_scale else s * (x + b)
    OpTest("scale", {"X": x}, {"Out": want},
           {"scale": s, "bias": b, "bias_after_scale": bias_after_scale}).check_grad(["X"], "Out")


@pytest.mark.parametrize("bias_after_scale", [True, False])
def test_scale_gradient_is_scale_times_out_grad(bias_after_scale):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float64", append_batch_size=False, stop_gradient=False)
        dout = fluid.layers.data("dout", shape=[2, 3], dtype="float64", append_batch_size=False)
        y = fluid.layers.scale(x, scale=-1.5, bias=4.0, bias_after_scale=bias_after_scale)
        (gx,) = fluid.gradients([y], [x], target_gradients=[dout])
    dv = np.random.rand(2, 3)
    np.testing.assert_allclose(run(main, feed={"x": np.random.rand(2, 3), "dout": dv}, fetch_list=[gx])[0],
                               -1.5 * dv, rtol=1e-15)


def test_scale_grad_op_is_scale_without_bias():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[2], dtype="float32")
    out = block.create_var(name="out", dtype="float32")
    op = block.append_op(type="scale", inputs={"X": x}, outputs={"Out": out},
                         attrs={"scale": 3.0, "bias": 5.0})
    (g,) = core.make_grad_ops(op.desc, set())
    assert g.type() == "scale"
    assert g.input("X") == ["out@GRAD"] and g.output("Out") == ["x@GRAD"]
    assert g.attr("scale") == 3.0 and g.attr("bias") == 0.0


def test_scale_bool_has_no_kernel():
    x = np.array([True, False])
    with pytest.raises(core.EnforceNotMet, match="scale.*kernel.*bool"):
        OpTest("scale", {"X": x}, {"Out": x}).check_output()
