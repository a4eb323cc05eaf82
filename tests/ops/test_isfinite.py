"""isfinite / isinf / isnan / is_empty (kernels/isfinite.cc): one bool of shape [1] per op, checked against numpy
for float, double and integer inputs; the layers isfinite, has_inf, has_nan (tensor.py) and is_empty
(control_flow.py)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

REF = {"isfinite": lambda x: np.isfinite(x).all(), "isinf": lambda x: np.isinf(x).any(),
       "isnan": lambda x: np.isnan(x).any()}
VALUES = {"clean": [1.0, -2.0, 0.0, 3.5], "inf": [1.0, np.inf, 0.0, 2.0], "-inf": [-np.inf, 1.0, 2.0, 3.0],
          "nan": [1.0, 2.0, np.nan, 3.0], "both": [np.nan, 1.0, -np.inf, 0.0]}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(VALUES))
@pytest.mark.parametrize("op", sorted(REF))
def test_float_forward(op, case, dtype):
    x = np.array(VALUES[case], dtype).reshape(2, 2)
    OpTest(op, {"X": x}, {"Out": np.array([REF[op](x)])}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", sorted(REF))
def test_integers_are_finite(op, dtype):
    x = np.array([[1, -5], [7, 0]], dtype)
    OpTest(op, {"X": x}, {"Out": np.array([REF[op](x)])}).check_output(atol=0, rtol=0)


def test_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float32", append_batch_size=False)
        outs = [fluid.layers.isfinite(x), fluid.layers.has_inf(x), fluid.layers.has_nan(x), fluid.layers.is_empty(x)]
    assert [op.type for op in main.global_block().ops] == ["isfinite", "isinf", "isnan", "is_empty"]
    assert all(tuple(o.shape) == (1,) and o.dtype == fluid.core.VarDesc.VarType.BOOL for o in outs)
    exe = fluid.Executor(fluid.CPUPlace())
    for case in sorted(VALUES):
        xv = np.array(VALUES[case], "float32")
        got = exe.run(main, feed={"x": xv}, fetch_list=outs)
        assert [bool(g[0]) for g in got] == [np.isfinite(xv).all(), np.isinf(xv).any(), np.isnan(xv).any(), False]


@pytest.mark.parametrize("shape", [(0,), (2, 0), (3,), (1, 1)], ids=str)
def test_is_empty(shape):
    x = np.zeros(shape, "float32")
    OpTest("is_empty", {"X": x}, {"Out": np.array([x.size == 0])}).check_output(atol=0, rtol=0)


def test_is_empty_cond_argument():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float32")
        cond = fluid.layers.create_tensor("bool")
        assert fluid.layers.is_empty(x, cond=cond) is cond
        with pytest.raises(TypeError, match="is_empty: cond must be a bool Variable, got"):
            fluid.layers.is_empty(x, cond=fluid.layers.create_tensor("float32"))
        with pytest.raises(TypeError, match="is_empty: 'x' must be a Variable, got list"):
            fluid.layers.is_empty([1, 2])
        with pytest.raises(TypeError, match="has_nan: 'x' must be a Variable, got ndarray"):
            fluid.layers.has_nan(np.zeros(3))
