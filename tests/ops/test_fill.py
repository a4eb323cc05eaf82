"""The fill ops (kernels/fill.cc). fill_constant: every dtype, exact int64 values, empty and negative shapes.
fill_any_like: X's run-time shape, value and dtype. fill_zeros_like: every dtype, buffer reuse, uninitialized
input. fill_constant_batch_size_like: a constant tensor of `shape` whose dim output_dim_idx is Input's dim
input_dim_idx at run time, no gradient, index errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.framework import convert_np_dtype_to_dtype_
from op_test import OpTest


def run(main, startup=None, feed=None, fetch_list=()):
    exe = fluid.Executor(fluid.CPUPlace())
    if startup is not None:
        exe.run(startup)
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch_list))


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


# ------------------------------------------------------------------ fill_any_like (kernels/fill_constant.cc)

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("shape", [(2, 3), (1,), (4, 0, 2)])
def test_fill_any_like(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)
    value = {"bool": 1.0, "int32": -3.0, "int64": 7.0}.get(dtype, 2.5)
    OpTest("fill_any_like", {"X": x}, {"Out": np.full(shape, value, dtype)}, {"value": value}).check_output()
    OpTest("fill_any_like", {"X": x}, {"Out": np.zeros(shape, dtype)}).check_output()  # value defaults to 0


def test_fill_any_like_int_value_truncates_toward_zero():
    x = np.zeros((2, 2), "int64")
    OpTest("fill_any_like", {"X": x}, {"Out": np.full((2, 2), -2, "int64")}, {"value": -2.75}).check_output()


@pytest.mark.parametrize("src,dst", [("int32", "float64"), ("float32", "int64"), ("float64", "bool")])
def test_fill_any_like_dtype_attribute(src, dst):
    x = np.ones((3, 2), src)
    OpTest("fill_any_like", {"X": x}, {"Out": np.full((3, 2), 1.0, dst)},
           {"value": 1.0, "dtype": int(fluid.framework.convert_np_dtype_to_dtype_(dst))}).check_output()


def test_fill_any_like_takes_the_run_time_shape():
    # backward seeds the gradient of a target whose batch dim is known only when it runs
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float64")
        out = block.create_var(name="ones", dtype="float64")
        block.append_op(type="fill_any_like", inputs={"X": [x]}, outputs={"Out": [out]}, attrs={"value": 1.0})
    assert out.shape == (-1, 3) and out.dtype == x.dtype
    assert core.op_proto("fill_any_like")["grad"] == "no_gradient"
    exe = fluid.Executor(fluid.CPUPlace())
    for n in (2, 5, 1):
        (got,) = exe.run(main, feed={"x": np.full((n, 3), 9.0)}, fetch_list=[out])
        np.testing.assert_array_equal(got, np.ones((n, 3)))


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


def vt(dtype):
    return int(convert_np_dtype_to_dtype_(dtype))


# Input shape, shape attribute, input_dim_idx, output_dim_idx, expected Out shape
CASES = [
    ((4, 3), [-1, 7], 0, 0, (4, 7)),
    ((4, 3), [5, 1, 2], 0, 1, (5, 4, 2)),
    ((2, 6, 3), [9, 2], 1, 0, (6, 2)),
    ((2, 6, 3), [-1], 2, 0, (3,)),
    ((1, 5), [2, 2], 1, 1, (2, 5)),
]


@pytest.mark.parametrize("in_shape,shape,in_idx,out_idx,want", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_values_and_shape(in_shape, shape, in_idx, out_idx, want, dtype):
    x = np.zeros(in_shape, "float32")
    value = -1.5 if dtype.startswith("float") else 4.0
    OpTest("fill_constant_batch_size_like", {"Input": x}, {"Out": np.full(want, value, dtype)},
           {"shape": shape, "value": value, "dtype": vt(dtype), "input_dim_idx": in_idx,
            "output_dim_idx": out_idx}).check_output(atol=0, rtol=0)


def test_default_indices_and_value():
    x = np.ones((3, 8), "float64")
    OpTest("fill_constant_batch_size_like", {"Input": x}, {"Out": np.zeros((3, 2), "float32")},
           {"shape": [-1, 2]}).check_output()


def _program(dtype="float32", **attrs):
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float64")  # [-1, 3]: the batch is known when it runs
        out = block.create_var(name="boot", dtype=dtype)
        block.append_op(type="fill_constant_batch_size_like", inputs={"Input": [x]}, outputs={"Out": [out]},
                        attrs=dict({"dtype": vt(dtype)}, **attrs))
    return main, out


def test_batch_size_taken_at_run_time():
    main, out = _program(shape=[-1, 5], value=2.0)
    assert out.shape == (-1, 5) and out.dtype == core.VarDesc.VarType.FP32
    exe = fluid.Executor(fluid.CPUPlace())
    for n in (2, 7, 1):  # the output buffer is reused: shape and values follow each run's batch
        (got,) = exe.run(main, feed={"x": np.zeros((n, 3))}, fetch_list=[out])
        np.testing.assert_array_equal(got, np.full((n, 5), 2.0, "float32"))


def test_no_gradient():
    assert core.op_proto("fill_constant_batch_size_like")["grad"] == "no_gradient"
    main, out = _program(shape=[-1, 5], value=2.0)
    assert core.make_grad_ops(main.global_block().ops[-1].desc, set()) == []


@pytest.mark.parametrize("attrs,match", [
    ({"shape": [-1, 5], "input_dim_idx": 2},
     r"fill_constant_batch_size_like: input_dim_idx 2 is out of range for Input 'x' \[-1, 3\]"),
    ({"shape": [-1, 5], "output_dim_idx": 2},
     r"fill_constant_batch_size_like: output_dim_idx 2 is out of range for shape of rank 2"),
])
def test_index_errors_at_build_time(attrs, match):
    with pytest.raises(core.EnforceNotMet, match=match):
        _program(**attrs)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_bool_dtype(value):
    """Fluid 1.8 has a bool kernel: BeamSearchDecoder and GreedyEmbeddingHelper make their finished flags so."""
    main, out = _program("bool", shape=[-1, 2], value=value)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.zeros((3, 3))}, fetch_list=[out])
    np.testing.assert_array_equal(got, np.full((3, 2), bool(value)))


# ------------------------------------------------------------------ layers: fill_constant_batch_size_like, *_like

def test_fill_constant_batch_size_like_layer():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float64")  # [-1, 3]
        boot = fluid.layers.fill_constant_batch_size_like(x, shape=[-1, 4], dtype="int64", value=7)
        col = fluid.layers.fill_constant_batch_size_like(x, [2, -1, 1], "float32", 0.5, input_dim_idx=1,
                                                         output_dim_idx=1)
        assert boot.shape == (-1, 4) and boot.dtype == core.VarDesc.VarType.INT64 and boot.stop_gradient
        assert col.shape == (2, 3, 1)
        with pytest.raises(core.EnforceNotMet, match=r"fill_constant_batch_size_like: input_dim_idx 5 is out of "
                                                     r"range for Input 'x' \[-1, 3\]"):
            fluid.layers.fill_constant_batch_size_like(x, [-1, 4], "float32", 0.0, input_dim_idx=5)
        with pytest.raises(TypeError, match="fill_constant_batch_size_like: 'input' must be a Variable, got list"):
            fluid.layers.fill_constant_batch_size_like([1, 2], [-1, 4], "float32", 0.0)
    a, b = run(main, feed={"x": np.zeros((5, 3))}, fetch_list=[boot, col])
    np.testing.assert_array_equal(a, np.full((5, 4), 7, "int64"))
    np.testing.assert_array_equal(b, np.full((2, 3, 1), 0.5, "float32"))


def test_ones_like_zeros_like_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float64")
        i = fluid.layers.data("i", shape=[2], dtype="int32", append_batch_size=False)
        ones, zeros, ones_i = fluid.layers.ones_like(x), fluid.layers.zeros_like(x), fluid.layers.ones_like(i)
        target = fluid.layers.create_tensor("float64")
        same = fluid.layers.ones_like(x, out=target)
        assert same is target and ones.dtype == x.dtype and ones.stop_gradient and zeros.stop_gradient
        with pytest.raises(TypeError, match="ones_like: 'x' must be a Variable, got ndarray"):
            fluid.layers.ones_like(np.zeros(3))
        with pytest.raises(TypeError, match="zeros_like: 'x' must be a Variable, got int"):
            fluid.layers.zeros_like(3)
    got = run(main, feed={"x": np.full((4, 3), 9.0), "i": np.array([5, 6], "int32")},
              fetch_list=[ones, zeros, ones_i, target])
    np.testing.assert_array_equal(got[0], np.ones((4, 3)))
    np.testing.assert_array_equal(got[1], np.zeros((4, 3)))
    np.testing.assert_array_equal(got[2], np.ones(2, "int32"))
    assert got[2].dtype == np.int32
    np.testing.assert_array_equal(got[3], np.ones((4, 3)))


def test_full_like_layer():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2], dtype="float32")
        same = fluid.layers.full_like(x, 2.5)
        ints = fluid.layers.full_like(x, 7, dtype="int64")
        assert same.dtype == core.VarDesc.VarType.FP32 and ints.dtype == core.VarDesc.VarType.INT64
        with pytest.raises(TypeError, match="full_like: 'input' must be a Variable, got float"):
            fluid.layers.full_like(1.0, 2)
    a, b = run(main, feed={"x": np.zeros((3, 2), "float32")}, fetch_list=[same, ints])
    np.testing.assert_array_equal(a, np.full((3, 2), 2.5, "float32"))
    np.testing.assert_array_equal(b, np.full((3, 2), 7, "int64"))
    assert b.dtype == np.int64
