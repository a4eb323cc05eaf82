"""The unary table (kernels/unary.cc): every row of the C++ table is a row of UNARY here, checked for its
forward value against numpy, its gradient by central differences, the forward variable its grad op reads, its
layer and the no-kernel error for integer inputs; then the rows' special cases (saturation, kinks, bounds)."""
import inspect
import math

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def _away_from_zero(shape):
    """Values with |v| in [0.1, 1] and random sign: abs/relu are smooth there."""
    return rng.uniform(0.1, 1.0, shape) * rng.choice([-1.0, 1.0], shape)


def away_from(x, points, gap=0.01):
    """x with values within `gap` of a kink moved off it, so central differences stay on one side."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + 2 * gap
    return x


# op: (numpy forward(x, **attrs), input generator, the variable its grad op reads (None: the gradient is zeros),
# attributes). Generators keep inputs off the kinks, where central differences would straddle one.
UNARY = {
    "abs": (np.abs, _away_from_zero, "X", {}),
    "relu": (lambda x: np.maximum(x, 0), _away_from_zero, "Out", {}),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda s: rng.uniform(-3, 3, s), "Out", {}),
    "tanh": (np.tanh, lambda s: rng.uniform(-2, 2, s), "Out", {}),
    "exp": (np.exp, lambda s: rng.uniform(-2, 2, s), "Out", {}),
    "log": (np.log, lambda s: rng.uniform(0.2, 3, s), "X", {}),
    "sqrt": (np.sqrt, lambda s: rng.uniform(0.2, 3, s), "Out", {}),
    "square": (np.square, lambda s: rng.uniform(-2, 2, s), "X", {}),
    "floor": (np.floor, lambda s: away_from(rng.uniform(-4, 4, s), np.arange(-4.0, 5.0)), None, {}),
    "sign": (np.sign, _away_from_zero, None, {}),
    "ceil": (np.ceil, lambda s: away_from(rng.uniform(-4, 4, s), np.arange(-4.0, 5.0)), None, {}),
    "cos": (np.cos, lambda s: rng.uniform(-4, 4, s), "X", {}),
    "leaky_relu": (lambda x, alpha: np.where(x >= 0, x, np.float32(alpha) * x), _away_from_zero, "X", {"alpha": 0.3}),
    "relu6": (lambda x, threshold: np.clip(x, 0, threshold), lambda s: away_from(rng.uniform(-1, 2, s), [0.0, 1.5]),
              "Out", {"threshold": 1.5}),
    "clip": (lambda x, min, max: np.clip(x, np.float32(min), np.float32(max)),
             lambda s: away_from(rng.uniform(-2, 2, s), [-0.5, 0.75]), "X", {"min": -0.5, "max": 0.75}),
}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / np.sqrt(2)))


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(x))


def _hard_swish(x, threshold, scale, offset):
    return x * np.clip(x + offset, 0, threshold) / scale


# Fluid 1.8's activations (issue 14). Attributes are exact in float32 so float64 references match.
UNARY.update({
    "gelu": (_gelu, lambda s: rng.uniform(-3, 3, s), "X", {"approximate": False}),
    "elu": (_elu, lambda s: away_from(rng.uniform(-3, 3, s), [0.0]), "X", {"alpha": 1.5}),
    "selu": (lambda x, scale, alpha: scale * _elu(x, alpha), lambda s: away_from(rng.uniform(-3, 3, s), [0.0]), "X",
             {"scale": 1.25, "alpha": 1.5}),
    "swish": (lambda x, beta: x / (1 + np.exp(-beta * x)), lambda s: rng.uniform(-4, 4, s), "X", {"beta": 1.5}),
    "hard_swish": (_hard_swish, lambda s: away_from(rng.uniform(-5, 5, s), [-3.0, 3.0]), "X",
                   {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    "hard_sigmoid": (lambda x, slope, offset: np.clip(slope * x + offset, 0, 1),
                     lambda s: away_from(rng.uniform(-4, 4, s), [-2.0, 2.0]), "Out", {"slope": 0.25, "offset": 0.5}),
    "softplus": (lambda x: np.logaddexp(0, x), lambda s: rng.uniform(-5, 5, s), "X", {}),
    "softsign": (lambda x: x / (1 + np.abs(x)), lambda s: rng.uniform(-3, 3, s), "X", {}),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda s: rng.uniform(0.3, 3, s), "Out", {}),
    "reciprocal": (lambda x: 1 / x, lambda s: _away_from_zero(s) * 2, "Out", {}),
    "sin": (np.sin, lambda s: rng.uniform(-3, 3, s), "X", {}),
    "pow": (lambda x, factor: x ** factor, lambda s: rng.uniform(0.2, 3, s), "X", {"factor": 2.5}),
    "round": (np.round, lambda s: away_from(rng.uniform(-4, 4, s), np.arange(-4.5, 5.0)), None, {}),
})
ACTS = {op: row for op, row in UNARY.items() if not row[3] and row[2]}  # no attributes, a gradient of their own
SHAPES = [(13, 17), (2, 3, 4), (1,), (4, 1, 5)]


def test_the_table_covers_every_row_of_the_cpp_table():
    rows = [t for t in fluid.core.op_types() if fluid.core.op_proto(t)["doc"].endswith(", elementwise.")
            and not t.endswith("_grad") and fluid.core.op_proto(t)["inputs"][0]["name"] == "X"
            and [o["name"] for o in fluid.core.op_proto(t)["outputs"]] == ["Out"]
            and len(fluid.core.op_proto(t)["inputs"]) == 1]
    assert sorted(rows) == sorted(UNARY)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_forward(op, dtype, shape):
    fwd, gen, _, attrs = UNARY[op]
    x = gen(shape).astype(dtype)
    out = fwd(x, **attrs).astype(dtype)
    OpTest(op, {"X": x}, {"Out": out}, attrs).check_output(rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("shape", [(3, 4), (2, 1, 3)], ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_grad(op, shape):
    _, gen, _, attrs = UNARY[op]
    OpTest(op, {"X": gen(shape)}, {"Out": np.zeros(1)}, attrs).check_grad(["X"], "Out")


@pytest.mark.parametrize("op", sorted(UNARY))
def test_grad_op_reads_only_what_it_needs(op):
    _, gen, dep, attrs = UNARY[op]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        out = getattr(fluid.layers, op)(x, **attrs)
        dx, = fluid.gradients([fluid.layers.mean(out)], [x])
    grad_ops = [o for o in main.global_block().ops if o.type == op + "_grad"]
    if dep is None:  # piecewise constant: zeros like X, no grad op
        assert grad_ops == [] and [o.type for o in main.global_block().ops][-1] == "fill_zeros_like"
    else:
        grad_op, = grad_ops
        assert sorted(grad_op.input_names) == sorted([dep, "Out@GRAD"])
        assert grad_op.input(dep) == [x.name if dep == "X" else out.name]
        assert grad_op.output("X@GRAD") == [x.name + "@GRAD"]
        assert all(grad_op.attr(k) == pytest.approx(v) for k, v in attrs.items())  # inherited
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": gen((2, 3))}, fetch_list=[dx])
    assert got.shape == (2, 3)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_layer_signature_comes_from_the_row(op):
    attrs = UNARY[op][3]
    params = inspect.signature(getattr(fluid.layers, op)).parameters
    assert list(params) == ["x"] + list(attrs) + ["name"]


def test_relu_grad_is_zero_on_the_negative_side():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32", append_batch_size=False)
        x.stop_gradient = False
        dx, = fluid.gradients([fluid.layers.mean(fluid.layers.relu(x))], [x])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([-2, -0.5, 0.5, 3], "float32")},
                                                fetch_list=[dx])
    np.testing.assert_array_equal(got, [0, 0, 0.25, 0.25])


def test_sigmoid_saturates_without_nan():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=np.float32)
    with np.errstate(over="ignore"):
        want = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    OpTest("sigmoid", {"X": x}, {"Out": want}).check_output()


def test_output_keeps_compile_time_shape():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[7, 3], dtype="float32")
        outs = [getattr(fluid.layers, op)(x) for op in sorted(ACTS)]
    assert all(tuple(o.shape) == (-1, 7, 3) and o.dtype == x.dtype for o in outs)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_integer_input_has_no_kernel(op):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="int32", append_batch_size=False)
        out = getattr(fluid.layers, op)(x, **UNARY[op][3])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"op %s does not have a kernel for data_type\[int\]" % op):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([1, 2, 3], "int32")}, fetch_list=[out])


def test_grad_op_requires_out_grad_at_build_time():
    main = fluid.Program()
    block = main.global_block()
    o = block.create_var(name="o", shape=[3], dtype="float32")
    g = block.create_var(name="g", shape=[3], dtype="float32")
    with pytest.raises(fluid.core.EnforceNotMet, match="op tanh_grad: input Out@GRAD is required"):
        block.append_op(type="tanh_grad", inputs={"Out": [o]}, outputs={"X@GRAD": [g]})


# ------------------------------------------------------------------ relu6, leaky_relu (attributes)

ATTR_SHAPES = [(5,), (3, 4), (2, 1, 3), (1, 1)]


@pytest.mark.parametrize("shape", ATTR_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threshold", [6.0, 1.5])
def test_relu6_forward(shape, dtype, threshold):
    x = rng.uniform(-3, 9, shape).astype(dtype)
    OpTest("relu6", {"X": x}, {"Out": np.clip(x, 0, threshold)}, {"threshold": threshold}).check_output()


@pytest.mark.parametrize("threshold", [6.0, 0.5])
def test_relu6_grad(threshold):
    x = away_from(rng.uniform(-2, 8, (4, 6)), [0.0, threshold])
    OpTest("relu6", {"X": x}, {"Out": np.clip(x, 0, threshold)}, {"threshold": threshold}).check_grad(["X"], "Out")


@pytest.mark.parametrize("shape", ATTR_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha", [0.02, 0.3])
def test_leaky_relu_forward(shape, dtype, alpha):
    x = rng.uniform(-2, 2, shape).astype(dtype)
    want = np.where(x >= 0, x, x * np.asarray(alpha, dtype=dtype))
    OpTest("leaky_relu", {"X": x}, {"Out": want}, {"alpha": alpha}).check_output()


@pytest.mark.parametrize("alpha", [0.02, 0.5])
def test_leaky_relu_grad(alpha):
    x = away_from(rng.uniform(-2, 2, (3, 7)), [0.0])
    OpTest("leaky_relu", {"X": x}, {"Out": np.where(x >= 0, x, alpha * x)}, {"alpha": alpha}).check_grad(["X"], "Out")


def test_relu6_leaky_relu_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[8])
        x.stop_gradient = False
        a = fluid.layers.relu6(x)
        b = fluid.layers.relu6(x, threshold=2.0)
        c = fluid.layers.leaky_relu(x)
        d = fluid.layers.leaky_relu(x, alpha=0.1)
        loss = fluid.layers.mean(fluid.layers.sums([a, b, c, d]))
        gx, = fluid.gradients([loss], [x])
    xv = rng.uniform(-4, 8, (3, 8)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[a, b, c, d, gx])
    np.testing.assert_allclose(got[0], np.clip(xv, 0, 6))
    np.testing.assert_allclose(got[1], np.clip(xv, 0, 2))
    np.testing.assert_allclose(got[2], np.where(xv >= 0, xv, np.float32(0.02) * xv), rtol=1e-6)
    np.testing.assert_allclose(got[3], np.where(xv >= 0, xv, np.float32(0.1) * xv), rtol=1e-6)
    want = (((xv > 0) & (xv < 6)).astype(float) + ((xv > 0) & (xv < 2))
            + np.where(xv >= 0, 1, 0.02) + np.where(xv >= 0, 1, 0.1))
    np.testing.assert_allclose(got[4], want / xv.size, rtol=1e-5)


# ------------------------------------------------------------------ floor, sign (piecewise constant), clip

PIECEWISE = {"floor": np.floor, "sign": np.sign}
KINKS = {"floor": np.arange(-4.0, 5.0), "sign": [0.0]}  # where the piecewise-constant ops jump


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(PIECEWISE))
def test_piecewise_constant_forward(op, dtype, shape):
    x = rng.uniform(-4, 4, shape).astype(dtype)
    edges = np.array([-2.0, 0.0, 1.0, -0.0, -0.5, 3.999], dtype)  # on and next to the jumps
    x.reshape(-1)[:min(x.size, edges.size)] = edges[:x.size]
    OpTest(op, {"X": x}, {"Out": PIECEWISE[op](x)}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("op", sorted(PIECEWISE))
def test_piecewise_constant_grad_is_zero(op):
    # Away from the jumps central differences give 0, and so must the gradient (a fill_zeros_like)...
    x = away_from(rng.uniform(-4, 4, (3, 4)), KINKS[op])
    OpTest(op, {"X": x}, {"Out": PIECEWISE[op](x)}).check_grad(["X"], "Out")
    # ...which is exactly 0 everywhere, on the jumps too (Fluid's convention), with X's shape and dtype.
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.layers.data("x", shape=[2, 4], dtype="float32", append_batch_size=False)
        xv.stop_gradient = False
        dx, = fluid.gradients([fluid.layers.reduce_sum(getattr(fluid.layers, op)(xv))], [xv])
    feed = np.array([[-2.0, 0.0, 1.0, 0.5], [-0.5, 3.0, -1e-3, 2.5]], "float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": feed}, fetch_list=[dx])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.zeros((2, 4)))


def _clip_ref(x, lo, hi):
    # min and max are float attributes: the kernel compares with their float32 values
    return np.clip(x, np.float32(lo).astype(x.dtype), np.float32(hi).astype(x.dtype))


CLIP_BOUNDS = [(-1.0, 0.8), (0.3, 2.5), (-0.25, -0.25)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lo,hi", CLIP_BOUNDS)
def test_clip_forward(lo, hi, dtype, shape):
    x = rng.uniform(-3, 3, shape).astype(dtype)
    edges = np.array([lo, hi, np.nextafter(np.float32(hi), np.float32(9)), -np.inf, np.inf], dtype)
    x.reshape(-1)[:min(x.size, edges.size)] = edges[:x.size]
    OpTest("clip", {"X": x}, {"Out": _clip_ref(x, lo, hi)}, {"min": lo, "max": hi}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("lo,hi", CLIP_BOUNDS[:2])
def test_clip_grad(lo, hi):
    # Central differences away from the bounds: 1 inside, 0 outside (most values are outside for (0.3, 2.5)).
    x = away_from(rng.uniform(-3, 3, (4, 5)), [lo, hi])
    assert ((x > lo) & (x < hi)).any() and ((x < lo) | (x > hi)).any()
    OpTest("clip", {"X": x}, {"Out": _clip_ref(x, lo, hi)}, {"min": lo, "max": hi}).check_grad(["X"], "Out")


def test_clip_grad_is_zero_on_the_bounds_and_reads_x():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[6], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        dx, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.clip(x, min=-1.0, max=0.5))], [x])
    grad_op, = [o for o in main.global_block().ops if o.type == "clip_grad"]
    assert sorted(grad_op.input_names) == ["Out@GRAD", "X"]
    xv = np.array([-2.0, -1.0, -0.999, 0.0, 0.5, 0.7])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[dx])
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 0, 0])  # Fluid: X > min and X < max


def test_clip_min_above_max_fails_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xc", shape=[3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"clip: min 1 must not exceed max 0 for X 'xc' \[-1, 3\]"):
            fluid.layers.clip(x, 1.0, 0.0)


@pytest.mark.parametrize("op", ["floor", "sign", "clip"])
def test_piecewise_integer_input_has_no_kernel(op):
    x = np.array([1, -2, 3], "int64")
    attrs = {"min": 0.0, "max": 1.0} if op == "clip" else {}
    with pytest.raises(fluid.core.EnforceNotMet, match=r"op %s does not have a kernel for data_type\[int64_t\]" % op):
        OpTest(op, {"X": x}, {"Out": x}, attrs).check_output()


# ------------------------------------------------------------------ Fluid 1.8's activations: special cases

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_tanh_form(dtype):
    x = rng.uniform(-4, 4, (5, 7)).astype(dtype)
    OpTest("gelu", {"X": x}, {"Out": _gelu(x, True).astype(dtype)}, {"approximate": True}).check_output(rtol=1e-6)
    OpTest("gelu", {"X": x.astype("float64")}, {"Out": np.zeros(1)}, {"approximate": True}).check_grad(["X"], "Out")
    # the two forms differ (by up to ~1e-3 around |x| = 2): the attribute is honoured
    assert np.abs(_gelu(x.astype("float64"), True) - _gelu(x.astype("float64"))).max() > 1e-4


def test_gelu_layer_default_is_the_erf_form():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float64", append_batch_size=False)
        exact, approx = fluid.layers.gelu(x), fluid.layers.gelu(x, approximate=True)
    xv = np.array([-2.5, -0.7, 0.3, 2.0])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[exact, approx])
    np.testing.assert_allclose(got[0], _gelu(xv), rtol=1e-13)
    np.testing.assert_allclose(got[1], _gelu(xv, True), rtol=1e-13)


def test_selu_layer_none_keeps_the_op_defaults():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype="float64", append_batch_size=False)
        a = fluid.layers.selu(x)
        b = fluid.layers.selu(x, scale=2.0, alpha=0.5)
    op_a, op_b = [o for o in main.global_block().ops if o.type == "selu"]
    assert op_a.attr("scale") == pytest.approx(1.0507009873554805) and op_a.attr("alpha") == pytest.approx(1.6732632)
    assert op_b.attr("scale") == 2.0 and op_b.attr("alpha") == 0.5
    xv = np.array([-2.0, -0.5, 0.5, 3.0])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[a, b])
    scale, alpha = np.float32(1.0507009873554805), np.float32(1.6732632423543772)
    np.testing.assert_allclose(got[0], scale * _elu(xv, alpha), rtol=1e-12)
    np.testing.assert_allclose(got[1], 2.0 * _elu(xv, 0.5), rtol=1e-12)


def test_elu_swish_hard_swish_hard_sigmoid_layer_defaults():
    sig = {op: {k: p.default for k, p in inspect.signature(getattr(fluid.layers, op)).parameters.items()}
           for op in ["elu", "swish", "hard_swish", "hard_sigmoid", "pow", "gelu"]}
    assert sig["elu"] == {"x": inspect.Parameter.empty, "alpha": 1.0, "name": None}
    assert sig["swish"]["beta"] == 1.0
    assert [sig["hard_swish"][k] for k in ("threshold", "scale", "offset")] == [6.0, 6.0, 3.0]
    assert [sig["hard_sigmoid"][k] for k in ("slope", "offset")] == [0.2, 0.5]
    assert sig["pow"]["factor"] == 1.0 and sig["gelu"]["approximate"] is False


def test_softplus_does_not_overflow():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], dtype=np.float32)
    OpTest("softplus", {"X": x}, {"Out": np.logaddexp(0, x.astype(np.float64)).astype(np.float32)}).check_output(
        atol=0, rtol=1e-6)


def test_round_halves_go_away_from_zero():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49], dtype=np.float32)
    OpTest("round", {"X": x}, {"Out": np.array([-3, -2, -1, 1, 2, 3, 0], np.float32)}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_factor_variable(dtype):
    # Fluid's FactorTensor: the exponent comes from a float32 [1] Variable and gets no gradient
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[4], dtype=dtype, append_batch_size=False)
        x.stop_gradient = False
        f = fluid.layers.data("f", shape=[1], dtype="float32", append_batch_size=False)
        out = fluid.layers.pow(x, factor=f)
        dx, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    assert f.stop_gradient and out.dtype == x.dtype
    assert "pow" not in [o.type for o in main.global_block().ops]
    xv = np.array([0.5, 1.0, 2.0, 3.0], dtype)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "f": np.array([2.5], "float32")},
                                               fetch_list=[out, dx])
    np.testing.assert_allclose(got[0], xv ** 2.5, rtol=1e-6)
    np.testing.assert_allclose(got[1], 2.5 * xv ** 1.5, rtol=1e-6)


def test_pow_factor_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xp", shape=[3], dtype="float32")
        f64 = fluid.layers.fill_constant([1], "float64", 2.0)
        f2 = fluid.layers.fill_constant([2], "float32", 2.0)
        with pytest.raises(TypeError, match=r"pow: a Variable factor must be float32 \(Fluid's FactorTensor\), got "
                                            r"fill_constant\S* "):
            fluid.layers.pow(x, factor=f64)
        with pytest.raises(ValueError, match=r"pow: a Variable factor must have shape \[1\] \(Fluid's FactorTensor\), "
                                             r"got fill_constant\S* with shape \[2\]"):
            fluid.layers.pow(x, factor=f2)
        with pytest.raises(TypeError, match="pow: factor must be a float or a 1-element float32 Variable, got str"):
            fluid.layers.pow(x, factor="2")


def test_hard_swish_zero_scale_fails_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xh", shape=[3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"hard_swish: scale must not be 0 for X 'xh' \[-1, 3\]"):
            fluid.layers.hard_swish(x, scale=0.0)
