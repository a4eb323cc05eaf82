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
