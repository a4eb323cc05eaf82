"""expand and expand_as: forward against numpy's tile, gradients (numeric and weighted), layers, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(7)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


EXPAND_CASES = [((3,), [2]), ((2, 3), [1, 1]), ((2, 3), [3, 2]), ((2, 1, 3), [1, 4, 2]), ((1, 2, 1, 2), [2, 1, 3, 1])]


@pytest.mark.parametrize("shape,times", EXPAND_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_expand_forward(shape, times, dtype):
    x = (rand(*shape) * 4).astype(dtype)
    OpTest("expand", {"X": x}, {"Out": np.tile(x, times)}, {"expand_times": times}).check_output()


@pytest.mark.parametrize("shape,times", EXPAND_CASES)
def test_expand_grad(shape, times):
    x = rand(*shape)
    OpTest("expand", {"X": x}, {"Out": np.tile(x, times)}, {"expand_times": times}).check_grad(["X"], "Out")


def test_expand_times_tensor_inputs():
    x = rand(2, 3)
    OpTest("expand", {"X": x, "ExpandTimes": np.array([2, 3], "int32")}, {"Out": np.tile(x, [2, 3])}).check_output()
    OpTest("expand", {"X": x, "expand_times_tensor": [("t0", np.array([3], "int32")), ("t1", np.array([1], "int32"))]},
           {"Out": np.tile(x, [3, 1])}, {"expand_times": [-1, -1]}).check_output()


def expand_weighted_grad(build, xv, shape_out):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=list(xv.shape), dtype="float64", append_batch_size=False)
        w = fluid.layers.data("w", shape=list(shape_out), dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        out = build(x)
        gx, = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x])
    return main, out, gx


def untile(g, xshape):
    """The sum over the copies: g of shape xshape * times, summed per element of x."""
    times = [a // b for a, b in zip(g.shape, xshape)]
    split = []
    for t, s in zip(times, xshape):
        split += [t, s]
    return g.reshape(split).sum(axis=tuple(range(0, 2 * len(xshape), 2)))


@pytest.mark.parametrize("kind", ["attr", "tensor", "tensor_list", "expand_as"])
def test_expand_layers_weighted_grad(kind):
    xv = rand(2, 1, 3)
    times = [2, 3, 2]
    out_shape = (4, 3, 6)
    wv = rand(*out_shape)
    feed = {"x": xv, "w": wv}
    if kind == "attr":
        build = lambda x: fluid.layers.expand(x, times)  # noqa: E731
    elif kind == "tensor":
        def build(x):
            return fluid.layers.expand(x, fluid.layers.assign(np.array(times, "int32")))
    elif kind == "tensor_list":
        def build(x):
            return fluid.layers.expand(x, [2, fluid.layers.fill_constant([1], "int32", 3), 2])
    else:
        def build(x):
            return fluid.layers.expand_as(x, fluid.layers.data("t", shape=list(out_shape), dtype="float32",
                                                               append_batch_size=False))
        feed["t"] = np.zeros(out_shape, "float32")
    main, out, gx = expand_weighted_grad(build, xv, out_shape)
    if kind in ("attr", "expand_as"):
        assert out.shape == out_shape
    o, g = run(main, feed, [out, gx])
    np.testing.assert_allclose(o, np.tile(xv, times))
    np.testing.assert_allclose(g, untile(wv, xv.shape))


@pytest.mark.parametrize("shape,target", [((3,), (6,)), ((2, 3), (4, 3)), ((2, 1, 3), (2, 5, 6))])
def test_expand_as_forward_and_grad(shape, target):
    x = rand(*shape)
    t = np.zeros(target, "float32")
    times = [a // b for a, b in zip(target, shape)]
    test = OpTest("expand_as", {"X": x, "target_tensor": t}, {"Out": np.tile(x, times)})
    test.check_output()
    test.check_grad(["X"], "Out")


def test_expand_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
        with pytest.raises(ValueError, match=r"expand: expand_times \[2\] must have one count per dim of x x \[2, 3\]"):
            fluid.layers.expand(x, [2])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"expand: attribute expand_times value 0 \(dim 1\) must be "
                                                           r">= 1 for X 'x' \[2, 3\]"):
            fluid.layers.expand(x, [1, 0])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"expand_as: dim 1 of target_tensor 't' \[4, 4\] must be a "
                                                           r"multiple of that of X 'x' \[2, 3\]"):
            fluid.layers.expand_as(x, fluid.layers.data("t", shape=[4, 4], dtype="float32", append_batch_size=False))
        with pytest.raises(TypeError, match="expand: expand_times must be a list, tuple or Variable, got int"):
            fluid.layers.expand(x, 2)
        b = fluid.layers.data("b", shape=[2], dtype="bool", append_batch_size=False)
        b.stop_gradient = False
        with pytest.raises(ValueError, match="expand: x b of dtype bool must have stop_gradient=True"):
            fluid.layers.expand(b, [2])
        times = fluid.layers.data("times", shape=[2], dtype="int32", append_batch_size=False)
        out = fluid.layers.expand(x, times)
        assert out.shape == (-1, -1)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"expand: ExpandTimes 'times' value -2 must be >= 1 \(for X "
                                                       r"'x'\)"):
        exe.run(main, feed={"x": rand(2, 3, dtype="float32"), "times": np.array([1, -2], "int32")},
                fetch_list=[out])
    got, = exe.run(main, feed={"x": np.ones((2, 3), "float32"), "times": np.array([2, 1], "int32")},
                   fetch_list=[out])
    assert got.shape == (4, 3)


def test_expand_as_grad_checks_out_grad_shape():
    main = fluid.Program()
    block = main.global_block()
    x, t = declare(block, "x", [2, 3], "float64"), declare(block, "t", [4, 3], "float64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"expand_as"):
        block.append_op(type="expand_as_grad", inputs={"X": [x], "target_tensor": [t],
                                                      "Out@GRAD": [declare(block, "g", [4, 4], "float64")]},
                        outputs={"X@GRAD": [declare(block, "gx", None, "float64")]})
