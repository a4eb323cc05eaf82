"""cast: every dtype pair, the layer, its gradient (the inverse cast)."""
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
    OpTest("cast", {"X": x}, {"Out": x.astype("uint8")},
           {"in_dtype": vt("int32"), "out_dtype": vt("uint8")}).check_output()
    y = np.array([0, 5, 120], "uint8")
    OpTest("cast", {"X": y}, {"Out": y.astype("int8")},
           {"in_dtype": vt("uint8"), "out_dtype": vt("int8")}).check_output()


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
    OpTest("cast", {"X": x}, {"Out": x},
           {"in_dtype": vt("float64"), "out_dtype": vt("float64")}).check_grad(["X"], "Out")
