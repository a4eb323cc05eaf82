"""row_conv: lookahead convolution within each sequence (LoDTensor [T, D] or padded batch [B, T, D]), gradients of
X and Filter, the layer (parameter name and shape) and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def row_conv_per_sequence(x, lens, w):
    out, start = np.zeros_like(x), 0
    for n in lens:
        seq = x[start:start + n]
        for t in range(n):
            for i in range(min(len(w), n - t)):
                out[start + t] += seq[t + i] * w[i]
        start += n
    return out


# ragged (some shorter than the filter), one-element sequences, a single sequence, empty ones, two LoD levels
CASES = [([4, 1, 3], [], 3, 5),
         ([1, 1], [], 2, 3),
         ([6], [], 4, 2),
         ([0, 3, 0, 2], [], 2, 4),
         ([2, 3, 4], [[2, 1]], 3, 3)]


@pytest.mark.parametrize("lens,upper,k,d", CASES)
def test_forward_and_grad(lens, upper, k, d):
    rng = np.random.RandomState(sum(lens) + k)
    x, w = rng.uniform(-1, 1, (sum(lens), d)), rng.uniform(-1, 1, (k, d))
    lod = upper + [lens]
    t = OpTest("row_conv", {"X": (x, lod), "Filter": w}, {"Out": (row_conv_per_sequence(x, lens, w), lod)})
    t.check_output()
    t.check_grad(["X", "Filter"], "Out", max_relative_error=1e-6)


def test_padded_batch_without_lod():
    rng = np.random.RandomState(3)
    x, w = rng.uniform(-1, 1, (3, 4, 5)), rng.uniform(-1, 1, (2, 5))
    want = row_conv_per_sequence(x.reshape(12, 5), [4, 4, 4], w).reshape(3, 4, 5)
    t = OpTest("row_conv", {"X": x, "Filter": w}, {"Out": want})
    t.check_output()
    t.check_grad(["X", "Filter"], "Out", max_relative_error=1e-6)


@pytest.fixture
def two_threads():
    before = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    yield
    fluid.core.set_num_threads(before)


def test_many_rows_split_over_threads(two_threads):
    # 2 threads: the rows are cut into 2 slices, Filter@GRAD summed per slice and then added up.
    rng = np.random.RandomState(4)
    lens = list(rng.randint(1, 60, 300))
    x, w = rng.uniform(-1, 1, (sum(lens), 64)).astype("float32"), rng.uniform(-1, 1, (3, 64)).astype("float32")
    want = row_conv_per_sequence(x, lens, w)
    OpTest("row_conv", {"X": (x, [lens]), "Filter": w}, {"Out": (want, [lens])}).check_output(atol=1e-5)
    # Both gradients of sum(Out * G) against their per-sequence numpy formulas, at a size the threads split.
    g = rng.uniform(-1, 1, x.shape).astype("float32")
    dx, dw, start = np.zeros_like(x), np.zeros_like(w), 0
    for n in lens:
        for t in range(n):
            for i in range(min(3, n - t)):
                dx[start + t + i] += w[i] * g[start + t]
                dw[i] += x[start + t + i] * g[start + t]
        start += n
    mp, sp = fluid.Program(), fluid.Program()
    with fluid.program_guard(mp, sp):
        xv = fluid.layers.data("x", shape=[64], dtype="float32", lod_level=1)
        xv.stop_gradient = False
        wv = fluid.layers.create_parameter([3, 64], "float32", name="w")
        out = mp.global_block().create_var(name="out", dtype="float32")
        mp.global_block().append_op(type="row_conv", inputs={"X": [xv], "Filter": [wv]}, outputs={"Out": [out]})
        gv = fluid.layers.data("g", shape=[64], dtype="float32", lod_level=1)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, gv))
        gx, gw = fluid.gradients([loss], [xv, wv])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(sp)
    fluid.global_scope().var("w").get_tensor().set(w, fluid.CPUPlace())
    got_dx, got_dw = (np.array(t) for t in exe.run(mp, feed={"x": (x, [lens]), "g": (g, [lens])},
                                                   fetch_list=[gx, gw], return_numpy=False))
    np.testing.assert_allclose(got_dx, dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_dw, dw, rtol=1e-4, atol=1e-3)


def test_layer_and_errors():
    lens = [3, 2]
    xv = np.random.RandomState(1).uniform(-1, 1, (5, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4], dtype="float32", lod_level=1)
        y = fluid.layers.row_conv(x, future_context_size=2, act="relu")
        params = main.global_block().all_parameters()
        assert [(p.name, tuple(p.shape)) for p in params] == [("row_conv_0.w_0", (3, 4))]
        assert tuple(y.shape) == (-1, 4) and y.lod_level == 1
        assert [op.type for op in main.global_block().ops] == ["row_conv", "relu"]
        with pytest.raises(TypeError, match=r"row_conv: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.row_conv(fluid.layers.data("ids", shape=[1], dtype="int64", lod_level=1), 1)
        w5 = fluid.layers.create_parameter([3, 5], "float32", name="w5")
        bad = main.global_block().create_var(name="bad", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"row_conv: Filter 'w5' \[3, 5\] must have X 'x' \[-1, 4\]"
                                                           r"'s width 4"):
            main.global_block().append_op(type="row_conv", inputs={"X": [x], "Filter": [w5]}, outputs={"Out": [bad]})
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("row_conv_0.w_0").get_tensor())
    got, = exe.run(main, feed={"x": (xv, [lens])}, fetch_list=[y], return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    np.testing.assert_allclose(np.array(got), np.maximum(row_conv_per_sequence(xv, lens, w), 0), rtol=1e-6, atol=1e-7)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"row_conv: X 'x' \[5, 4\] must be a LoDTensor"):
        exe.run(main, feed={"x": xv}, fetch_list=[y])


def test_layer_on_a_padded_batch():
    xv = np.random.RandomState(2).uniform(-1, 1, (2, 3, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")
        y = fluid.layers.row_conv(x, future_context_size=1, param_attr=fluid.ParamAttr(name="rc_w"))
        assert tuple(y.shape) == (-1, 3, 4) and tuple(main.global_block().var("rc_w").shape) == (2, 4)
        with pytest.raises(ValueError, match=r"row_conv: input v must be \[T, D\] or \[B, T, D\] with D known"):
            fluid.layers.row_conv(fluid.layers.data("v", shape=[2, 3, 4], dtype="float32"), 1)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("rc_w").get_tensor())
    got, = exe.run(main, feed={"x": xv}, fetch_list=[y])
    want = row_conv_per_sequence(xv.reshape(6, 4), [3, 3], w).reshape(2, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"row_conv: X 'x' \[2, 3, 4\] with LoD \{\{0, 1, 2\}\}: a "
                                                       r"\[B, T, D\] X is a padded batch without LoD"):
        exe.run(main, feed={"x": (xv, [[1, 1]])}, fetch_list=[y])
