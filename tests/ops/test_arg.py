"""arg_max, arg_min and argsort: forward against numpy, argsort's gradient, the layers and their errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(3)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


ARG_CASES = [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3)]


@pytest.mark.parametrize("op_type,np_fn", [("arg_max", np.argmax), ("arg_min", np.argmin)])
@pytest.mark.parametrize("shape,axis", ARG_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_min_max_forward(op_type, np_fn, shape, axis, dtype, keepdims):
    x = (rand(*shape) * 4).astype(dtype)  # ints: many ties, the first wins as in numpy
    want = np_fn(x, axis=axis)
    if keepdims:
        want = np.expand_dims(want, axis)
    OpTest(op_type, {"X": x}, {"Out": want.reshape(want.shape or (1,)).astype("int64")},
           {"axis": axis, "keepdims": keepdims}).check_output()


@pytest.mark.parametrize("op_type,np_fn", [("arg_max", np.argmax), ("arg_min", np.argmin)])
def test_arg_min_max_flatten_dtype_and_nan(op_type, np_fn):
    x = rand(3, 4)
    OpTest(op_type, {"X": x}, {"Out": np.array([np_fn(x)], "int32")},
           {"axis": 0, "flatten": True, "dtype": 2}).check_output()
    OpTest(op_type, {"X": x}, {"Out": np_fn(x, axis=1).astype("int64")}, {"axis": 1, "dtype": 3}).check_output()
    x[1, 2] = np.nan
    x[2, 0] = np.nan
    OpTest(op_type, {"X": x}, {"Out": np_fn(x, axis=1)}, {"axis": 1}).check_output()


def test_argmax_argmin_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32", append_batch_size=False)
        amax = fluid.layers.argmax(x)  # Fluid's default axis is 0
        amin = fluid.layers.argmin(x, axis=-1)
        assert amax.shape == (4,) and amin.shape == (3,)
        assert amax.dtype == fluid.core.VarDesc.VarType.INT64 and amax.stop_gradient
    xv = rand(3, 4, dtype="float32")
    a, b = run(main, {"x": xv}, [amax, amin])
    np.testing.assert_array_equal(a, xv.argmax(0))
    np.testing.assert_array_equal(b, xv.argmin(-1))


def test_arg_min_max_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"arg_max: axis=2 is out of range for X 'x' \[3, 4\] "
                                                           r"\(rank 2, valid range \[-2, 2\)\)"):
            fluid.layers.argmax(x, axis=2)
        with pytest.raises(TypeError, match="argmin: 'x' must be a Variable, got list"):
            fluid.layers.argmin([1, 2])
    block = main.global_block()
    with pytest.raises(fluid.core.EnforceNotMet, match=r"arg_min: attribute dtype must be int32 \(2\) or int64 \(3\) "
                                                       r"or -1 \(int64\), got 5"):
        block.append_op(type="arg_min", inputs={"X": [x]}, outputs={"Out": [declare(block, "o", None)]},
                        attrs={"axis": 0, "dtype": 5})


# ------------------------------------------------------------------ argsort

SORT_CASES = [((6,), -1), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)]


def np_argsort(x, axis, descending):
    if descending:  # stable descending: a stable ascending sort of the negated keys
        ids = np.argsort(-x, axis=axis, kind="stable")
    else:
        ids = np.argsort(x, axis=axis, kind="stable")
    return np.take_along_axis(x, ids, axis), ids


@pytest.mark.parametrize("shape,axis", SORT_CASES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_argsort_forward(shape, axis, descending, dtype):
    x = (rand(*shape) * 3).astype(dtype)  # ints: ties, kept in order
    out, ids = np_argsort(x, axis, descending)
    OpTest("argsort", {"X": x}, {"Out": out, "Indices": ids.astype("int64")},
           {"axis": axis, "descending": descending}).check_output()


def test_argsort_nan_sorts_as_largest():
    x = np.array([[0.5, np.nan, -1.0, 2.0]])
    OpTest("argsort", {"X": x}, {"Out": np.array([[-1.0, 0.5, 2.0, np.nan]]), "Indices": np.array([[2, 0, 3, 1]])},
           {"axis": 1}).check_output(equal_nan=True)
    OpTest("argsort", {"X": x}, {"Out": np.array([[np.nan, 2.0, 0.5, -1.0]]), "Indices": np.array([[1, 3, 0, 2]])},
           {"axis": 1, "descending": True}).check_output(equal_nan=True)


@pytest.mark.parametrize("shape,axis", SORT_CASES)
def test_argsort_grad(shape, axis):
    x = rand(*shape)
    out, ids = np_argsort(x, axis, False)
    OpTest("argsort", {"X": x}, {"Out": out, "Indices": ids}, {"axis": axis}).check_grad(["X"], "Out")


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_layer_weighted_grad(descending):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float64", append_batch_size=False)
        w = fluid.layers.data("w", shape=[3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        out, ids = fluid.layers.argsort(x, axis=1, descending=descending)
        assert out.shape == (3, 4) and ids.shape == (3, 4) and ids.stop_gradient
        gx, = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x])
    xv, wv = rand(3, 4), rand(3, 4)
    o, i, g = run(main, {"x": xv, "w": wv}, [out, ids, gx])
    want_o, want_i = np_argsort(xv, 1, descending)
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_allclose(o, want_o)
    want_g = np.zeros_like(xv)
    np.put_along_axis(want_g, want_i, wv, axis=1)
    np.testing.assert_allclose(g, want_g)


def test_argsort_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"argsort: axis=-3 is out of range for X 'x' \[3, 4\]"):
            fluid.layers.argsort(x, axis=-3)
        with pytest.raises(TypeError, match="argsort: 'input' must be a Variable, got ndarray"):
            fluid.layers.argsort(np.zeros(3))
