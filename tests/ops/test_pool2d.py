"""pool2d: forward against a numpy reference of Fluid's windows, gradients, tie routing, build-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(5)


def pool2d_ref(x, ksize, strides, paddings, pooling_type, ceil_mode=False, exclusive=True, global_pooling=False):
    """Fluid 1.x CPU pooling: windows clipped to the input; avg divides by the clipped size when exclusive.
    A window left empty by clipping gives 0 (Fluid leaves -FLT_MAX or 0/0 there)."""
    n, c, h, w = x.shape
    if global_pooling:
        ksize, strides, paddings = [h, w], [1, 1], [0, 0]
    (kh, kw), (sh, sw), (ph, pw) = ksize, strides, paddings
    extra_h, extra_w = (sh - 1, sw - 1) if ceil_mode else (0, 0)
    oh_n = (h - kh + 2 * ph + extra_h) // sh + 1
    ow_n = (w - kw + 2 * pw + extra_w) // sw + 1
    out = np.zeros((n, c, oh_n, ow_n), dtype=x.dtype)
    for oh in range(oh_n):
        hs = oh * sh - ph
        he, hs = min(hs + kh, h), max(hs, 0)
        for ow in range(ow_n):
            ws = ow * sw - pw
            we, ws = min(ws + kw, w), max(ws, 0)
            win = x[:, :, hs:he, ws:we]
            if win.size == 0:  # a window entirely in the ceil_mode overhang: fluidlite gives 0
                continue
            if pooling_type == "max":
                out[:, :, oh, ow] = win.max(axis=(2, 3))
            else:
                div = (he - hs) * (we - ws) if exclusive else kh * kw
                out[:, :, oh, ow] = win.sum(axis=(2, 3)) / div
    return out


def unique_input(shape, dtype="float64"):
    """Distinct values 0.01 apart: the max of every window is unique and stable under +-1e-6."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.01 - n * 0.005).astype(dtype)


CASES = [
    # shape, ksize, strides, paddings, ceil_mode, exclusive
    ((2, 3, 6, 6), [2, 2], [2, 2], [0, 0], False, True),
    ((1, 2, 5, 7), [3, 3], [1, 1], [0, 0], False, True),
    ((2, 1, 5, 5), [3, 3], [2, 2], [1, 1], False, True),
    ((2, 1, 5, 5), [3, 3], [2, 2], [1, 1], False, False),
    ((1, 2, 7, 6), [2, 3], [2, 1], [1, 0], True, True),
    ((1, 2, 7, 6), [2, 3], [2, 2], [0, 1], True, False),
    ((2, 2, 4, 4), [3, 3], [3, 3], [0, 0], True, True),
    ((1, 1, 1, 1), [1, 1], [1, 1], [0, 0], False, True),
    ((3, 2, 1, 5), [1, 2], [1, 2], [0, 1], False, True),
    ((1, 3, 8, 8), [2, 2], [1, 1], [1, 1], False, False),
]


def attrs_of(ksize, strides, paddings, ptype, ceil_mode, exclusive, global_pooling=False):
    return {"pooling_type": ptype, "ksize": ksize, "strides": strides, "paddings": paddings,
            "ceil_mode": ceil_mode, "exclusive": exclusive, "global_pooling": global_pooling}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pool2d_forward(case, ptype, dtype):
    shape, k, s, p, ceil_mode, exclusive = case
    x = rng.uniform(-1, 1, shape).astype(dtype)
    out = pool2d_ref(x, k, s, p, ptype, ceil_mode, exclusive)
    OpTest("pool2d", {"X": x}, {"Out": out}, attrs_of(k, s, p, ptype, ceil_mode, exclusive)).check_output()


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 1, 1, 1), (2, 1, 7, 1)])
def test_pool2d_global(ptype, shape):
    x = rng.uniform(-1, 1, shape).astype("float32")
    # ksize / paddings are ignored with global pooling
    attrs = attrs_of([2, 2], [1, 1], [1, 1], ptype, False, True, global_pooling=True)
    want = x.max(axis=(2, 3), keepdims=True) if ptype == "max" else x.mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(pool2d_ref(x, [2, 2], [1, 1], [1, 1], ptype, global_pooling=True), want, rtol=1e-6)
    OpTest("pool2d", {"X": x}, {"Out": want}, attrs).check_output()


