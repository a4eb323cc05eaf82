"""elementwise_{add,sub,mul,div,max,min,pow,floordiv,mod}: forward on many broadcast layouts and dtypes, gradients by
central differences, Fluid's tie rule for max/min, and build/run-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(7)

NP_OPS = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": lambda x, y: x / y if x.dtype.kind == "f" else np.trunc(x / y).astype(x.dtype),
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
}
INT_OPS = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_max", "elementwise_min"]

# (X shape, Y shape, axis, X as numpy broadcasts it, Y as numpy broadcasts it). The views spell out
# Fluid's axis rule independently of the kernel.
CASES = [
    ((13, 17), (13, 17), -1, None, None),                 # same shape: one flat loop
    ((2, 3, 4, 5), (3, 4), 1, None, (1, 3, 4, 1)),        # [pre, n, post]
    ((2, 3, 4, 5), (5,), -1, None, None),                 # trailing: [pre, n]
    ((2, 3, 4, 5), (2, 3), 0, None, (2, 3, 1, 1)),        # leading: [n, post]
    ((2, 3, 4, 5), (2, 1, 4, 1), -1, None, None),         # size-1 dims in Y
    ((2, 3, 4, 5), (1,), -1, None, None),                 # scalar-like Y
    ((2, 3, 4, 5), (3, 4, 1, 1), 1, None, (1, 3, 4, 1)),  # trailing 1s of Y trimmed to fit
    ((4, 1), (1, 6), -1, None, None),                     # both sides broadcast
    ((1,), (3, 5), -1, None, None),                       # X is the small one (2.0 - y style)
    ((3, 1, 5), (2, 3, 4, 5), -1, None, None),            # X smaller with a size-1 dim
    ((2, 3, 2, 3, 2), (3, 1, 3), 1, None, (1, 3, 1, 3, 1)),  # alternating pattern: general odometer
    ((2, 1, 3), (2, 1, 3), -1, None, None),               # size-1 dims on both, same shape
    ((1, 1), (1,), -1, None, None),                       # a single element
]
CASE_IDS = ["%s|%s|ax%d" % (c[0], c[1], c[2]) for c in CASES]


def _inputs(op, xs, ys, dtype):
    if np.dtype(dtype).kind == "i":
        x = rng.randint(-20, 20, size=xs).astype(dtype)
        y = rng.randint(-20, 20, size=ys).astype(dtype)
        if op == "elementwise_div":
            y[y == 0] = 3
        return x, y
    x = rng.uniform(-1, 1, size=xs).astype(dtype)
    y = rng.uniform(-1, 1, size=ys).astype(dtype)
    if op == "elementwise_pow":  # a positive base: real results and a defined dY = dOut * ln(X) * Out
        x = 0.5 + np.abs(x) * 1.5
        y = y * 2
    if op == "elementwise_div":  # keep away from 0
        y = (np.sign(y) + (y == 0)) * (0.5 + np.abs(y))
    if op in ("elementwise_max", "elementwise_min"):  # no near-ties: x on a 0.1 grid, y offset by 0.05
        x = np.round(x * 10) / 10
        y = np.round(y * 10) / 10 + 0.05
    return x.astype(dtype), y.astype(dtype)


def _expected(op, x, y, xv, yv):
    xb = x if xv is None else x.reshape(xv)
    yb = y if yv is None else y.reshape(yv)
    return NP_OPS[op](xb, yb)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("op", sorted(NP_OPS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_float(op, case, dtype):
    xs, ys, axis, xv, yv = case
    x, y = _inputs(op, xs, ys, dtype)
    out = _expected(op, x, y, xv, yv)
    assert out.dtype == np.dtype(dtype)
    OpTest(op, {"X": x, "Y": y}, {"Out": out}, {"axis": axis}).check_output()


@pytest.mark.parametrize("case", CASES[:7], ids=CASE_IDS[:7])
@pytest.mark.parametrize("op", INT_OPS + ["elementwise_div"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_forward_int(op, case, dtype):
    xs, ys, axis, xv, yv = case
    x, y = _inputs(op, xs, ys, dtype)
    OpTest(op, {"X": x, "Y": y}, {"Out": _expected(op, x, y, xv, yv)}, {"axis": axis}).check_output()


@pytest.mark.parametrize("op", sorted(NP_OPS))
def test_zero_size_output(op):
    x = np.zeros((0, 3), "float32")
    y = np.ones(3, "float32")
    OpTest(op, {"X": x, "Y": y}, {"Out": NP_OPS[op](x, y)}).check_output()


def test_pow_integers_round_to_nearest():
    x = np.array([3, -2, 2, 7, 10, 0, -3], dtype=np.int64)
    y = np.array([4, 3, -1, 0, 15, 5, 3], dtype=np.int64)
    want = np.array([81, -8, 0, 1, 10 ** 15, 0, -27], dtype=np.int64)  # 2 ** -1 = 0.5 rounds (to even) to 0
    OpTest("elementwise_pow", {"X": x, "Y": y}, {"Out": want}).check_output()
    OpTest("elementwise_pow", {"X": x[:4].astype(np.int32), "Y": y[:4].astype(np.int32)},
           {"Out": want[:4].astype(np.int32)}).check_output()


def test_pow_gradient_formulas():
    x = np.array([[0.5, 2.0, 3.0]])
    y = np.array([2.0, -1.0, 0.5])
    out, dx, dy = _grads("elementwise_pow", x, y)
    np.testing.assert_allclose(out, x ** y)
    np.testing.assert_allclose(dx, y * x ** (y - 1) / 3, rtol=1e-12)
    np.testing.assert_allclose(dy, (np.log(x) * x ** y).reshape(-1) / 3, rtol=1e-12)


def test_int_div_truncates_and_handles_min_over_minus_one():
    x = np.array([7, -7, 7, -7, np.iinfo(np.int32).min], dtype=np.int32)
    y = np.array([2, 2, -2, -2, -1], dtype=np.int32)
    want = np.array([3, -3, -3, 3, np.iinfo(np.int32).min], dtype=np.int32)  # C semantics, wrapping
    OpTest("elementwise_div", {"X": x, "Y": y}, {"Out": want}).check_output()


GRAD_CASES = [
    ((3, 4), (3, 4), -1),
    ((2, 3, 4, 2), (3, 4), 1),
    ((2, 3, 4), (4,), -1),
    ((2, 3, 2, 3), (2, 1, 2, 1), -1),
    ((2, 3, 4), (1,), -1),
    ((3, 1), (1, 4), -1),
    ((1,), (2, 3), -1),
    ((2, 3, 2, 3, 2), (3, 1, 3), 1),
    ((1, 1), (1,), -1),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=["%s|%s|ax%d" % c for c in GRAD_CASES])
@pytest.mark.parametrize("op", sorted(NP_OPS))
def test_grad(op, case):
    xs, ys, axis = case
    x, y = _inputs(op, xs, ys, "float64")
    t = OpTest(op, {"X": x, "Y": y}, {"Out": np.zeros(1)}, {"axis": axis})
    t.check_grad(["X", "Y"], "Out")


@pytest.mark.parametrize("op", ["elementwise_mul", "elementwise_div"])
def test_grad_only_one_input(op):
    x, y = _inputs(op, (2, 3, 4), (3,), "float64")
    t = OpTest(op, {"X": x, "Y": y}, {"Out": np.zeros(1)}, {"axis": 1})
    t.check_grad(["X"], "Out")
    t.check_grad(["Y"], "Out")


def _grads(op_type, x, y, axis=-1):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data(name="x", shape=list(x.shape), dtype=str(x.dtype), append_batch_size=False)
        yv = fluid.layers.data(name="y", shape=list(y.shape), dtype=str(y.dtype), append_batch_size=False)
        xv.stop_gradient = yv.stop_gradient = False
        out = getattr(fluid.layers, op_type)(xv, yv, axis=axis)
        loss = fluid.layers.mean(out)
        grads = fluid.gradients([loss], [xv, yv])
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed={"x": x, "y": y}, fetch_list=[out] + grads)


@pytest.mark.parametrize("op", ["elementwise_max", "elementwise_min"])
def test_max_min_ties_send_gradient_to_y(op):
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = np.array([1.0, 0.0, 9.0])
    out, dx, dy = _grads(op, x, y)
    n = out.size
    if op == "elementwise_max":
        mask_x = x > y
    else:
        mask_x = x < y
    np.testing.assert_array_equal(out, np.where(mask_x, x, y))
    np.testing.assert_allclose(dx, mask_x / n)
    np.testing.assert_allclose(dy, (~mask_x).sum(axis=0) / n)
    # x[0,0] == y[0] is a tie: it goes to Y. x[1,0] = 4 > y[0] goes to X for max and to Y for min.
    assert dx[0, 0] == 0.0
    assert dy[0] == (1.0 if op == "elementwise_max" else 2.0) / n


def test_bias_grad_reduces_over_batch_and_keeps_shapes():
    x = rng.uniform(-1, 1, (5, 4, 3))
    y = rng.uniform(-1, 1, (4,))
    out, dx, dy = _grads("elementwise_add", x, y, axis=1)
    np.testing.assert_allclose(out, x + y.reshape(1, 4, 1))
    assert dx.shape == x.shape and dy.shape == y.shape
    np.testing.assert_allclose(dx, np.full(x.shape, 1.0 / x.size))
    np.testing.assert_allclose(dy, np.full(y.shape, 15.0 / x.size))


def test_sub_grad_of_broadcast_x_negates_y():
    x = rng.uniform(-1, 1, (1, 3))
    y = rng.uniform(-1, 1, (4, 3))
    out, dx, dy = _grads("elementwise_sub", x, y)
    np.testing.assert_allclose(out, x - y)
    np.testing.assert_allclose(dx, np.full((1, 3), 4.0 / 12))
    np.testing.assert_allclose(dy, np.full((4, 3), -1.0 / 12))


# ------------------------------------------------------------------ compile-time shapes and errors

def _data(name, shape, dtype="float32"):
    return fluid.layers.data(name=name, shape=shape, dtype=dtype, append_batch_size=False)


@pytest.mark.parametrize("xs,ys,axis,want", [
    ([-1, 3, 4], [3, 4], 1, (-1, 3, 4)),
    ([-1, 3], [-1, 3], -1, (-1, 3)),
    ([-1, 1], [1, 5], -1, (-1, 5)),
    ([2, 3, 4, 5], [3, 4, 1], 1, (2, 3, 4, 5)),
    ([1], [-1, 6], -1, (-1, 6)),
])
def test_compile_time_shape(xs, ys, axis, want):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = fluid.layers.elementwise_mul(_data("x", xs), _data("y", ys), axis=axis)
    assert tuple(out.shape) == want


@pytest.mark.parametrize("op", sorted(NP_OPS))
@pytest.mark.parametrize("xs,ys,axis", [
    ([2, 3], [4], -1),
    ([-1, 3, 4], [3, 5], 1),
    ([2, 3, 4], [3, 4], 2),
    ([2, 3, 4], [3, 4], 5),
    ([2, 3], [3, 2], -1),
])
def test_incompatible_shapes_fail_at_build_time(op, xs, ys, axis):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = _data("xa", xs), _data("yb", ys)
        fmt = lambda s: r"\[" + ", ".join(str(d) for d in s) + r"\]"
        pattern = "%s: X 'xa' %s and Y 'yb' %s cannot broadcast with axis=%d" % (op, fmt(xs), fmt(ys), axis)
        with pytest.raises(fluid.core.EnforceNotMet, match=pattern):
            getattr(fluid.layers, op)(x, y, axis=axis)
        assert not [o for o in main.global_block().ops if o.type == op]  # the bad op was not kept


def test_unknown_dim_mismatch_found_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = fluid.layers.elementwise_add(_data("x", [-1, 3]), _data("y", [-1, 3]))
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"elementwise_add: X 'x' \[2, 3\] and Y 'y' \[4, 3\]"):
        exe.run(main, feed={"x": np.zeros((2, 3), "float32"), "y": np.zeros((4, 3), "float32")}, fetch_list=[out])


@pytest.mark.parametrize("build", [
    lambda x, y: fluid.layers.elementwise_add(x, y),
    lambda x, y: fluid.layers.less_than(x, y),
    lambda x, y: fluid.layers.mul(x, fluid.layers.reshape(y, [3, 1])),
    lambda x, y: fluid.layers.matmul(x, fluid.layers.reshape(y, [3, 1])),
], ids=["elementwise_add", "less_than", "mul", "matmul"])
def test_dtype_mismatch_fails_when_the_op_is_built(build):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = _data("x", [2, 3]), _data("y", [3], "float64")
        with pytest.raises(fluid.core.EnforceNotMet, match=r": X 'x' \[2, 3\] is float32 but Y '[^']+' \[3(, 1)?\] "
                                                          r"is float64; cast one of them \(layers.cast\)"):
            build(x, y)


def test_integer_division_by_zero_is_an_error_not_a_crash():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = fluid.layers.elementwise_div(_data("x", [3], "int32"), _data("y", [3], "int32"))
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match="elementwise_div: Y 'y' has a zero at flat index 1"):
        exe.run(main, feed={"x": np.array([1, 2, 3], "int32"), "y": np.array([1, 0, 3], "int32")},
                fetch_list=[out])


def test_operator_overloads_use_elementwise_ops():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = _data("x", [2, 3]), _data("y", [3])
        outs = [x + y, x - y, x * y, x / y, x ** y]
    assert [op.type for op in main.global_block().ops] == [
        "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_pow"]
    xv = rng.uniform(1, 2, (2, 3)).astype("float32")
    yv = rng.uniform(1, 2, (3,)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=outs)
    for g, want in zip(got, [xv + yv, xv - yv, xv * yv, xv / yv, xv ** yv]):
        np.testing.assert_allclose(g, want, rtol=1e-6)


# ------------------------------------------------------------------ large tensors (split across the thread pool)

@pytest.mark.parametrize("ys,axis", [((6, 16, 30, 30), -1), ((16,), 1), ((16, 30), 1), ((30,), -1),
                                     ((16, 1, 30), 1)],
                         ids=["same_shape", "channel", "rank3_plan", "last_axis", "rank4_plan"])
def test_large_broadcast_mul_and_grads(ys, axis):
    # 86,400 elements: rows (or the single row of a same-shape plan) are split across the pool, and the
    # row walk of each part starts from a multi-index computed from its first row; Y's gradient sums each part's
    # rows into its own copy, the copies added at the end.
    x = rng.uniform(-1, 1, (6, 16, 30, 30))
    y = rng.uniform(-1, 1, ys)
    w = rng.uniform(-1, 1, x.shape)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv, yv, wv = (_data(n, list(a.shape), "float64") for n, a in (("x", x), ("y", y), ("w", w)))
        xv.stop_gradient = yv.stop_gradient = False
        out = fluid.layers.elementwise_mul(xv, yv, axis=axis)
        act = fluid.layers.relu(out)
        total = fluid.layers.sums([act, out, xv])
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(total, wv))
        grads = fluid.gradients([loss], [xv, yv])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x, "y": y, "w": w},
                                               fetch_list=[out, act, total] + grads)
    start = 1 if axis == 1 else x.ndim - y.ndim
    yb = y.reshape(y.shape + (1,) * (x.ndim - start - y.ndim))
    want_out = x * yb
    np.testing.assert_allclose(got[0], want_out, rtol=1e-12)
    np.testing.assert_allclose(got[1], np.maximum(want_out, 0), rtol=1e-12)
    np.testing.assert_allclose(got[2], np.maximum(want_out, 0) + want_out + x, rtol=1e-12)
    d_out = w * ((want_out > 0) + 1.0)  # through relu and the direct term of the sum
    np.testing.assert_allclose(got[3], d_out * yb + w, rtol=1e-10, atol=1e-12)
    dy = d_out * x
    y_aligned = yb.reshape((1,) * start + yb.shape)  # Y's dims in X's rank
    sum_axes = tuple(i for i in range(x.ndim) if y_aligned.shape[i] == 1 and x.shape[i] != 1)
    np.testing.assert_allclose(got[4], dy.sum(axis=sum_axes, keepdims=True).reshape(y.shape), rtol=1e-9,
                               atol=1e-10)


# ------------------------------------------------------------------ floordiv and mod (no gradient, as in Fluid)

@pytest.mark.parametrize("case", CASES[:7], ids=CASE_IDS[:7])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_floordiv_and_mod(case, dtype):
    """Fluid's floordiv truncates toward zero; mod has the sign of the divisor (Python's %)."""
    xs, ys, axis, xv, yv = case
    if np.dtype(dtype).kind == "i":
        x = rng.randint(-20, 20, size=xs).astype(dtype)
        y = rng.randint(-6, 7, size=ys).astype(dtype)
        y[y == 0] = 4
    else:
        x = rng.uniform(-5, 5, size=xs).astype(dtype)
        y = (rng.uniform(0.5, 2, size=ys) * rng.choice([-1, 1], size=ys)).astype(dtype)
    xb = x if xv is None else x.reshape(xv)
    yb = y if yv is None else y.reshape(yv)
    OpTest("elementwise_floordiv", {"X": x, "Y": y}, {"Out": np.trunc(xb / yb).astype(dtype)},
           {"axis": axis}).check_output()
    OpTest("elementwise_mod", {"X": x, "Y": y}, {"Out": np.mod(xb, yb).astype(dtype)}, {"axis": axis}).check_output()


def test_floordiv_mod_edge_values_and_operators():
    x = np.array([7, -7, 7, -7, 0, np.iinfo(np.int64).min], dtype=np.int64)
    y = np.array([2, 2, -2, -2, 5, -1], dtype=np.int64)
    OpTest("elementwise_floordiv", {"X": x, "Y": y},
           {"Out": np.array([3, -3, -3, 3, 0, np.iinfo(np.int64).min], np.int64)}).check_output()
    OpTest("elementwise_mod", {"X": x, "Y": y}, {"Out": np.array([1, 1, -1, -1, 0, 0], np.int64)}).check_output()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a, b = _data("a", [3], "int64"), _data("b", [3], "int64")
        outs = [a // b, a % b, a // 4, 9 % a, fluid.layers.elementwise_mod(a, b)]
        zero_div = fluid.layers.elementwise_floordiv(a, b)
    assert [op.type for op in main.global_block().ops if op.type.startswith("elementwise")] == [
        "elementwise_floordiv", "elementwise_mod", "elementwise_floordiv", "elementwise_mod", "elementwise_mod",
        "elementwise_floordiv"]
    exe = fluid.Executor(fluid.CPUPlace())
    av, bv = np.array([9, -9, 10], "int64"), np.array([4, 4, -3], "int64")
    got = exe.run(main, feed={"a": av, "b": bv}, fetch_list=outs)
    for g, want in zip(got, [np.trunc(av / bv), np.mod(av, bv), np.trunc(av / 4), np.mod(9, av), np.mod(av, bv)]):
        np.testing.assert_array_equal(g, want.astype("int64"))
    with pytest.raises(fluid.core.EnforceNotMet, match="elementwise_floordiv: Y 'b' has a zero at flat index 2"):
        exe.run(main, feed={"a": av, "b": np.array([1, 2, 0], "int64")}, fetch_list=[zero_div])
    assert [fluid.core.op_proto(t)["grad"] for t in ("elementwise_floordiv", "elementwise_mod")] == ["no_gradient"] * 2
