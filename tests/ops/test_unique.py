"""unique: forward against numpy (order of first appearance, Out[Index] == X), the layer and its errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run


def np_unique_first_seen(x):
    _, first = np.unique(x, return_index=True)
    out = x[np.sort(first)]
    pos = {v: i for i, v in enumerate(out.tolist())}
    return out, np.array([pos[v] for v in x.tolist()])


@pytest.mark.parametrize("values", [[2, 3, 3, 1, 5, 3], [7], [4, 4, 4], [1, 2, 3, 4], [0.5, -1.0, 0.5, 2.0]])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_unique_forward(values, dtype, index_dtype):
    x = np.array(values).astype(dtype)
    out, index = np_unique_first_seen(x)
    assert (out[index] == x).all()
    vt = {"int32": 2, "int64": 3}[index_dtype]
    OpTest("unique", {"X": x}, {"Out": out, "Index": index.astype(index_dtype)}, {"dtype": vt}).check_output()


def test_unique_layer():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[6], dtype="int64", append_batch_size=False)
        out, index = fluid.layers.unique(x)
        out64, index64 = fluid.layers.unique(x, dtype="int64")
        assert out.shape == (-1,) and index.shape == (6,)
        assert index.dtype == fluid.core.VarDesc.VarType.INT32 and index64.dtype == fluid.core.VarDesc.VarType.INT64
    o, i, i64 = run(main, {"x": np.array([5, 2, 5, 9, 2, 2], "int64")}, [out, index, index64])
    np.testing.assert_array_equal(o, [5, 2, 9])
    np.testing.assert_array_equal(i, [0, 1, 0, 2, 1, 1])
    assert i.dtype == np.int32 and i64.dtype == np.int64


def test_unique_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"unique: X 'x' \[2, 3\] must be 1-D"):
            fluid.layers.unique(x)
        v = fluid.layers.data("v", shape=[3], dtype="float32", append_batch_size=False)
        with pytest.raises(TypeError, match="unique: dtype must be int32 or int64, got float32"):
            fluid.layers.unique(v, dtype="float32")
    block = main.global_block()
    with pytest.raises(fluid.core.EnforceNotMet, match=r"unique: attribute dtype must be int32 \(2\) or int64 \(3\), "
                                                       r"got 5"):
        block.append_op(type="unique", inputs={"X": [v]}, outputs={"Out": [declare(block, "o", None)],
                                                                   "Index": [declare(block, "i", None, "int32")]},
                        attrs={"dtype": 5})


@pytest.mark.parametrize("values", [[2, 3, 3, 1, 5, 3], [7], [0.5, -1.0, 0.5, 2.0, 0.5]])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_unique_with_counts_forward(values, dtype, index_dtype):
    x = np.array(values).astype(dtype)
    out, index = np_unique_first_seen(x)
    count = np.array([(x == v).sum() for v in out])
    vt = {"int32": 2, "int64": 3}[index_dtype]
    OpTest("unique_with_counts", {"X": x}, {"Out": out, "Index": index.astype(index_dtype),
                                            "Count": count.astype(index_dtype)}, {"dtype": vt}).check_output()


def test_unique_with_counts_layer():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[5], dtype="float32", append_batch_size=False)
        out, index, count = fluid.layers.unique_with_counts(x, dtype="int64")
        assert count.dtype == fluid.core.VarDesc.VarType.INT64 and count.shape == (-1,)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"unique_with_counts: X 'm' \[2, 2\] must be 1-D"):
            fluid.layers.unique_with_counts(fluid.layers.data("m", shape=[2, 2], append_batch_size=False))
    o, i, c = run(main, {"x": np.array([3, 1, 3, 3, 2], "float32")}, [out, index, count])
    np.testing.assert_array_equal(o, [3, 1, 2])
    np.testing.assert_array_equal(i, [0, 1, 0, 0, 2])
    np.testing.assert_array_equal(c, [3, 1, 1])
