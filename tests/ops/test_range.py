"""range and linspace: forward against numpy (arange / linspace), the layers, run-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run


INT_RANGES = [(0, 5, 1), (1, 10, 3), (10, 1, -2), (3, 3, 1), (-4, 7, 5)]
FLOAT_RANGES = INT_RANGES + [(-2.5, 1.0, 0.7), (1.0, 0.0, -0.25)]


@pytest.mark.parametrize("dtype,start,end,step", [(d,) + r for d in ("int32", "int64") for r in INT_RANGES]
                         + [(d,) + r for d in ("float32", "float64") for r in FLOAT_RANGES])
def test_range_forward(dtype, start, end, step):
    a = [np.array([v], dtype) for v in (start, end, step)]
    want = np.arange(a[0][0], a[1][0], a[2][0], dtype=dtype)
    OpTest("range", {"Start": a[0], "End": a[1], "Step": a[2]}, {"Out": want}).check_output()


@pytest.mark.parametrize("start,stop,num", [(0.0, 1.0, 5), (2.0, -3.0, 7), (1.5, 9.0, 1), (-1.0, 1.0, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linspace_forward(start, stop, num, dtype):
    OpTest("linspace", {"Start": np.array([start], dtype), "Stop": np.array([stop], dtype),
                        "Num": np.array([num], "int32")},
           {"Out": np.linspace(start, stop, num, dtype=dtype)}).check_output()


def test_range_linspace_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        r = fluid.layers.range(0, 10, 2, "int32")
        n = fluid.layers.data("n", shape=[1], dtype="int64", append_batch_size=False)
        rv = fluid.layers.range(1, n, 1, "int64")  # a Variable bound, read at run time
        rf = fluid.layers.range(0.5, 2, 0.5, "float64")
        ls = fluid.layers.linspace(0, 1, 5, "float32")
        lv = fluid.layers.linspace(fluid.layers.fill_constant([1], "float64", -1.0), 1.0, 3, "float64")
        assert r.dtype == fluid.core.VarDesc.VarType.INT32 and r.stop_gradient
        assert lv.dtype == fluid.core.VarDesc.VarType.FP64
    got = run(main, {"n": np.array([4], "int64")}, [r, rv, rf, ls, lv])
    np.testing.assert_array_equal(got[0], np.arange(0, 10, 2))
    np.testing.assert_array_equal(got[1], [1, 2, 3])
    np.testing.assert_allclose(got[2], [0.5, 1.0, 1.5])
    np.testing.assert_allclose(got[3], np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_allclose(got[4], [-1.0, 0.0, 1.0])
    assert got[0].dtype == np.int32 and got[1].dtype == np.int64 and got[3].dtype == np.float32


def test_range_linspace_errors():
    with pytest.raises(TypeError, match="range: dtype must be float32, float64, int32 or int64, got"):
        fluid.layers.range(0, 3, 1, "bool")
    with pytest.raises(TypeError, match="range: step must be a number or a Variable, got str"):
        fluid.layers.range(0, 3, "1", "int32")
    with pytest.raises(TypeError, match="linspace: dtype must be float32 or float64, got"):
        fluid.layers.linspace(0, 1, 3, "int32")
    with pytest.raises(ValueError, match="linspace: num must be >= 1, got 0"):
        fluid.layers.linspace(0, 1, 0, "float32")
    main = fluid.Program()
    block = main.global_block()
    s, e, st = (declare(block, n, [1], "int64") for n in ("s", "e", "st"))
    out = declare(block, "out", None, "int64")
    block.append_op(type="range", inputs={"Start": [s], "End": [e], "Step": [st]}, outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    one = lambda v: np.array([v], "int64")  # noqa: E731
    with pytest.raises(fluid.core.EnforceNotMet, match="range: Step 'st' must not be 0"):
        exe.run(main, feed={"s": one(0), "e": one(3), "st": one(0)}, fetch_list=[out])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"range: Step 'st' = -1 moves away from End 'e' = 3 \(Start "
                                                       r"'s' = 0\)"):
        exe.run(main, feed={"s": one(0), "e": one(3), "st": one(-1)}, fetch_list=[out])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"range: Start 's2' \[2\] must be a 1-element tensor"):
        block.append_op(type="range", inputs={"Start": [declare(block, "s2", [2], "int64")], "End": [e],
                                              "Step": [st]}, outputs={"Out": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"range: Start 's' \[1\] is int64 but End 'ef' "
                                                       r"\[1\] is float32"):
        block.append_op(type="range", inputs={"Start": [s], "End": [declare(block, "ef", [1], "float32")],
                                              "Step": [st]}, outputs={"Out": [out]})
    main2 = fluid.Program()
    with fluid.program_guard(main2, fluid.Program()):
        num = fluid.layers.data("num", shape=[1], dtype="int32", append_batch_size=False)
        ls = fluid.layers.linspace(0.0, 1.0, num, "float32")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linspace: Num 'num' = 0 must be >= 1"):
        exe.run(main2, feed={"num": np.array([0], "int32")}, fetch_list=[ls])
