"""assign (any dtype, gradient, tensor arrays) and assign_value (the layer, NumpyArrayInitializer, errors)."""
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


# ------------------------------------------------------------------ assign

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


# ------------------------------------------------------------------ assign_value

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


def test_assign_copies_a_tensor_array_entry_by_entry():
    L = fluid.layers
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[2], dtype="float32", lod_level=1)

        def index(i):
            return L.fill_constant(shape=[1], dtype="int64", value=i)

        arr = L.array_write(x, index(2))
        copy = L.assign(arr)  # a new array, as Fluid's assign InferVarType makes it
        target = L.create_array("float32")
        L.assign(arr, target)
        L.array_write(L.scale(x, scale=2.0), index(0), array=arr)  # after the copies: they do not see it
    assert copy.type == core.VarDesc.VarType.LOD_TENSOR_ARRAY and copy.dtype == arr.dtype
    xv = fluid.create_lod_tensor(np.arange(6, dtype="float32").reshape(3, 2), [[1, 2]], fluid.CPUPlace())
    got_copy, got_target, got_arr = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xv}, fetch_list=[copy, target, arr], return_numpy=False)
    for got in (got_copy, got_target):
        assert len(got) == 3 and not got[0]._is_initialized() and not got[1]._is_initialized()
        np.testing.assert_array_equal(np.array(got[2]), np.array(xv))
        assert got[2].recursive_sequence_lengths() == [[1, 2]]
    assert got_arr[0]._is_initialized()
