"""stack / unstack: forward against numpy, gradients, layers, errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


STACK_CASES = [((3,), 2, 0), ((2, 3), 3, 0), ((2, 3), 2, 1), ((2, 3), 4, 2), ((2, 3), 2, -1), ((2, 1, 3), 1, -2)]


@pytest.mark.parametrize("shape,n,axis", STACK_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_stack_forward(shape, n, axis, dtype):
    xs = [("x%d" % i, (rand(*shape) * 10).astype(dtype)) for i in range(n)]
    OpTest("stack", {"X": xs}, {"Y": np.stack([a for _, a in xs], axis)}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shape,n,axis", STACK_CASES)
def test_stack_grad(shape, n, axis):
    xs = [("x%d" % i, rand(*shape)) for i in range(n)]
    OpTest("stack", {"X": xs}, {"Y": np.stack([a for _, a in xs], axis)}, {"axis": axis}).check_grad(["X"], "Y")


def test_stack_grad_skips_empty():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[2, 3], dtype="float64", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 3], dtype="float64", append_batch_size=False)
        b.stop_gradient = False
        y = fluid.layers.stack([a, b], axis=1)
        assert y.shape == (2, 2, 3)
        w = fluid.layers.assign(np.arange(12, dtype="float64").reshape(2, 2, 3))
        gb, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(y, w))], [b])
    # stack's gradient is unstack of Y@GRAD; the slice of a, which needs none, goes to @EMPTY@
    grad_op, = [op for op in main.global_block().ops if op.type == "unstack"]
    assert grad_op.output("Y") == ["@EMPTY@", b.name + "@GRAD"]
    g, = run(main, {"a": rand(2, 3), "b": rand(2, 3)}, [gb])
    np.testing.assert_array_equal(g, np.arange(12).reshape(2, 2, 3)[:, 1])


UNSTACK_CASES = [((3,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3, 4), -1), ((4, 1, 2), 1)]


@pytest.mark.parametrize("shape,axis", UNSTACK_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_unstack_forward(shape, axis, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    ys = [("y%d" % i, np.take(x, i, axis=axis)) for i in range(shape[axis])]
    OpTest("unstack", {"X": x}, {"Y": ys}, {"axis": axis, "num": shape[axis]}).check_output()


@pytest.mark.parametrize("shape,axis", UNSTACK_CASES)
def test_unstack_grad(shape, axis):
    x = rand(*shape)
    ys = [("y%d" % i, np.take(x, i, axis=axis)) for i in range(shape[axis])]
    OpTest("unstack", {"X": x}, {"Y": ys}, {"axis": axis, "num": shape[axis]}).check_grad(["X"], "Y")


def test_unstack_layer_partial_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        ys = fluid.layers.unstack(x, axis=1)
        assert len(ys) == 2 and ys[0].shape == (3,)
        gx, = fluid.gradients([fluid.layers.reduce_sum(ys[1])], [x])  # ys[0] gets no gradient
    xv = rand(3, 2)
    y0, g = run(main, {"x": xv}, [ys[0], gx])
    np.testing.assert_array_equal(y0, xv[:, 0])
    np.testing.assert_array_equal(g, [[0, 1]] * 3)


def test_stack_unstack_errors():
    block = fluid.Program().global_block()
    a, b = declare(block, "a", [2, 3]), declare(block, "b", [2, 4])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"stack: X 'a' \[2, 3\] and X 'b' \[2, 4\] must have the same "
                                                       r"dims"):
        block.append_op(type="stack", inputs={"X": [a, b]}, outputs={"Y": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"stack: axis 3 is out of range \[-3, 3\)"):
        block.append_op(type="stack", inputs={"X": [a, a]}, outputs={"Y": [out]}, attrs={"axis": 3})
    y0, y1 = declare(block, "y0", None), declare(block, "y1", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unstack: num=2 but X 'a' \[2, 3\] has 3 at axis 1"):
        block.append_op(type="unstack", inputs={"X": [a]}, outputs={"Y": [y0, y1]}, attrs={"axis": 1, "num": 2})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unstack: axis -3 is out of range \[-2, 2\)"):
        block.append_op(type="unstack", inputs={"X": [a]}, outputs={"Y": [y0, y1]}, attrs={"axis": -3, "num": 2})
    with pytest.raises(ValueError, match="unstack: cannot infer num"):
        with fluid.program_guard(fluid.Program()):
            fluid.layers.unstack(fluid.layers.data("d", shape=[3]), axis=0)
