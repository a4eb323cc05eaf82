"""scale, fill_constant, increment and fill_zeros_like."""
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


# ---------------------------------------------------------------------------------------------- scale

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


# -------------------------------------------------------------------------------------- fill_constant

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "uint8", "int8", "int16"])
def test_fill_constant_dtypes(dtype):
    value = 1 if dtype == "bool" else 7
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.fill_constant([2, 3], dtype, value)
    assert out.shape == (2, 3)
    assert out.dtype == fluid.framework.convert_np_dtype_to_dtype_(dtype)
    (got,) = run(main, fetch_list=[out])
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.full((2, 3), value, dtype))


def test_fill_constant_float_value():
    out = np.full((4, 1), 0.1, "float32")
    OpTest("fill_constant", {}, {"Out": out}, {"shape": [4, 1], "value": 0.1}).check_output()


def test_fill_constant_int64_exact_via_str_value():
    big = 2 ** 62 + 1  # not representable as the float `value` attr
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.fill_constant([3], "int64", big)
        neg = fluid.layers.fill_constant([1], "int64", -big)
    got, got_neg = run(main, fetch_list=[out, neg])
    assert got.tolist() == [big] * 3 and got_neg.tolist() == [-big]


def test_fill_constant_bool_false_and_empty_shape():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        f = fluid.layers.fill_constant([2], "bool", 0)
        e = fluid.layers.fill_constant([0, 3], "float32", 1.0)
        ones = fluid.layers.ones([2], "int32")
        zeros = fluid.layers.zeros([2], "float64")
    got_f, got_e, got_1, got_0 = run(main, fetch_list=[f, e, ones, zeros])
    assert got_f.dtype == np.bool_ and not got_f.any()
    assert got_e.shape == (0, 3)
    np.testing.assert_array_equal(got_1, np.ones(2, "int32"))
    np.testing.assert_array_equal(got_0, np.zeros(2))


def test_fill_constant_negative_shape():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(core.EnforceNotMet, match=r"fill_constant.*\[2, -3\].*negative"):
            fluid.layers.fill_constant([2, -3], "float32", 1.0)


# ------------------------------------------------------------------------------------------ increment

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_increment(dtype):
    x = np.array([5], dtype)
    OpTest("increment", {"X": x}, {"Out": (x + 2).astype(dtype)}, {"step": 2.0}).check_output()
    OpTest("increment", {"X": x}, {"Out": (x + 1).astype(dtype)}).check_output()  # default step 1


def test_increment_fractional_and_negative_step():
    x = np.array([[1.5]], "float64")
    OpTest("increment", {"X": x}, {"Out": x - 0.25}, {"step": -0.25}).check_output()


def test_increment_in_place_counter_accumulates():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.create_global_var([1], 0, "int64", persistable=True, name="counter")
        out = fluid.layers.increment(i, 3)  # in place: Out is i
    assert out is i
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for k in range(1, 4):
        (got,) = exe.run(main, fetch_list=[i])
        assert got.tolist() == [3 * k]


def test_increment_not_in_place():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.fill_constant([1], "float32", 10.0)
        y = fluid.layers.increment(x, 0.5, in_place=False)
    got_x, got_y = run(main, fetch_list=[x, y])
    assert got_x.tolist() == [10.0] and got_y.tolist() == [10.5]


def test_increment_needs_one_element():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.fill_constant([2, 3], "float32", 1.0)
        with pytest.raises(core.EnforceNotMet, match=r"increment: X '.*' \[2, 3\] must have exactly one element"):
            fluid.layers.increment(x)


def test_increment_one_element_checked_at_run_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[1], dtype="float32")  # [-1, 1]: unknown until fed
        y = fluid.layers.increment(x, in_place=False)
    np.testing.assert_array_equal(run(main, feed={"x": np.ones((1, 1), "float32")}, fetch_list=[y])[0], [[2.0]])
    with pytest.raises(core.EnforceNotMet, match=r"increment: X 'x' \[3, 1\] must have exactly one element"):
        run(main, feed={"x": np.ones((3, 1), "float32")}, fetch_list=[y])


# ------------------------------------------------------------------------------------ fill_zeros_like

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(3, 4), (1,), (2, 0, 3)])
def test_fill_zeros_like(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) + 1).astype(dtype)
    OpTest("fill_zeros_like", {"X": x}, {"Out": np.zeros(shape, dtype)}).check_output()


def test_fill_zeros_like_layer_and_reuse():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2], dtype="float64")
        z = fluid.layers.zeros_like(x)
    assert z.dtype == x.dtype and z.shape == (-1, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    for n in (3, 1, 5):  # the output buffer is reused; it must still be all zero each time
        (got,) = exe.run(main, feed={"x": np.full((n, 2), 9.0)}, fetch_list=[z])
        np.testing.assert_array_equal(got, np.zeros((n, 2)))


def test_fill_zeros_like_uninitialized_input():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="never_set", shape=[2], dtype="float32")
    out = block.create_var(name="out", dtype="float32")
    block.append_op(type="fill_zeros_like", inputs={"X": x}, outputs={"Out": out})
    with pytest.raises(core.EnforceNotMet, match="fill_zeros_like.*never_set.*not initialized"):
        run(main, fetch_list=[out])