def test_pool2d_reference_sanity():
    # A hand-computed case so the numpy reference itself is checked: 4x4, 3x3 window, stride 2, padding 1.
    x = np.arange(16, dtype="float64").reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(pool2d_ref(x, [3, 3], [2, 2], [1, 1], "max")[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_allclose(pool2d_ref(x, [3, 3], [2, 2], [1, 1], "avg")[0, 0],
                               [[(0 + 1 + 4 + 5) / 4, (1 + 2 + 3 + 5 + 6 + 7) / 6],
                                [(4 + 5 + 8 + 9 + 12 + 13) / 6, (5 + 6 + 7 + 9 + 10 + 11 + 13 + 14 + 15) / 9]])
    np.testing.assert_allclose(pool2d_ref(x, [3, 3], [2, 2], [1, 1], "avg", exclusive=False)[0, 0, 0, 0], 10 / 9)


@pytest.mark.parametrize("case", CASES[:8])
@pytest.mark.parametrize("ptype", ["max", "avg"])
def test_pool2d_grad(case, ptype):
    shape, k, s, p, ceil_mode, exclusive = case
    x = unique_input(shape)
    t = OpTest("pool2d", {"X": x}, {"Out": pool2d_ref(x, k, s, p, ptype, ceil_mode, exclusive)},
               attrs_of(k, s, p, ptype, ceil_mode, exclusive))
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("ptype", ["max", "avg"])
def test_pool2d_global_grad(ptype):
    x = unique_input((2, 2, 3, 4))
    want = x.max(axis=(2, 3), keepdims=True) if ptype == "max" else x.mean(axis=(2, 3), keepdims=True)
    OpTest("pool2d", {"X": x}, {"Out": want}, attrs_of([1, 1], [1, 1], [0, 0], ptype, False, True, True)).check_grad(
        ["X"], "Out")


def _run_pool_grad(x, dout, **kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=list(x.shape), dtype=str(x.dtype), append_batch_size=False)
        xv.stop_gradient = False
        gv = fluid.layers.data("g", shape=list(dout.shape), dtype=str(x.dtype), append_batch_size=False)
        out = fluid.layers.pool2d(xv, **kw)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, gv))
        gx, = fluid.gradients([loss], [xv])
    return fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x, "g": dout}, fetch_list=[out, gx])


def test_pool2d_max_grad_routes_ties_to_first_in_window():
    # Every window is all-equal: each output gradient goes to the window's top-left element only, and
    # overlapping windows (stride 1) add up on shared elements.
    x = np.ones((1, 1, 3, 3), dtype="float32")
    dout = np.array([[[[1, 2], [3, 4]]]], dtype="float32")
    out, gx = _run_pool_grad(x, dout, pool_size=2, pool_type="max", pool_stride=1)
    np.testing.assert_array_equal(out, np.ones((1, 1, 2, 2)))
    np.testing.assert_array_equal(gx[0, 0], [[1, 2, 0], [3, 4, 0], [0, 0, 0]])
    # A window whose max appears twice: the first in row-major order gets it.
    x = np.array([[[[0, 5], [5, 1]]]], dtype="float32")
    out, gx = _run_pool_grad(x, np.array([[[[7]]]], dtype="float32"), pool_size=2, pool_type="max", pool_stride=2)
    np.testing.assert_array_equal(gx[0, 0], [[0, 7], [0, 0]])


def test_pool2d_avg_grad_matches_numpy_spread():
    x = rng.uniform(-1, 1, (2, 3, 5, 5)).astype("float32")
    dout = rng.uniform(-1, 1, (2, 3, 3, 3)).astype("float32")
    for exclusive in (True, False):
        out, gx = _run_pool_grad(x, dout, pool_size=3, pool_type="avg", pool_stride=2, pool_padding=1,
                                 exclusive=exclusive)
        want = np.zeros((2, 3, 7, 7), dtype="float64")  # padded
        for oh in range(3):
            for ow in range(3):
                hs, ws = oh * 2, ow * 2
                div = 9
                if exclusive:
                    div = (min(hs + 3, 6) - max(hs, 1)) * (min(ws + 3, 6) - max(ws, 1))
                want[:, :, hs:hs + 3, ws:ws + 3] += dout[:, :, oh:oh + 1, ow:ow + 1] / div
        np.testing.assert_allclose(gx, want[:, :, 1:6, 1:6], rtol=1e-5, atol=1e-6)


