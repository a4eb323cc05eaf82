"""scatter and scatter_nd_add: forward against numpy, gradients (numeric and weighted), layers, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def np_scatter(x, ids, upd, overwrite):
    out = x.copy()
    if overwrite:
        for i, r in enumerate(ids):
            out[r] = upd[i]
    else:
        out[ids] = 0
        for i, r in enumerate(ids):
            out[r] += upd[i]
    return out


SCATTER_CASES = [((5, 3), [1, 4, 0]), ((4,), [3, 3, 1]), ((3, 2, 2), [2, 0, 2, 2]), ((2, 3), [])]


@pytest.mark.parametrize("shape,ids", SCATTER_CASES)
@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_scatter_forward(shape, ids, overwrite, index_dtype, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    ids = np.array(ids, dtype=index_dtype)
    upd = (rand(len(ids), *shape[1:]) * 10).astype(dtype)
    OpTest("scatter", {"X": x, "Ids": ids, "Updates": upd}, {"Out": np_scatter(x, ids, upd, overwrite)},
           {"overwrite": overwrite}).check_output()


@pytest.mark.parametrize("shape,ids", SCATTER_CASES[:3])
@pytest.mark.parametrize("overwrite", [True, False])
def test_scatter_grad(shape, ids, overwrite):
    x = rand(*shape)
    ids = np.array(ids, dtype="int64")
    upd = rand(len(ids), *shape[1:])
    OpTest("scatter", {"X": x, "Ids": ids, "Updates": upd}, {"Out": np_scatter(x, ids, upd, overwrite)},
           {"overwrite": overwrite}).check_grad(["X", "Updates"], "Out")


@pytest.mark.parametrize("overwrite", [True, False])
def test_scatter_layer_weighted_grad(overwrite):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4, 2], dtype="float64", append_batch_size=False)
        u = fluid.layers.data("u", shape=[3, 2], dtype="float64", append_batch_size=False)
        ids = fluid.layers.data("ids", shape=[3], dtype="int64", append_batch_size=False)
        w = fluid.layers.data("w", shape=[4, 2], dtype="float64", append_batch_size=False)
        x.stop_gradient = u.stop_gradient = False
        out = fluid.layers.scatter(x, ids, u, overwrite=overwrite)
        assert out.shape == (4, 2)
        gx, gu = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x, u])
    xv, uv, wv = rand(4, 2), rand(3, 2), rand(4, 2)
    iv = np.array([2, 0, 2], "int64")
    o, a, b = run(main, {"x": xv, "u": uv, "ids": iv, "w": wv}, [out, gx, gu])
    np.testing.assert_allclose(o, np_scatter(xv, iv, uv, overwrite))
    want_gx = wv.copy()
    want_gx[[0, 2]] = 0
    np.testing.assert_allclose(a, want_gx)
    want_gu = wv[iv]
    if overwrite:
        want_gu[0] = 0  # overwritten by the later update of row 2: it does not reach Out
    np.testing.assert_allclose(b, want_gu)


def test_scatter_errors():
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [4, 3])
    out = declare(block, "out", None)
    ids = declare(block, "ids", [2], "int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"scatter: Updates 'u' \[2, 4\] must be \[2, 3\] \(one row "
                                                       r"of X per id of Ids 'ids' \[2\], X \[4, 3\]\)"):
        block.append_op(type="scatter", inputs={"X": [x], "Ids": [ids], "Updates": [declare(block, "u", [2, 4])]},
                        outputs={"Out": [out]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"scatter: Ids 'fid' \[2\] must be int32 or int64, got "
                                                       r"float32"):
        block.append_op(type="scatter", inputs={"X": [x], "Ids": [declare(block, "fid", [2])],
                                                "Updates": [declare(block, "u2", [2, 3])]}, outputs={"Out": [out]})
    upd = declare(block, "upd", [2, 3])
    block.append_op(type="scatter", inputs={"X": [x], "Ids": [ids], "Updates": [upd]}, outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"scatter: Ids 'ids' has value 4 at position 1, out of "
                                                       r"range \[0, 4\) of X 'x' \[4, 3\]"):
        exe.run(main, feed={"x": rand(4, 3, dtype="float32"), "upd": rand(2, 3, dtype="float32"),
                            "ids": np.array([0, 4], "int64")}, fetch_list=[out])
    with pytest.raises(TypeError, match="scatter: 'updates' must be a Variable, got ndarray"):
        fluid.layers.scatter(x, ids, np.zeros((2, 3)))


# ------------------------------------------------------------------ scatter_nd_add

def np_scatter_nd_add(x, idx, upd):
    out = x.copy()
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = upd.reshape((flat_idx.shape[0],) + x.shape[k:])
    for t, u in zip(flat_idx, flat_upd):
        out[tuple(t)] += u
    return out


ND_CASES = [((4, 3), [[1, 2], [3, 0], [1, 2]]), ((4, 3, 2), [[0], [3], [0]]),
            ((2, 3, 4), [[[1, 2, 3], [0, 0, 0]], [[1, 2, 3], [0, 2, 1]]]), ((5,), [[4], [0], [4]])]


def nd_updates(shape, idx, dtype="float64"):
    k = idx.shape[-1]
    return (rand(*(idx.shape[:-1] + tuple(shape[k:]))) * 10).astype(dtype)


@pytest.mark.parametrize("shape,index", ND_CASES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_scatter_nd_add_forward(shape, index, index_dtype, dtype):
    x = (rand(*shape) * 10).astype(dtype)
    idx = np.array(index, dtype=index_dtype)
    upd = nd_updates(shape, idx, dtype)
    OpTest("scatter_nd_add", {"X": x, "Index": idx, "Updates": upd},
           {"Out": np_scatter_nd_add(x, idx, upd)}).check_output()


@pytest.mark.parametrize("shape,index", ND_CASES)
def test_scatter_nd_add_grad(shape, index):
    x = rand(*shape)
    idx = np.array(index, dtype="int64")
    upd = nd_updates(shape, idx)
    OpTest("scatter_nd_add", {"X": x, "Index": idx, "Updates": upd},
           {"Out": np_scatter_nd_add(x, idx, upd)}).check_grad(["X", "Updates"], "Out")


def test_scatter_nd_layers_weighted_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float64", append_batch_size=False)
        u = fluid.layers.data("u", shape=[2, 4], dtype="float64", append_batch_size=False)
        idx = fluid.layers.data("idx", shape=[2, 1], dtype="int32", append_batch_size=False)
        w = fluid.layers.data("w", shape=[3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = u.stop_gradient = False
        out = fluid.layers.scatter_nd_add(x, idx, u)
        nd = fluid.layers.scatter_nd(idx, u, [3, 4])
        assert out.shape == (3, 4) and nd.shape == (3, 4)
        gx, gu = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x, u])
    xv, uv, wv = rand(3, 4), rand(2, 4), rand(3, 4)
    iv = np.array([[2], [2]], "int32")
    o, n, a, b = run(main, {"x": xv, "u": uv, "idx": iv, "w": wv}, [out, nd, gx, gu])
    np.testing.assert_allclose(o, np_scatter_nd_add(xv, iv, uv))
    np.testing.assert_allclose(n, np_scatter_nd_add(np.zeros((3, 4)), iv, uv))
    np.testing.assert_allclose(a, wv)
    np.testing.assert_allclose(b, wv[[2, 2]])


def test_scatter_nd_add_errors():
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [4, 3])
    out = declare(block, "out", None)
    idx = declare(block, "idx", [2, 1], "int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"scatter_nd_add: Updates 'u' \[2, 4\] must be \[2, 3\] "
                                                       r"\(Index.dims\[:-1\] \+ X.dims\[k:\] for Index 'idx' \[2, 1\] "
                                                       r"and X 'x' \[4, 3\]\)"):
        block.append_op(type="scatter_nd_add", inputs={"X": [x], "Index": [idx],
                                                       "Updates": [declare(block, "u", [2, 4])]},
                        outputs={"Out": [out]})
    with pytest.raises(TypeError, match=r"scatter_nd_add: ref x \(.*\) and updates ud \(.*\) must have one dtype"):
        fluid.layers.scatter_nd_add(x, idx, declare(block, "ud", [2, 3], "float64"))
    upd = declare(block, "upd", [2, 3])
    block.append_op(type="scatter_nd_add", inputs={"X": [x], "Index": [idx], "Updates": [upd]},
                    outputs={"Out": [out]})
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"scatter_nd_add: Index 'idx' has value 7 at position 1 "
                                                       r"\(coordinate 0\), out of range \[0, 4\) of dim 0 of X 'x' "
                                                       r"\[4, 3\]"):
        exe.run(main, feed={"x": rand(4, 3, dtype="float32"), "upd": rand(2, 3, dtype="float32"),
                            "idx": np.array([[0], [7]], "int64")}, fetch_list=[out])
