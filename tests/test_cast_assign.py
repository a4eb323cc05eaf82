"""cast (every dtype pair, gradient), assign (any dtype, gradient) and assign_value."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.framework import convert_np_dtype_to_dtype_
from op_test import OpTest

DTYPES = ["bool", "int32", "int64", "float32", "float64"]


def run(main, feed=None, fetch_list=()):
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed or {}, fetch_list=list(fetch_list))


def vt(dtype):
    return int(convert_np_dtype_to_dtype_(dtype))


def source_values(dtype):
    # Values whose conversion to every other dtype is well defined (no overflow, no NaN).
    if dtype == "bool":
        return np.array([[True, False, True], [False, False, True]])
    if dtype.startswith("int"):
        return np.array([[-3, 0, 1], [7, 100, -128]], dtype)
    return np.array([[-2.75, 0.0, 0.5], [3.25, 99.9, -1e-3]], dtype)


# ----------------------------------------------------------------------------------------------- cast

@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_all_pairs(src, dst):
    x = source_values(src)
    OpTest("cast", {"X": x}, {"Out": x.astype(dst)}, {"in_dtype": vt(src), "out_dtype": vt(dst)}).check_output()


@pytest.mark.parametrize("src,dst", [("float32", "int64"), ("int32", "float64"), ("float64", "bool"),
                                     ("bool", "float32"), ("int64", "int32")])
def test_cast_layer_compile_time_dtype(src, dst):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype=src)
        y = fluid.layers.cast(x, dst)
    assert y.dtype == convert_np_dtype_to_dtype_(dst)
    assert y.shape == (-1, 3)
    xv = source_values(src).reshape(-1, 3)
    (got,) = run(main, {"x": xv}, [y])
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, xv.astype(dst))


def test_cast_uint8_and_int8():
    x = np.array([0, 5, 200], "int32")
    OpTest("cast", {"X": x}, {"Out": x.astype("uint8")}, {"in_dtype": vt("int32"), "out_dtype": vt("uint8")}).check_output()
    y = np.array([0, 5, 120], "uint8")
    OpTest("cast", {"X": y}, {"Out": y.astype("int8")}, {"in_dtype": vt("uint8"), "out_dtype": vt("int8")}).check_output()


def test_cast_unsupported_out_dtype():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        with pytest.raises(core.EnforceNotMet, match=r"cast: out_dtype float16 \(4\) of Out '.*' is not supported"):
            fluid.layers.cast(x, "float16")


def test_cast_grad_op_is_inverse_cast():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        y = fluid.layers.cast(x, "float64")
    (g,) = core.make_grad_ops(y.op.desc, set())
    assert g.type() == "cast"
    assert g.input("X") == [y.name + "@GRAD"] and g.output("Out") == ["x@GRAD"]
    assert g.attr("in_dtype") == vt("float64") and g.attr("out_dtype") == vt("float32")


def test_cast_gradient_values_and_dtype():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float32", append_batch_size=False, stop_gradient=False)
        dout = fluid.layers.data("dout", shape=[2, 3], dtype="float64", append_batch_size=False)
        y = fluid.layers.cast(x, "float64")
        (gx,) = fluid.gradients([y], [x], target_gradients=[dout])
    assert gx.dtype == x.dtype
    dv = np.random.rand(2, 3)
    (got,) = run(main, {"x": np.random.rand(2, 3).astype("float32"), "dout": dv}, [gx])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, dv.astype("float32"))


def test_cast_check_grad():
    x = np.random.RandomState(0).uniform(-1, 1, (3, 4))
    OpTest("cast", {"X": x}, {"Out": x}, {"in_dtype": vt("float64"), "out_dtype": vt("float64")}).check_grad(["X"], "Out")


# --------------------------------------------------------------------------------------------- assign

@pytest.mark.parametrize("dtype", DTYPES + ["uint8", "int8", "int16"])
@pytest.mark.parametrize("shape", [(2, 3), (1,), (4, 1, 2), (0, 2)])
def test_assign_any_dtype(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)
    OpTest("assign", {"X": x}, {"Out": x}).check_output()


def test_assign_layer_to_existing_output_is_a_copy():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        out = fluid.layers.create_tensor("float32")
        r = fluid.layers.assign(x, out)
        doubled = fluid.layers.scale(out, scale=2.0)
    assert r is out
    xv = np.random.rand(2, 3).astype("float32")
    got, got2 = run(main, {"x": xv}, [out, doubled])
    np.testing.assert_array_equal(got, xv)
    np.testing.assert_array_equal(got2, 2 * xv)


def test_assign_uninitialized_input():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="never_set", shape=[2], dtype="float32")
    out = block.create_var(name="out", dtype="float32")
    block.append_op(type="assign", inputs={"X": x}, outputs={"Out": out})
    with pytest.raises(core.EnforceNotMet, match="assign.*never_set.*not initialized"):
        run(main, fetch_list=[out])


def test_assign_gradient():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 2], dtype="float64", append_batch_size=False, stop_gradient=False)
        dout = fluid.layers.data("dout", shape=[2, 2], dtype="float64", append_batch_size=False)
        y = fluid.layers.assign(x)
        (gx,) = fluid.gradients([y], [x], target_gradients=[dout])
    assert [op.type for op in main.global_block().ops].count("assign") == 3  # forward, seed, grad
    dv = np.random.rand(2, 2)
    np.testing.assert_array_equal(run(main, {"x": np.zeros((2, 2)), "dout": dv}, [gx])[0], dv)


def test_assign_check_grad():
    x = np.random.RandomState(1).uniform(-1, 1, (2, 5))
    OpTest("assign", {"X": x}, {"Out": x}).check_grad(["X"], "Out")


# --------------------------------------------------------------------------------------- assign_value

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (1,), (3, 1, 2)])
def test_assign_value_via_layer(dtype, shape):
    rng = np.random.RandomState(0)
    value = (rng.uniform(-50, 50, shape) > 0) if dtype == "bool" else rng.uniform(-50, 50, shape).astype(dtype)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.assign(value)
    assert out.op.type == "assign_value"
    assert out.shape == shape and out.dtype == convert_np_dtype_to_dtype_(dtype)
    (got,) = run(main, fetch_list=[out])
    assert got.dtype == np.dtype(dtype)
    # float64 travels as fp32_values, as in Fluid.
    want = value.astype("float32").astype(dtype) if dtype == "float64" else value
    np.testing.assert_array_equal(got, want)


def test_assign_value_int64_exact():
    big = np.array([2 ** 62 + 1, -(2 ** 40) - 3], "int64")
    OpTest("assign_value", {}, {"Out": big},
           {"shape": [2], "dtype": vt("int64"), "int64_values": big.tolist()}).check_output()


def test_numpy_array_initializer():
    value = np.arange(12, dtype="float32").reshape(3, 4) / 7
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = fluid.layers.create_parameter([3, 4], "float32", name="w",
                                          default_initializer=fluid.initializer.NumpyArrayInitializer(value))
    assert [op.type for op in startup.global_block().ops] == ["assign_value"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    np.testing.assert_array_equal(exe.run(main, fetch_list=[w])[0], value)


def _assign_value_op(attrs):
    main = fluid.Program()
    block = main.global_block()
    out = block.create_var(name="const_out", dtype="float32")
    block.append_op(type="assign_value", outputs={"Out": out}, attrs=attrs)


def test_assign_value_count_mismatch():
    with pytest.raises(core.EnforceNotMet, match=r"assign_value: Out 'const_out' shape \[2, 3\] has 6 elements but "
                                                 r"fp32_values holds 5 values"):
        _assign_value_op({"shape": [2, 3], "dtype": vt("float32"), "fp32_values": [1.0] * 5})
    with pytest.raises(core.EnforceNotMet, match=r"int32_values holds 0 values"):
        _assign_value_op({"shape": [2], "dtype": vt("int32"), "fp32_values": [1.0, 2.0]})


def test_assign_value_unsupported_dtype_and_negative_shape():
    with pytest.raises(core.EnforceNotMet, match="assign_value: dtype int16 of Out 'const_out' is not supported"):
        _assign_value_op({"shape": [1], "dtype": vt("int16"), "int32_values": [1]})
    with pytest.raises(core.EnforceNotMet, match=r"assign_value: attribute shape \[-1, 2\] has a negative dim"):
        _assign_value_op({"shape": [-1, 2], "dtype": vt("float32"), "fp32_values": [1.0, 2.0]})
