"""less_than, less_equal, greater_than, greater_equal, equal, not_equal: bool results against numpy on the
elementwise broadcast layouts and every kernel dtype (with many ties), the layers, no gradient through them,
errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest

rng = np.random.RandomState(23)

NP_OPS = {
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}

# (X shape, Y shape, axis, Y as numpy broadcasts it): Fluid's axis rule spelled out, as in test_elementwise.py.
CASES = [
    ((3, 4), (3, 4), -1, None),                # same shape
    ((2, 3, 4), (3,), 1, (1, 3, 1)),           # [pre, n, post]
    ((2, 3, 4), (4,), -1, None),               # trailing
    ((2, 3, 4), (2, 3), 0, (2, 3, 1)),         # leading
    ((2, 3, 4), (1,), -1, None),               # scalar-like Y
    ((4, 1), (1, 5), -1, None),                # both sides broadcast
    ((1,), (2, 3), -1, None),                  # X is the small one
]
CASE_IDS = ["%s|%s|ax%d" % c[:3] for c in CASES]


def _inputs(xs, ys, dtype, yv=None):
    """Small integers (as dtype), drawn until the broadcast pairs hold a tie, a smaller and a greater X, so that
    every op gives both outcomes and the <= / >= / == edges are exercised."""
    while True:
        x, y = rng.randint(-2, 3, xs).astype(dtype), rng.randint(-2, 3, ys).astype(dtype)
        d = np.sign(x - (y if yv is None else y.reshape(yv)))
        if {-1, 0, 1} <= set(d.reshape(-1).tolist()):
            return x, y


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("op", sorted(NP_OPS))
def test_forward(op, dtype, case):
    xs, ys, axis, yv = case
    x, y = _inputs(xs, ys, dtype, yv)
    want = NP_OPS[op](x, y if yv is None else y.reshape(yv))
    assert want.dtype == np.bool_ and want.any() and not want.all()
    OpTest(op, {"X": x, "Y": y}, {"Out": want}, {"axis": axis}).check_output()


@pytest.mark.parametrize("op", sorted(NP_OPS))
def test_float_edge_values(op):
    x = np.array([0.0, -0.0, 1e-30, -np.inf, np.inf, 1.0, np.nan, np.nan], "float32")
    y = np.array([-0.0, 0.0, 0.0, -np.inf, 1e30, np.nextafter(np.float32(1), np.float32(2)), 1.0, np.nan], "float32")
    OpTest(op, {"X": x, "Y": y}, {"Out": NP_OPS[op](x, y)}).check_output()  # NaN: only not_equal is true


@pytest.mark.parametrize("op", sorted(NP_OPS))
def test_layer_bool_output_without_gradient(op):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        y = fluid.layers.data("y", shape=[3], dtype="float32")
        x.stop_gradient = False
        out = getattr(fluid.layers, op)(x, y)
    assert out.dtype == core.VarDesc.VarType.BOOL and out.shape == (-1, 3) and out.stop_gradient
    assert core.op_proto(op)["grad"] == "no_gradient"
    assert core.make_grad_ops(main.global_block().ops[-1].desc, set()) == []
    xv, yv = _inputs((4, 3), (4, 3), "float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=[out])
    np.testing.assert_array_equal(got, NP_OPS[op](xv, yv))


def test_dtype_mismatch_and_bad_broadcast_fail_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xc", shape=[2, 3], dtype="float32", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"greater_than: X 'xc' \[2, 3\] is float32 but Y 'yc' \[3\] is "
                                                     r"int64"):
            fluid.layers.greater_than(x, fluid.layers.data("yc", shape=[3], dtype="int64", append_batch_size=False))
        with pytest.raises(core.EnforceNotMet, match=r"equal: X 'xc' \[2, 3\] and Y 'yb' \[2\] cannot broadcast"):
            fluid.layers.equal(x, fluid.layers.data("yb", shape=[2], dtype="float32", append_batch_size=False))


def test_bool_inputs_have_no_kernel():
    x = np.array([True, False])
    with pytest.raises(core.EnforceNotMet, match="less_equal.*kernel.*bool"):
        OpTest("less_equal", {"X": x, "Y": x}, {"Out": x}).check_output()
