"""gather: forward against numpy, gradients, errors at build and run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


GATHER_CASES = [((5,), [0, 4, 4, 2]), ((5, 3), [1, 0, 1, 4, 3, 1]), ((4, 2, 3), [3, 0]), ((1, 7), [0, 0, 0])]


@pytest.mark.parametrize("shape,index", GATHER_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_gather_forward(shape, index, index_dtype, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    idx = np.array(index, dtype=index_dtype)
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx]}).check_output()


def test_gather_index_n_by_1():
    x = rand(5, 3)
    idx = np.array([[2], [0], [2]], dtype="int64")
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx[:, 0]]}).check_output()


@pytest.mark.parametrize("shape,index", GATHER_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_gather_grad(shape, index, index_dtype):
    x = rand(*shape)
    idx = np.array(index, dtype=index_dtype)
    OpTest("gather", {"X": x, "Index": idx}, {"Out": x[idx]}).check_grad(["X"], "Out")


def test_gather_grad_accumulates_repeated_rows():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        idx = fluid.layers.data("idx", shape=[5], dtype="int32", append_batch_size=False)
        out = fluid.layers.gather(x, idx)
        assert out.shape == (5, 2)
        gx, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    g, = run(main, {"x": rand(4, 2), "idx": np.array([3, 3, 0, 3, 1], "int32")}, [gx])
    np.testing.assert_array_equal(g, [[1, 1], [1, 1], [0, 0], [3, 3]])


def test_gather_errors():
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [4, 3])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'fi' \[2\] must be int32 or int64, got float32"):
        block.append_op(type="gather", inputs={"X": [x], "Index": [declare(block, "fi", [2])]}, outputs={"Out": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'i2' \[2, 2\] must be \[N\] or \[N, 1\]"):
        block.append_op(type="gather", inputs={"X": [x], "Index": [declare(block, "i2", [2, 2], "int64")]},
                        outputs={"Out": [out]})
    idx = declare(block, "idx", [3], "int64")
    block.append_op(type="gather", inputs={"X": [x], "Index": [idx]}, outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather: Index 'idx' has value 4 at position 1, out of range "
                                                       r"\[0, 4\) of X 'x' \[4, 3\]"):
        exe.run(main, feed={"x": rand(4, 3, dtype="float32"), "idx": np.array([0, 4, 1], "int64")}, fetch_list=[out])
    got, = exe.run(main, feed={"x": np.eye(4, 3, dtype="float32"), "idx": np.array([1, 1, 0], "int64")},
                   fetch_list=[out])
    np.testing.assert_array_equal(got, np.eye(4, 3)[[1, 1, 0]])


# ------------------------------------------------------------------ gather_nd

def np_gather_nd(x, idx):
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    out = np.stack([x[tuple(t)] for t in flat]) if flat.shape[0] else np.zeros((0,) + x.shape[k:], x.dtype)
    shape = idx.shape[:-1] + x.shape[k:]
    return out.reshape(shape if shape else (1,))


GATHER_ND_CASES = [((4, 3), [[1, 2], [3, 0], [1, 2]]), ((4, 3, 2), [[0], [3], [3]]),
                   ((2, 3, 4), [[[1, 2, 3], [0, 0, 0]], [[1, 1, 1], [0, 2, 1]]]), ((5,), [[4], [0]]),
                   ((3, 2), [1, 1])]


@pytest.mark.parametrize("shape,index", GATHER_ND_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_gather_nd_forward(shape, index, index_dtype, dtype):
    x = (rand(*shape) * 10).astype(dtype) if dtype != "bool" else rand(*shape) > 0  # bool: beam search's flags
    idx = np.array(index, dtype=index_dtype)
    OpTest("gather_nd", {"X": x, "Index": idx}, {"Out": np_gather_nd(x, idx)}).check_output()


def test_gather_nd_k0_copies_all_of_x():
    x = rand(2, 3)
    idx = np.zeros((3, 0), "int64")
    OpTest("gather_nd", {"X": x, "Index": idx}, {"Out": np.stack([x, x, x])}).check_output()


@pytest.mark.parametrize("shape,index", GATHER_ND_CASES)
def test_gather_nd_grad(shape, index):
    x = rand(*shape)
    idx = np.array(index, dtype="int64")
    OpTest("gather_nd", {"X": x, "Index": idx}, {"Out": np_gather_nd(x, idx)}).check_grad(["X"], "Out")


def test_gather_nd_layer_and_grad_accumulates():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        idx = fluid.layers.data("idx", shape=[4, 2], dtype="int64", append_batch_size=False)
        w = fluid.layers.data("w", shape=[4], dtype="float64", append_batch_size=False)
        out = fluid.layers.gather_nd(x, idx)
        assert out.shape == (4,)
        gx, = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x])
    xv = rand(3, 2)
    iv = np.array([[2, 1], [0, 0], [2, 1], [1, 0]], "int64")
    wv = np.array([1.0, 2.0, 3.0, 4.0])
    o, g = run(main, {"x": xv, "idx": iv, "w": wv}, [out, gx])
    np.testing.assert_allclose(o, xv[iv[:, 0], iv[:, 1]])
    np.testing.assert_allclose(g, [[2, 0], [4, 0], [0, 4]])


def test_gather_nd_errors():
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [4, 3])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather_nd: Index 'fi' \[2, 2\] must be int32 or int64, "
                                                       r"got float32"):
        block.append_op(type="gather_nd", inputs={"X": [x], "Index": [declare(block, "fi", [2, 2])]},
                        outputs={"Out": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather_nd: the last dim of Index 'i3' \[2, 3\] \(3\) must "
                                                       r"not exceed the rank of X 'x' \[4, 3\]"):
        block.append_op(type="gather_nd", inputs={"X": [x], "Index": [declare(block, "i3", [2, 3], "int64")]},
                        outputs={"Out": [out]})
    with pytest.raises(TypeError, match="gather_nd: 'index' must be a Variable, got list"):
        fluid.layers.gather_nd(x, [[0, 1]])
    idx = declare(block, "idx", [2, 2], "int32")
    block.append_op(type="gather_nd", inputs={"X": [x], "Index": [idx]}, outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": rand(4, 3, dtype="float32")}
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather_nd: Index 'idx' has value 3 at position 1 "
                                                       r"\(coordinate 1\), out of range \[0, 3\) of dim 1 of X 'x' "
                                                       r"\[4, 3\]"):
        exe.run(main, feed=dict(feed, idx=np.array([[0, 0], [1, 3]], "int32")), fetch_list=[out])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather_nd: Index 'idx' has value -1 at position 0 "
                                                       r"\(coordinate 0\), out of range \[0, 4\)"):
        exe.run(main, feed=dict(feed, idx=np.array([[-1, 0], [1, 2]], "int32")), fetch_list=[out])


@pytest.mark.parametrize("overwrite", [True, False])
def test_gather_overwrite_is_accepted_and_the_gradient_still_sums(overwrite):
    """Fluid 1.8's gather has attr overwrite (its grad keeps one of repeated indices when True); here the gradient
    is always the derivative, summed over repeats (documented on the attribute and the layer)."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        idx = fluid.layers.data("idx", shape=[3], dtype="int64", append_batch_size=False)
        out = fluid.layers.gather(x, idx, overwrite=overwrite)
        assert main.global_block().ops[-1].attr("overwrite") == overwrite
        gx, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    g, = run(main, {"x": rand(3, 2), "idx": np.array([1, 1, 2], "int64")}, [gx])
    np.testing.assert_array_equal(g, [[0, 0], [2, 2], [1, 1]])
