"""fill_constant: every dtype, exact int64 values, empty and negative shapes."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
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
