"""Activations abs, relu, sigmoid, tanh, exp, log, sqrt, square: forward vs numpy, gradients by central
differences, which forward variable each grad op reads, and the no-kernel error for integer inputs."""
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
