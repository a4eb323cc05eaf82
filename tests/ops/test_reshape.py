"""reshape2, squeeze2, unsqueeze2 and flatten2 (kernels/reshape.cc): forward against numpy, gradients, the
shared buffer and XShape, layers, shape errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


# ------------------------------------------------------------------ reshape2

RESHAPE_CASES = [
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [-1, 0, 2]),
    ((2, 3, 4), [4, 0, 2]),
    ((6,), [1, 2, 1, 3]),
    ((2, 1, 3), [-1]),
    ((1,), [1, 1]),
]


def reshape_ref(x, shape):
    return x.reshape([x.shape[i] if s == 0 else s for i, s in enumerate(shape)])


@pytest.mark.parametrize("shape,new", RESHAPE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_reshape_forward(shape, new, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("reshape2", {"X": x}, {"Out": reshape_ref(x, new), "XShape": None}, {"shape": new}).check_output()


@pytest.mark.parametrize("shape,new", RESHAPE_CASES)
def test_reshape_grad(shape, new):
    x = rand(*shape)
    OpTest("reshape2", {"X": x}, {"Out": reshape_ref(x, new), "XShape": None}, {"shape": new}).check_grad(["X"], "Out")


def test_reshape_shares_buffer_and_records_xshape():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")
        out = fluid.layers.reshape(x, [0, -1])
        xshape = main.global_block().var(main.global_block().ops[-1].output("XShape")[0])
        assert out.shape == (-1, 12)
        assert xshape.shape == (0, -1, 3, 4)
    for v in (x, out, xshape):  # persistable vars live in the scope after the run
        v.persistable = True
    scope = fluid.Scope()
    xv = rand(2, 3, 4, dtype="float32")
    with fluid.scope_guard(scope):
        got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[out])
    np.testing.assert_array_equal(got, xv.reshape(2, 12))
    xa = scope.find_var("x").get_tensor()._share_numpy()
    oa = scope.find_var(out.name).get_tensor()._share_numpy()
    assert oa.shape == (2, 12)
    assert oa.__array_interface__["data"][0] == xa.__array_interface__["data"][0]  # no copy
    xs = scope.find_var(xshape.name).get_tensor()
    assert xs.shape() == [0, 2, 3, 4] and not xs._is_initialized()


def test_reshape_compile_time_shapes():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        assert fluid.layers.reshape(x, [0, 12]).shape == (-1, 12)
        assert fluid.layers.reshape(x, [0, -1, 2]).shape == (-1, 6, 2)
        assert fluid.layers.reshape(x, [-1, 4]).shape == (-1, 4)  # batch unknown: stays -1
        assert fluid.layers.reshape(x, [6, -1]).shape == (6, -1)


def test_reshape_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        pattern = r"reshape2: cannot reshape X 'x' \[2, 3, 4\] \(24 elements\) to \[5, 5\] \(25 elements\)"
        with pytest.raises(fluid.core.EnforceNotMet, match=pattern):
            fluid.layers.reshape(x, [5, 5])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: cannot reshape X 'x' \[2, 3, 4\] to \[-1, 5\]: "
                                                           r"24 elements are not divisible by 5"):
            fluid.layers.reshape(x, [-1, 5])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: shape \[-1, -1\] has more than one -1"):
            fluid.layers.reshape(x, [-1, -1])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reshape2: shape \[0, 0, 0, 0\] copies dim 3 \(0\) but X "
                                                           r"'x' \[2, 3, 4\] has rank 3"):
            fluid.layers.reshape(x, [0, 0, 0, 0])


# ------------------------------------------------------------------ squeeze2 / unsqueeze2

SQUEEZE_CASES = [((1, 3, 1, 2), [0, 2], (3, 2)), ((1, 3, 1, 2), [], (3, 2)), ((4, 1), [-1], (4,)),
                 ((1, 1), [1], (1,)), ((2, 3), [], (2, 3))]


@pytest.mark.parametrize("shape,axes,want", SQUEEZE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_squeeze2_forward(shape, axes, want, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("squeeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_output()


@pytest.mark.parametrize("shape,axes,want", SQUEEZE_CASES)
def test_squeeze2_grad(shape, axes, want):
    x = rand(*shape)
    OpTest("squeeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_grad(["X"], "Out")


UNSQUEEZE_CASES = [((3, 2), [0], (1, 3, 2)), ((3, 2), [-1], (3, 2, 1)), ((3, 2), [0, 2], (1, 3, 1, 2)),
                   ((3,), [0, 0], (1, 1, 3)), ((3, 2), [1, -1], (3, 1, 2, 1)), ((3, 2), [2, 1], (3, 1, 2, 1))]


@pytest.mark.parametrize("shape,axes,want", UNSQUEEZE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_unsqueeze2_forward(shape, axes, want, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    OpTest("unsqueeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_output()


@pytest.mark.parametrize("shape,axes,want", UNSQUEEZE_CASES)
def test_unsqueeze2_grad(shape, axes, want):
    x = rand(*shape)
    OpTest("unsqueeze2", {"X": x}, {"Out": x.reshape(want), "XShape": None}, {"axes": axes}).check_grad(["X"], "Out")


def test_squeeze_unsqueeze_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[1, 4], dtype="float32")  # [-1, 1, 4]
        s = fluid.layers.squeeze(x, axes=[1])
        u = fluid.layers.unsqueeze(s, axes=[-1, 0])
        assert s.shape == (-1, 4) and u.shape == (1, -1, 4, 1)
        assert main.global_block().ops[-1].type == "unsqueeze2"
    xv = rand(3, 1, 4, dtype="float32")
    got_s, got_u = run(main, {"x": xv}, [s, u])
    np.testing.assert_array_equal(got_s, xv.reshape(3, 4))
    np.testing.assert_array_equal(got_u, xv.reshape(1, 3, 4, 1))


def test_squeeze_unsqueeze_errors():
    block = fluid.Program().global_block()
    x = declare(block, "x", [1, 3])
    out, xs = declare(block, "out", None), declare(block, "xs", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"squeeze2: axis 1 of X 'x' \[1, 3\] has size 3; only size-1 "
                                                       r"dims can be squeezed"):
        block.append_op(type="squeeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [1]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"squeeze2: axis 2 is out of range \[-2, 2\) for X 'x'"):
        block.append_op(type="squeeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [2]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unsqueeze2: axis 4 in axes \[4\] is out of range \[-3, 2\] "
                                                       r"for X 'x' \[1, 3\]"):
        block.append_op(type="unsqueeze2", inputs={"X": [x]}, outputs={"Out": [out], "XShape": [xs]},
                        attrs={"axes": [4]})


# ------------------------------------------------------------------ flatten2

FLATTEN_CASES = [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4, 5), 2), ((7,), 1), ((1, 1, 3), 2)]


@pytest.mark.parametrize("shape,axis", FLATTEN_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_flatten2_forward(shape, axis, dtype):
    x = (rng.uniform(-5, 5, shape)).astype(dtype)
    rows = int(np.prod(shape[:axis]))
    OpTest("flatten2", {"X": x}, {"Out": x.reshape(rows, -1), "XShape": None}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shape,axis", FLATTEN_CASES)
def test_flatten2_grad(shape, axis):
    x = rng.uniform(-1, 1, shape)
    t = OpTest("flatten2", {"X": x}, {"Out": x.reshape(int(np.prod(shape[:axis])), -1), "XShape": None},
               {"axis": axis})
    t.check_grad(["X"], "Out")


def test_flatten_layer_shapes_and_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4, 5])
        x.stop_gradient = False
        f1 = fluid.layers.flatten(x)
        f2 = fluid.layers.flatten(x, axis=2)
        f0 = fluid.layers.flatten(x, axis=0)
        w = fluid.layers.data("w", shape=[60])
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(f1, w))
        gx, = fluid.gradients([loss], [x])
    assert f1.shape == (-1, 60) and f2.shape == (-1, 20) and f0.shape == (1, -1)
    assert [o.type for o in main.global_block().ops].count("flatten2") == 3
    xv = rng.uniform(-1, 1, (2, 3, 4, 5)).astype("float32")
    wv = rng.uniform(-1, 1, (2, 60)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "w": wv}, fetch_list=[f1, f2, f0, gx])
    np.testing.assert_array_equal(got[0], xv.reshape(2, 60))
    np.testing.assert_array_equal(got[1], xv.reshape(6, 20))
    np.testing.assert_array_equal(got[2], xv.reshape(1, 120))
    np.testing.assert_array_equal(got[3], wv.reshape(2, 3, 4, 5))


def test_flatten_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"flatten2: axis 4 is out of range \[0, 3\] for "
                                                           r"X 'x' \[-1, 3, 4\]"):
            fluid.layers.flatten(x, axis=4)
        with pytest.raises(ValueError, match="axis must be a non-negative int"):
            fluid.layers.flatten(x, axis=-1)
        block = fluid.default_main_program().global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op flatten2: attribute 'axis' = -1 is invalid: must be "
                                                           r"in \[0, 9\]"):
            block.append_op(type="flatten2", inputs={"X": x}, outputs={"Out": out}, attrs={"axis": -1})