def test_pool2d_layer_and_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 24, 24])
        y = fluid.layers.pool2d(x, pool_size=2, pool_stride=2)
        z = fluid.layers.pool2d(x, pool_size=[3, 2], pool_type="avg", pool_stride=[2, 1], pool_padding=[1, 0],
                                ceil_mode=True)
        g = fluid.layers.pool2d(x, pool_type="avg", global_pooling=True)
    assert y.shape == (-1, 3, 12, 12)
    assert z.shape == (-1, 3, 13, 23)
    assert g.shape == (-1, 3, 1, 1)
    op = [o for o in main.global_block().ops if o.type == "pool2d"][1]
    assert op.attr("ksize") == [3, 2] and op.attr("strides") == [2, 1] and op.attr("paddings") == [1, 0]
    assert op.attr("pooling_type") == "avg" and op.attr("ceil_mode") and op.attr("exclusive")
    xv = rng.uniform(-1, 1, (2, 3, 24, 24)).astype("float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[y, z, g])
    np.testing.assert_allclose(got[0], pool2d_ref(xv, [2, 2], [2, 2], [0, 0], "max"))
    np.testing.assert_allclose(got[1], pool2d_ref(xv, [3, 2], [2, 1], [1, 0], "avg", ceil_mode=True), rtol=1e-5)
    np.testing.assert_allclose(got[2], xv.mean(axis=(2, 3), keepdims=True), rtol=1e-5)


def test_pool2d_layer_argument_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 8, 8])
        with pytest.raises(ValueError, match="pool_type"):
            fluid.layers.pool2d(x, pool_size=2, pool_type="min")
        with pytest.raises(ValueError, match="pool_size must be given"):
            fluid.layers.pool2d(x)


def test_pool2d_build_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x3 = fluid.layers.data("x3", shape=[3, 8], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"pool2d: X 'x3' \[-1, 3, 8\] must have rank 4"):
            fluid.layers.pool2d(x3, pool_size=2)
        x = fluid.layers.data("x", shape=[3, 4, 5])
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"pool2d: kernel height 7 is larger than the padded input height 6 for "
                                 r"X 'x' \[-1, 3, 4, 5\] with paddings \[1, 0\]"):
            fluid.layers.pool2d(x, pool_size=[7, 2], pool_padding=[1, 0])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"pool2d: kernel width 6 is larger than the padded input "
                                                           r"width 5 for X 'x'"):
            fluid.layers.pool2d(x, pool_size=[2, 6])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op pool2d: attribute 'strides' = \[0, 1\] is invalid: "
                                                           r"element 0 \(0\) must be >= 1"):
            fluid.layers.pool2d(x, pool_size=2, pool_stride=[0, 1])
        block = fluid.default_main_program().global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"pool2d: ksize \[2\] must have 2 values for X 'x'"):
            block.append_op(type="pool2d", inputs={"X": x}, outputs={"Out": out}, attrs={"ksize": [2]})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op pool2d: attribute 'pooling_type' = 'sum' is invalid: "
                                                           r"must be one of 'max', 'avg'"):
            block.append_op(type="pool2d", inputs={"X": x}, outputs={"Out": out},
                            attrs={"ksize": [2, 2], "pooling_type": "sum"})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op pool2d: attribute 'paddings' = \[-1, 0\] is invalid: "
                                                           r"element 0 \(-1\) must be >= 0"):
            block.append_op(type="pool2d", inputs={"X": x}, outputs={"Out": out},
                            attrs={"ksize": [2, 2], "paddings": [-1, 0]})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pool2d_large_split_across_threads(dtype):
    # 6*8 planes of 40x36: big enough for the kernels to split the planes across the thread pool.
    x = unique_input((6, 8, 40, 36), dtype)
    dout = rng.uniform(-1, 1, (6, 8, 20, 18)).astype(dtype)
    out, gx = _run_pool_grad(x, dout, pool_size=2, pool_type="max", pool_stride=2)
    np.testing.assert_allclose(out, pool2d_ref(x, [2, 2], [2, 2], [0, 0], "max"), rtol=1e-6)
    up = lambda a: a.repeat(2, axis=2).repeat(2, axis=3)  # noqa: E731
    np.testing.assert_allclose(gx, np.where(x == up(out), up(dout), 0), rtol=1e-6)
    out, gx = _run_pool_grad(x, dout, pool_size=2, pool_type="avg", pool_stride=2)
    np.testing.assert_allclose(out, pool2d_ref(x, [2, 2], [2, 2], [0, 0], "avg"), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gx, up(dout) / 4, rtol=1e-6)
