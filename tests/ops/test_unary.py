"""The unary table (kernels/unary.cc). Activations abs, relu, sigmoid, tanh, exp, log, sqrt, square: forward vs
numpy, gradients by central differences, which forward variable each grad op reads, and the no-kernel error for
integer inputs; relu6 and leaky_relu (attributes): forward, gradients away from the kinks, the layers."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def _away_from_zero(shape):
    """Values with |v| in [0.1, 1] and random sign: abs/relu are smooth there."""
    return rng.uniform(0.1, 1.0, shape) * rng.choice([-1.0, 1.0], shape)


# op: (numpy forward, input generator, variable the grad op reads)
ACTS = {
    "abs": (np.abs, _away_from_zero, "X"),
    "relu": (lambda x: np.maximum(x, 0), _away_from_zero, "Out"),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda s: rng.uniform(-3, 3, s), "Out"),
    "tanh": (np.tanh, lambda s: rng.uniform(-2, 2, s), "Out"),
    "exp": (np.exp, lambda s: rng.uniform(-2, 2, s), "Out"),
    "log": (np.log, lambda s: rng.uniform(0.2, 3, s), "X"),
    "sqrt": (np.sqrt, lambda s: rng.uniform(0.2, 3, s), "Out"),
    "square": (np.square, lambda s: rng.uniform(-2, 2, s), "X"),
}
SHAPES = [(13, 17), (2, 3, 4), (1,), (4, 1, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(ACTS))
def test_forward(op, dtype, shape):
    fwd, gen, _ = ACTS[op]
    x = gen(shape).astype(dtype)
    out = fwd(x)
    assert out.dtype == np.dtype(dtype)
    OpTest(op, {"X": x}, {"Out": out}).check_output(rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("shape", [(3, 4), (2, 1, 3)], ids=str)
@pytest.mark.parametrize("op", sorted(ACTS))
def test_grad(op, shape):
    _, gen, _ = ACTS[op]
    OpTest(op, {"X": gen(shape)}, {"Out": np.zeros(1)}).check_grad(["X"], "Out")


@pytest.mark.parametrize("op", sorted(ACTS))
def test_grad_op_reads_only_what_it_needs(op):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        out = getattr(fluid.layers, op)(x)
        dx, = fluid.gradients([fluid.layers.mean(out)], [x])
    grad_op, = [o for o in main.global_block().ops if o.type == op + "_grad"]
    dep = ACTS[op][2]
    assert sorted(grad_op.input_names) == sorted([dep, "Out@GRAD"])
    assert grad_op.input(dep) == [x.name if dep == "X" else out.name]
    assert grad_op.output("X@GRAD") == [x.name + "@GRAD"]
    xv = ACTS[op][1]((2, 3))
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[dx])
    assert got.shape == (2, 3)


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


@pytest.mark.parametrize("op", sorted(ACTS))
def test_integer_input_has_no_kernel(op):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="int32", append_batch_size=False)
        out = getattr(fluid.layers, op)(x)
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

def away_from(x, points, gap=0.01):
    """x with values within `gap` of a kink moved off it, so central differences stay on one side."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + 2 * gap
    return x


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
    want = ((xv > 0) & (xv < 6)).astype(float) + ((xv > 0) & (xv < 2)) + np.where(xv >= 0, 1, 0.02) + np.where(xv >= 0, 1, 0.1)
    np.testing.assert_allclose(got[4], want / xv.size, rtol=1e-5)
