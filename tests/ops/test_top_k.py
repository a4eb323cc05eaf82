"""top_k: exact results (ties, k, shapes, dtypes), the layer, k errors, gradients."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def np_topk(x, k):
    # stable argsort of -x: descending values, lower index first among ties
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k].astype("int64")
    return np.take_along_axis(x, idx, axis=-1), idx


@pytest.mark.parametrize("shape,k", [((6,), 1), ((6,), 6), ((4, 10), 3), ((2, 3, 7), 2), ((5, 1), 1), ((3, 50), 50)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_top_k(shape, k, dtype):
    rng = np.random.RandomState(0)
    x = rng.randint(-4, 5, shape).astype(dtype)  # many ties
    if dtype.startswith("float"):
        x = x + (rng.rand(*shape) < 0.5) * 0.5
        x = x.astype(dtype)
    out, idx = np_topk(x, k)
    OpTest("top_k", {"X": x}, {"Out": out, "Indices": idx}, {"k": k}).check_output(atol=0, rtol=0)


def test_top_k_ties_lower_index_first():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]], dtype="float32")
    OpTest("top_k", {"X": x}, {"Out": np.array([[3.0, 3.0, 3.0, 2.0]], dtype="float32"),
                               "Indices": np.array([[1, 2, 4, 3]], dtype="int64")}, {"k": 4}).check_output()


def test_topk_layer_shapes_and_k_error():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="scores", shape=[5], dtype="float32")
        values, indices = fluid.layers.topk(x, k=2)
        assert values.shape == (-1, 2) and indices.shape == (-1, 2)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"top_k: k=6 must be in \[1, 5\] for X 'scores' \[-1, 5\]"):
            fluid.layers.topk(x, k=6)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op top_k: attribute 'k' = 0 is invalid: must be >= 1"):
            fluid.layers.topk(x, k=0)
    xv = np.array([[0.1, 0.5, 0.2, 0.9, 0.0]], dtype="float32")
    v, i = fluid.Executor(fluid.CPUPlace()).run(main, feed={"scores": xv}, fetch_list=[values, indices])
    np.testing.assert_array_equal(i, [[3, 1]])
    np.testing.assert_array_equal(v, xv[:, [3, 1]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_top_k_grad_routes_to_selected_positions(dtype):
    # d sum(top_k(x) * w) / dx puts w at the chosen positions; numeric gradients agree (distinct values,
    # so small perturbations keep the same selection).
    rng = np.random.RandomState(3)
    x = rng.permutation(24).reshape(2, 3, 4).astype(dtype) * 0.5
    w = rng.uniform(-1, 1, (2, 3, 2)).astype(dtype)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[2, 3, 4], dtype=dtype, append_batch_size=False)
        wv = fluid.layers.data("w", shape=[2, 3, 2], dtype=dtype, append_batch_size=False)
        xv.stop_gradient = False
        values, indices = fluid.layers.topk(xv, k=2)
        values.stop_gradient = False  # Fluid's topk stops gradients by default; the op itself has one
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(values, wv))
        gx, = fluid.gradients([loss], [xv])
    exe = fluid.Executor(fluid.CPUPlace())
    idx, got = exe.run(main, feed={"x": x, "w": w}, fetch_list=[indices, gx])
    want = np.zeros_like(x)
    np.put_along_axis(want, idx, w, axis=-1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(idx, np.argsort(-x, axis=-1, kind="stable")[..., :2])
    if dtype == "float64":
        OpTest("top_k", {"X": x}, {"Out": np.take_along_axis(x, idx, -1), "Indices": idx},
               {"k": 2}).check_grad(["X"], "Out")


@pytest.mark.parametrize("k_dtype", ["int32", "int64"])
def test_topk_with_k_variable_overrides_attr_at_run_time(k_dtype):
    # Fluid's optional K input: layers.topk(x, k) with k a Variable; Out's last dim is unknown at build time.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[6], dtype="float64")
        x.stop_gradient = False
        k = fluid.layers.data(name="k", shape=[-1], dtype=k_dtype, append_batch_size=False)  # any length: the op checks
        values, indices = fluid.layers.topk(x, k)
        assert values.shape == (-1, -1) and indices.shape == (-1, -1)
        assert main.global_block().ops[-1].input("K") == ["k"]
        values.stop_gradient = False  # as in test_top_k_grad_routes_to_selected_positions
        loss = fluid.layers.reduce_sum(fluid.layers.square(values))
        gx, = fluid.gradients(loss, [x])
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.random.RandomState(3).rand(4, 6)
    for kv in (2, 5):
        v, i, g = exe.run(main, feed={"x": xv, "k": np.array([kv], k_dtype)}, fetch_list=[values, indices, gx])
        ref_v, ref_i = np_topk(xv, kv)
        np.testing.assert_array_equal(v, ref_v)
        np.testing.assert_array_equal(i, ref_i)
        ref_g = np.zeros_like(xv)
        np.put_along_axis(ref_g, ref_i, 2 * ref_v, axis=-1)
        np.testing.assert_allclose(g, ref_g)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"top_k: k=7 \(the value of K 'k'\) must be in \[1, 6\] for X "
                                                       r"'x' \[4, 6\]"):
        exe.run(main, feed={"x": xv, "k": np.array([7], k_dtype)}, fetch_list=[values])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"top_k: K 'k' must be a 1-element int32 or int64 tensor, got "
                                                       r"%s \[2\]" % k_dtype):
        exe.run(main, feed={"x": xv, "k": np.array([1, 2], k_dtype)}, fetch_list=[values])


def test_topk_k_variable_must_be_an_integer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        k = fluid.layers.data(name="kf", shape=[1], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"top_k: K 'kf' \[1\] must be int32 or int64, got float32"):
            fluid.layers.topk(x, k)
