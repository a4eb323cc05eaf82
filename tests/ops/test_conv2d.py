"""conv2d / depthwise_conv2d: forward against a numpy reference, gradients, the layer, and shape errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked


def conv_ref(x, w, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """Direct convolution over the zero-padded input: one einsum per kernel tap and group."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    ho = (h + 2 * pad[0] - (dil[0] * (kh - 1) + 1)) // stride[0] + 1
    wo = (wd + 2 * pad[1] - (dil[1] * (kw - 1) + 1)) // stride[1] + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    out = np.zeros((n, m, ho, wo), dtype=np.float64)
    mg = m // groups
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg].astype(np.float64)
        wg = w[g * mg:(g + 1) * mg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                patch = xg[:, :, r0:r0 + stride[0] * (ho - 1) + 1:stride[0], c0:c0 + stride[1] * (wo - 1) + 1:stride[1]]
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    return out.astype(x.dtype)


# (name, input shape, filter shape, stride, padding, dilation, groups)
CASES = [
    ("basic3x3", (2, 3, 7, 7), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ("pad1", (1, 3, 6, 6), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("stride2_pad1", (3, 2, 9, 8), (4, 2, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ("pad2_5x5", (2, 2, 8, 8), (3, 2, 5, 5), (1, 1), (2, 2), (1, 1), 1),
    ("dilation2", (2, 3, 10, 9), (4, 3, 3, 3), (1, 1), (1, 1), (2, 2), 1),
    ("groups2", (3, 4, 6, 7), (6, 2, 3, 3), (1, 1), (1, 1), (1, 1), 2),
    ("depthwise", (2, 4, 7, 7), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),
    ("depthwise_mult2_s2", (3, 3, 9, 8), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1), 3),
    ("pointwise", (3, 5, 4, 6), (7, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ("pointwise_stride2", (2, 4, 7, 6), (3, 4, 1, 1), (2, 2), (0, 0), (1, 1), 1),
    ("nonsquare", (1, 2, 5, 11), (3, 2, 2, 4), (1, 2), (1, 0), (2, 1), 1),
    ("kernel_eq_input", (3, 2, 4, 5), (3, 2, 4, 5), (1, 1), (0, 0), (1, 1), 1),
    ("pad_only_fit", (2, 1, 2, 2), (2, 1, 4, 4), (1, 1), (1, 1), (1, 1), 1),
    ("stride3_big", (3, 3, 12, 13), (8, 3, 4, 3), (3, 2), (2, 1), (1, 2), 1),
]


def _attrs(stride, pad, dil, groups):
    return {"strides": list(stride), "paddings": list(pad), "dilations": list(dil), "groups": groups}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward(case, dtype):
    _, xs, ws, stride, pad, dil, groups = case
    rng = np.random.RandomState(len(case[0]))
    x = rng.uniform(-1, 1, xs).astype(dtype)
    w = rng.uniform(-1, 1, ws).astype(dtype)
    out = conv_ref(x, w, stride, pad, dil, groups)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for op_type in ["conv2d", "depthwise_conv2d"] if groups == xs[1] else ["conv2d"]:
        OpTest(op_type, {"Input": x, "Filter": w}, {"Output": out}, _attrs(stride, pad, dil, groups)).check_output(
            atol=tol, rtol=tol)


def test_data_format_nchw_accepted():
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (2, 2, 5, 5))
    w = rng.uniform(-1, 1, (3, 2, 3, 3))
    attrs = dict(_attrs((1, 1), (0, 0), (1, 1), 1), data_format="NCHW")
    OpTest("conv2d", {"Input": x, "Filter": w}, {"Output": conv_ref(x, w)}, attrs).check_output()


# ------------------------------------------------------------------ gradients

GRAD_CASES = [c for c in CASES if c[0] in ("basic3x3", "stride2_pad1", "dilation2", "groups2", "depthwise",
                                           "depthwise_mult2_s2", "pointwise", "pointwise_stride2", "nonsquare",
                                           "pad_only_fit")]


def _small(xs):
    return (min(xs[0], 2),) + tuple(xs[1:])


@pytest.mark.parametrize("case", GRAD_CASES[:4], ids=[c[0] for c in GRAD_CASES[:4]])
def test_check_grad(case):
    """OpTest's central differences through the executor (loss = mean(Output))."""
    _, xs, ws, stride, pad, dil, groups = case
    rng = np.random.RandomState(2)
    x = rng.uniform(-1, 1, _small(xs))
    w = rng.uniform(-1, 1, ws)
    t = OpTest("conv2d", {"Input": x, "Filter": w}, {"Output": conv_ref(x, w, stride, pad, dil, groups)},
               _attrs(stride, pad, dil, groups))
    t.check_grad(["Input", "Filter"], "Output", max_relative_error=1e-6)


def _weighted_grads(op_type, x, w, attrs, r, need=("Input", "Filter"), dtype="float64"):
    """fluid.gradients of sum(Output * r) w.r.t. the inputs in `need` (others get no grad)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=list(x.shape), dtype=dtype, append_batch_size=False)
        wv = fluid.layers.data("w", shape=list(w.shape), dtype=dtype, append_batch_size=False)
        rv = fluid.layers.data("r", shape=list(r.shape), dtype=dtype, append_batch_size=False)
        xv.stop_gradient = "Input" not in need
        wv.stop_gradient = "Filter" not in need
        out = main.global_block().create_var(name="out", dtype=dtype)
        main.global_block().append_op(type=op_type, inputs={"Input": [xv], "Filter": [wv]},
                                      outputs={"Output": [out]}, attrs=attrs)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, rv))
        targets = [v for v, s in ((xv, "Input"), (wv, "Filter")) if s in need]
        grads = fluid.gradients([loss], targets)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed={"x": x.astype(dtype), "w": w.astype(dtype), "r": r.astype(dtype)}, fetch_list=grads)


def _numeric(f, a, delta=1e-3):
    """Central differences of the scalar f at a (exact up to rounding: f is linear in a)."""
    g = np.zeros_like(a)
    flat, gflat = a.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        orig = flat[i]
        flat[i] = orig + delta
        plus = f()
        flat[i] = orig - delta
        minus = f()
        flat[i] = orig
        gflat[i] = (plus - minus) / (2 * delta)
    return g


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_weighted(case):
    """Gradients of sum(Output * R) for a random R (so every output element has its own weight), checked
    against central differences of the numpy reference."""
    _, xs, ws, stride, pad, dil, groups = case
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, _small(xs))
    w = rng.uniform(-1, 1, ws)
    r = rng.uniform(-1, 1, conv_ref(x, w, stride, pad, dil, groups).shape)
    want_x = _numeric(lambda: (conv_ref(x, w, stride, pad, dil, groups) * r).sum(), x)
    want_w = _numeric(lambda: (conv_ref(x, w, stride, pad, dil, groups) * r).sum(), w)
    attrs = _attrs(stride, pad, dil, groups)
    for op_type in ["conv2d", "depthwise_conv2d"] if groups == xs[1] else ["conv2d"]:
        gx, gw = _weighted_grads(op_type, x, w, attrs, r)
        np.testing.assert_allclose(gx, want_x, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(gw, want_w, rtol=1e-7, atol=1e-9)
        # Each gradient alone (the other output slot is @EMPTY@ or absent).
        np.testing.assert_allclose(_weighted_grads(op_type, x, w, attrs, r, need=("Input",))[0], want_x,
                                   rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(_weighted_grads(op_type, x, w, attrs, r, need=("Filter",))[0], want_w,
                                   rtol=1e-7, atol=1e-9)
        record_checked("grad", op_type)


def conv_ref_grads(x, w, r, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """Gradients of sum(conv_ref(x, w) * r) w.r.t. x and w: the adjoint of conv_ref's einsums."""
    m, cg, kh, kw = w.shape
    ho, wo = r.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    mg = m // groups
    for g in range(groups):
        cs, ms = slice(g * cg, (g + 1) * cg), slice(g * mg, (g + 1) * mg)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dil[0], i * dil[0] + stride[0] * (ho - 1) + 1, stride[0])
                cols = slice(j * dil[1], j * dil[1] + stride[1] * (wo - 1) + 1, stride[1])
                dw[ms, :, i, j] = np.einsum("nchw,nmhw->mc", xp[:, cs, rows, cols], r[:, ms])
                dxp[:, cs, rows, cols] += np.einsum("nmhw,mc->nchw", r[:, ms], w[ms, :, i, j])
    return dxp[:, :, pad[0]:pad[0] + x.shape[2], pad[1]:pad[1] + x.shape[3]], dw


# Shapes big enough to be split across the thread pool and into several GEMM chunks (ragged last one).
LARGE_CASES = [
    ("chunks_37", (37, 3, 6, 5), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("wide_pad", (4, 8, 20, 18), (6, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("wide_s2_groups", (3, 8, 21, 20), (8, 4, 3, 3), (2, 2), (1, 1), (1, 1), 2),
    ("wide_depthwise", (4, 16, 20, 20), (16, 1, 3, 3), (1, 1), (1, 1), (1, 1), 16),
    ("wide_depthwise_mult_s2", (3, 8, 21, 20), (16, 1, 5, 3), (2, 1), (2, 1), (1, 2), 8),
    ("wide_pointwise", (40, 16, 6, 6), (8, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    # ResNet-like: 16 channels, batch split across threads into stacked chunks of 8x8 images.
    ("resnet_8x8", (9, 16, 8, 8), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ("resnet_s2_13ch", (5, 13, 11, 10), (19, 13, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    # stride 1, data gradient as a convolution of dout: dilation, groups, uneven padding per axis.
    ("transposed_dil_groups", (4, 12, 13, 12), (10, 6, 3, 2), (1, 1), (2, 0), (2, 3), 2),
    # stride 1 but padding > dilation*(k-1): the patch-row data gradient instead.
    ("overpadded", (3, 9, 6, 7), (8, 9, 3, 3), (1, 1), (3, 2), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", LARGE_CASES + GRAD_CASES, ids=[c[0] for c in LARGE_CASES + GRAD_CASES])
def test_grad_adjoint(case, dtype):
    """Forward and both gradients on larger shapes against the adjoint of the numpy reference."""
    _check_adjoint(case, dtype)


# float32, one group, output channels a multiple of 16: the direct AVX-512 kernel where the CPU has it
# (forward, stride-1 data gradient, filter gradient); FLUIDLITE_CONV_DIRECT=0 forces the patch-row path.
DIRECT_CASES = [
    ("direct_tails", (2, 5, 7, 6), (48, 5, 3, 2), (1, 1), (1, 0), (2, 1), 1),   # 32 + 16 channels, C = 5
    ("direct_s2", (3, 8, 9, 11), (32, 8, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ("direct_5x5_s21", (4, 3, 12, 13), (16, 3, 5, 5), (2, 1), (2, 2), (1, 1), 1),
    ("direct_pointwise", (6, 16, 5, 5), (32, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ("direct_wide_row", (2, 16, 6, 37), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # ragged pixel tiles
    ("direct_batch1", (1, 16, 10, 10), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    # K = 130*9 > 1152: direct forward and data gradient, patch-row filter gradient.
    ("direct_fwd_patch_dw", (3, 130, 6, 5), (16, 130, 3, 3), (1, 1), (1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("direct", ["1", "0"], ids=["direct", "patch_rows"])
@pytest.mark.parametrize("case", DIRECT_CASES, ids=[c[0] for c in DIRECT_CASES])
def test_direct_and_patch_paths(case, direct, monkeypatch):
    monkeypatch.setenv("FLUIDLITE_CONV_DIRECT", direct)
    _check_adjoint(case, "float32")


def _check_adjoint(case, dtype):
    _, xs, ws, stride, pad, dil, groups = case
    rng = np.random.RandomState(4)
    x = rng.uniform(-1, 1, xs)
    w = rng.uniform(-1, 1, ws)
    out = conv_ref(x, w, stride, pad, dil, groups)
    r = rng.uniform(-1, 1, out.shape)
    want_x, want_w = conv_ref_grads(x, w, r, stride, pad, dil, groups)
    tol = 2e-4 if dtype == "float32" else 1e-10
    attrs = _attrs(stride, pad, dil, groups)
    OpTest("conv2d", {"Input": x.astype(dtype), "Filter": w.astype(dtype)}, {"Output": out.astype(dtype)},
           attrs).check_output(atol=tol, rtol=tol)
    gx, gw = _weighted_grads("conv2d", x, w, attrs, r, dtype=dtype)
    np.testing.assert_allclose(gx, want_x, rtol=tol, atol=tol)
    np.testing.assert_allclose(gw, want_w, rtol=tol, atol=tol * np.sqrt(xs[0] * out.shape[2] * out.shape[3]))


# ------------------------------------------------------------------ layer

def test_layer_params_and_shapes():
    main, startup = fluid.Program(), fluid.Program()
    # A fresh name counter: the expected names must not depend on which tests ran before.
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("img", shape=[3, 12, 10], dtype="float32")
        y = fluid.layers.conv2d(x, num_filters=8, filter_size=(3, 5), stride=2, padding=(1, 2), act="relu")
        z = fluid.layers.conv2d(y, num_filters=8, filter_size=3, groups=8, padding=1, use_cudnn=False,
                                bias_attr=False)
    params = {p.name: p.shape for p in main.global_block().all_parameters()}
    assert params == {"conv2d_0.w_0": (8, 3, 3, 5), "conv2d_0.b_0": (8,), "depthwise_conv2d_0.w_0": (8, 1, 3, 3)}
    assert tuple(y.shape) == (-1, 8, 6, 5) and tuple(z.shape) == (-1, 8, 6, 5)
    types = [op.type for op in main.global_block().ops]
    assert types == ["conv2d", "elementwise_add", "relu", "depthwise_conv2d"]
    add = main.global_block().ops[1]
    assert add.attr("axis") == 1
    conv = main.global_block().ops[0]
    assert conv.attr("strides") == [2, 2] and conv.attr("paddings") == [1, 2] and conv.attr("groups") == 1
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("conv2d_0.w_0").get_tensor())
    std = (2.0 / (3 * 5 * 3)) ** 0.5
    assert abs(w.std() - std) < 0.25 * std and abs(w.mean()) < 0.3 * std
    out = exe.run(main, feed={"img": np.ones((2, 3, 12, 10), "float32")}, fetch_list=[z])[0]
    assert out.shape == (2, 8, 6, 5)


def test_layer_trains():
    rng = np.random.RandomState(5)
    xs = rng.uniform(-1, 1, (16, 2, 8, 8)).astype("float32")
    target = conv_ref(xs, rng.uniform(-0.5, 0.5, (3, 2, 3, 3)).astype("float32"), pad=(1, 1))
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5  # deterministic initial weights: the bound below is then not a matter of luck
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2, 8, 8], dtype="float32")
        t = fluid.layers.data("t", shape=[3, 8, 8], dtype="float32")
        h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, padding=1, act="relu")
        y = fluid.layers.conv2d(h, num_filters=3, filter_size=3, padding=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(y, t))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed={"x": xs, "t": target}, fetch_list=[loss])[0].reshape(-1)[0])
              for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0], losses


# ------------------------------------------------------------------ errors at build time

def _build(xshape, wshape, **attrs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        x = block.create_var(name="img", shape=xshape, dtype="float32")
        w = block.create_var(name="filt", shape=wshape, dtype="float32")
        out = block.create_var(name="out", dtype="float32")
        block.append_op(type="conv2d", inputs={"Input": [x], "Filter": [w]}, outputs={"Output": [out]},
                        attrs=attrs)
    return out


def test_unknown_batch_and_size_inferred():
    assert tuple(_build([-1, 3, 9, 9], [4, 3, 3, 3], strides=[2, 2], paddings=[1, 1]).shape) == (-1, 4, 5, 5)
    assert tuple(_build([-1, 3, -1, 9], [4, 3, 3, 3]).shape) == (-1, 4, -1, 7)


@pytest.mark.parametrize("xshape,wshape,attrs,match", [
    ([2, 3, 8], [4, 3, 3, 3], {}, r"conv2d: Input 'img' \[2, 3, 8\] must be 4-D"),
    ([2, 3, 8, 8], [4, 3, 3], {}, r"conv2d: Filter 'filt' \[4, 3, 3\] must be 4-D"),
    ([2, 3, 8, 8], [4, 1, 3, 3], {"groups": 2},
     r"conv2d: 3 input channels of Input 'img' \[2, 3, 8, 8\] are not divisible by groups = 2"),
    ([2, 4, 8, 8], [3, 2, 3, 3], {"groups": 2},
     r"conv2d: 3 output channels of Filter 'filt' \[3, 2, 3, 3\] are not divisible by groups = 2"),
    ([2, 4, 8, 8], [4, 3, 3, 3], {},
     r"conv2d: Filter 'filt' \[4, 3, 3, 3\] has 3 channels but Input 'img' \[2, 4, 8, 8\] .*needs C/groups = 4"),
    ([2, 3, 4, 8], [4, 3, 5, 3], {},
     r"conv2d: the 5-wide kernel .*Filter 'filt' \[4, 3, 5, 3\] is larger than height 4 \+ 2 \* padding 0 of "
     r"Input 'img' \[2, 3, 4, 8\]"),
    ([-1, 3, 8, 4], [4, 3, 3, 3], {"dilations": [1, 2]},
     r"conv2d: the 3-wide kernel \(dilation 2\) .* larger than width 4"),
    ([2, 3, 8, 8], [4, 3, 3, 3], {"strides": [0, 1]},
     r"op conv2d: attribute 'strides' = \[0, 1\] is invalid: element 0 \(0\) must be >= 1"),
    ([2, 3, 8, 8], [4, 3, 3, 3], {"dilations": [1, -1]},
     r"op conv2d: attribute 'dilations' = \[1, -1\] is invalid: element 1 \(-1\) must be >= 1"),
    ([2, 3, 8, 8], [4, 3, 3, 3], {"paddings": [1]},
     r"op conv2d: attribute 'paddings' = \[1\] is invalid: must have 2 values, not 1"),
    ([2, 3, 8, 8], [4, 3, 3, 3], {"groups": 0}, r"op conv2d: attribute 'groups' = 0 is invalid: must be >= 1"),
    ([2, 3, 8, 8], [4, 3, 3, 3], {"data_format": "NHWC"},
     r"op conv2d: attribute 'data_format' = 'NHWC' is invalid: must be one of 'NCHW', 'AnyLayout'"),
])
def test_shape_errors(xshape, wshape, attrs, match):
    with pytest.raises(fluid.core.EnforceNotMet, match=match):
        _build(xshape, wshape, **attrs)


def test_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 8, 8], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"conv2d: 3 input channels of Input 'x' \[-1, 3, 8, 8\]"):
            fluid.layers.conv2d(x, num_filters=4, filter_size=3, groups=2)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"conv2d: the 9-wide kernel .* larger than height 8"):
            fluid.layers.conv2d(x, num_filters=4, filter_size=9)
        with pytest.raises(ValueError, match="conv2d: stride must be an int or a pair"):
            fluid.layers.conv2d(x, num_filters=4, filter_size=3, stride=(1, 2, 3))


def test_thread_counts_agree():
    # The pool grows (new workers must pick up jobs published while they start) and shrinks; every
    # size gives the same convolution and gradients up to float32 summation order.
    x = np.random.RandomState(7).uniform(-1, 1, (12, 16, 9, 9))
    w = np.random.RandomState(8).uniform(-1, 1, (32, 16, 3, 3))
    attrs = _attrs((1, 1), (1, 1), (1, 1), 1)
    r = np.random.RandomState(9).uniform(-1, 1, (12, 32, 9, 9))
    saved = fluid.core.get_num_threads()
    results = []
    try:
        for threads in (1, 3, 2, 5, saved):
            fluid.core.set_num_threads(threads)
            assert fluid.core.get_num_threads() == threads
            results.append(_weighted_grads("conv2d", x, w, attrs, r, dtype="float32"))
    finally:
        fluid.core.set_num_threads(saved)
    for gx, gw in results[1:]:
        np.testing.assert_allclose(gx, results[0][0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(gw, results[0][1], rtol=1e-4, atol=1e-3)
    for bad in (0, 257):
        with pytest.raises(fluid.core.EnforceNotMet, match=r"set_num_threads: n = %d must be in \[1, 256\]" % bad):
            fluid.core.set_num_threads(bad)
    assert fluid.core.get_num_threads() == saved


# ------------------------------------------------------------------ conv2d_transpose

def conv_transpose_ref(x, w, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1, output_size=None):
    """Scatter form: each input pixel adds x * filter into the (stride-spaced, dilated) full output, which is then
    cropped by [top, bottom, left, right] (or extended with zeros up to output_size)."""
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    cg = c // groups
    hf, wf = (h - 1) * stride[0] + dil[0] * (kh - 1) + 1, (wd - 1) * stride[1] + dil[1] * (kw - 1) + 1
    full = np.zeros((n, mg * groups, hf + stride[0], wf + stride[1]))
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg].astype(np.float64)
        wg = w[g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                full[:, g * mg:(g + 1) * mg, r0:r0 + stride[0] * (h - 1) + 1:stride[0],
                     c0:c0 + stride[1] * (wd - 1) + 1:stride[1]] += np.einsum("nchw,cm->nmhw", xg, wg[:, :, i, j])
    ho = hf - pads[0] - pads[1] if output_size is None else output_size[0]
    wo = wf - pads[2] - pads[3] if output_size is None else output_size[1]
    return full[:, :, pads[0]:pads[0] + ho, pads[2]:pads[2] + wo].astype(x.dtype)


def _tattrs(stride, pads, dil, groups, output_size=None, algo="EXPLICIT"):
    p = [pads[0], pads[2]] if pads[0] == pads[1] and pads[2] == pads[3] else list(pads)
    return {"strides": list(stride), "paddings": p, "dilations": list(dil), "groups": groups,
            "output_size": list(output_size or []), "padding_algorithm": algo}


# (name, input shape, filter shape [C, M/g, kh, kw], stride, pads [t, b, l, r], dilation, groups, output_size)
T_CASES = [
    ("t_basic", (2, 3, 4, 5), (3, 4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, None),
    ("t_stride2_pad1", (2, 3, 5, 4), (3, 2, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, None),
    ("t_dcgan_4x4_s2", (2, 8, 4, 4), (8, 4, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 1, None),
    ("t_output_size", (2, 3, 4, 4), (3, 2, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (8, 8)),
    ("t_asym_pad", (1, 2, 5, 4), (2, 3, 3, 2), (2, 1), (0, 2, 1, 0), (1, 1), 1, None),
    ("t_dilation", (2, 2, 4, 4), (2, 3, 3, 3), (1, 2), (1, 1, 2, 2), (2, 2), 1, None),
    ("t_groups", (2, 4, 3, 5), (4, 3, 3, 3), (2, 1), (1, 1, 0, 0), (1, 1), 2, None),
    ("t_depthwise", (2, 3, 5, 5), (3, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 3, None),
    ("t_pointwise", (2, 5, 3, 3), (5, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, None),
    ("t_direct16", (2, 4, 5, 6), (4, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, None),
    ("t_direct16_s2", (3, 16, 4, 4), (16, 32, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 1, None),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", T_CASES, ids=[c[0] for c in T_CASES])
def test_transpose_forward(case, dtype):
    _, xs, ws, stride, pads, dil, groups, osize = case
    rng = np.random.RandomState(11)
    x = rng.uniform(-1, 1, xs).astype(dtype)
    w = rng.uniform(-1, 1, ws).astype(dtype)
    out = conv_transpose_ref(x, w, stride, pads, dil, groups, osize)
    tol = 1e-5 if dtype == "float32" else 1e-12
    types = ["conv2d_transpose"] + (["depthwise_conv2d_transpose"] if groups == xs[1] else [])
    for op_type in types:
        OpTest(op_type, {"Input": x, "Filter": w}, {"Output": out},
               _tattrs(stride, pads, dil, groups, osize)).check_output(atol=tol, rtol=tol)


def _transpose_grads(op_type, x, w, attrs, r, need=("Input", "Filter")):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=list(x.shape), dtype="float64", append_batch_size=False)
        wv = fluid.layers.data("w", shape=list(w.shape), dtype="float64", append_batch_size=False)
        rv = fluid.layers.data("r", shape=list(r.shape), dtype="float64", append_batch_size=False)
        xv.stop_gradient = "Input" not in need
        wv.stop_gradient = "Filter" not in need
        out = main.global_block().create_var(name="out", dtype="float64")
        main.global_block().append_op(type=op_type, inputs={"Input": [xv], "Filter": [wv]},
                                      outputs={"Output": [out]}, attrs=attrs)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, rv))
        grads = fluid.gradients([loss], [v for v, s in ((xv, "Input"), (wv, "Filter")) if s in need])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed={"x": x, "w": w, "r": r}, fetch_list=grads)


@pytest.mark.parametrize("case", T_CASES, ids=[c[0] for c in T_CASES])
def test_transpose_grad_weighted(case):
    """Gradients of sum(Output * R) against central differences of the numpy reference (linear in each input)."""
    _, xs, ws, stride, pads, dil, groups, osize = case
    rng = np.random.RandomState(12)
    x = rng.uniform(-1, 1, xs)
    w = rng.uniform(-1, 1, ws)
    r = rng.uniform(-1, 1, conv_transpose_ref(x, w, stride, pads, dil, groups, osize).shape)
    f = lambda: (conv_transpose_ref(x, w, stride, pads, dil, groups, osize) * r).sum()  # noqa: E731
    want_x, want_w = _numeric(f, x), _numeric(f, w)
    attrs = _tattrs(stride, pads, dil, groups, osize)
    types = ["conv2d_transpose"] + (["depthwise_conv2d_transpose"] if groups == xs[1] else [])
    for op_type in types:
        gx, gw = _transpose_grads(op_type, x, w, attrs, r)
        np.testing.assert_allclose(gx, want_x, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(gw, want_w, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(_transpose_grads(op_type, x, w, attrs, r, need=("Input",))[0], want_x,
                                   rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(_transpose_grads(op_type, x, w, attrs, r, need=("Filter",))[0], want_w,
                                   rtol=1e-7, atol=1e-9)
        record_checked("grad", op_type)


def test_transpose_check_grad():
    rng = np.random.RandomState(13)
    x = rng.uniform(-1, 1, (2, 3, 3, 4))
    w = rng.uniform(-1, 1, (3, 2, 3, 3))
    attrs = _tattrs((2, 2), (1, 1, 1, 1), (1, 1), 1)
    OpTest("conv2d_transpose", {"Input": x, "Filter": w},
           {"Output": conv_transpose_ref(x, w, (2, 2), (1, 1, 1, 1))}, attrs).check_grad(
        ["Input", "Filter"], "Output", max_relative_error=1e-6)


def test_transpose_padding_algorithm():
    rng = np.random.RandomState(14)
    x = rng.uniform(-1, 1, (2, 3, 5, 4))
    w = rng.uniform(-1, 1, (3, 2, 3, 2))
    # VALID: no padding (paddings ignored); SAME: Fluid's pads for ceil(H / stride), dilation 1.
    OpTest("conv2d_transpose", {"Input": x, "Filter": w}, {"Output": conv_transpose_ref(x, w, (2, 2))},
           dict(_tattrs((2, 2), (1, 1, 1, 1), (1, 1), 1), padding_algorithm="VALID")).check_output()
    # SAME on H=5, stride 2, k=3: out 3, pad_sum = 2*2 + 3 - 5 = 2 -> (1, 1); W=4, k=2: out 2, sum 2+2-4=0.
    OpTest("conv2d_transpose", {"Input": x, "Filter": w},
           {"Output": conv_transpose_ref(x, w, (2, 2), (1, 1, 0, 0))},
           dict(_tattrs((2, 2), (0, 0, 0, 0), (2, 2), 1), padding_algorithm="SAME")).check_output()


def _build_t(xshape, wshape, op_type="conv2d_transpose", **attrs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        x = block.create_var(name="img", shape=xshape, dtype="float32")
        w = block.create_var(name="filt", shape=wshape, dtype="float32")
        out = block.create_var(name="out", dtype="float32")
        block.append_op(type=op_type, inputs={"Input": [x], "Filter": [w]}, outputs={"Output": [out]}, attrs=attrs)
    return out


def test_transpose_shapes():
    assert tuple(_build_t([-1, 3, 4, 4], [3, 5, 4, 4], strides=[2, 2], paddings=[1, 1]).shape) == (-1, 5, 8, 8)
    assert tuple(_build_t([2, 4, 3, -1], [4, 2, 3, 3], groups=2).shape) == (2, 4, 5, -1)
    assert tuple(_build_t([2, 3, 4, 4], [3, 2, 3, 3], strides=[2, 2], paddings=[1, 1],
                          output_size=[8, 8]).shape) == (2, 2, 8, 8)


@pytest.mark.parametrize("xshape,wshape,attrs,match", [
    ([2, 3, 8], [3, 4, 3, 3], {}, r"conv2d_transpose: Input 'img' \[2, 3, 8\] must be 4-D"),
    ([2, 3, 8, 8], [3, 4, 3], {}, r"conv2d_transpose: Filter 'filt' \[3, 4, 3\] must be 4-D"),
    ([2, 3, 8, 8], [4, 4, 3, 3], {},
     r"conv2d_transpose: Input 'img' \[2, 3, 8, 8\] has 3 channels but Filter 'filt' \[4, 4, 3, 3\] expects 4"),
    ([2, 3, 8, 8], [3, 4, 3, 3], {"groups": 2},
     r"conv2d_transpose: 3 input channels of Filter 'filt' \[3, 4, 3, 3\] are not divisible by groups = 2"),
    ([2, 3, 4, 4], [3, 2, 3, 3], {"strides": [2, 2], "paddings": [1, 1], "output_size": [9, 7]},
     r"conv2d_transpose: output_size height 9 must be in \[7, 9\) for Input 'img'"),
    ([2, 3, 1, 1], [3, 2, 1, 1], {"paddings": [1, 1]}, r"conv2d_transpose: the output height .* is not positive"),
    ([2, 3, 4, 4], [3, 2, 3, 3], {"paddings": [1, 1, 1]},
     r"op conv2d_transpose: attribute 'paddings' = \[1, 1, 1\] is invalid: must have 2 or 4 values, not 3"),
    ([2, 3, 4, 4], [3, 2, 3, 3], {"padding_algorithm": "FULL"},
     r"op conv2d_transpose: attribute 'padding_algorithm' = 'FULL' is invalid"),
    ([2, 3, 4, 4], [3, 2, 3, 3], {"data_format": "NHWC"},
     r"op conv2d_transpose: attribute 'data_format' = 'NHWC' is invalid"),
])
def test_transpose_shape_errors(xshape, wshape, attrs, match):
    with pytest.raises(fluid.core.EnforceNotMet, match=match):
        _build_t(xshape, wshape, **attrs)


def test_transpose_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[8, 4, 4], dtype="float32")
        y = fluid.layers.conv2d_transpose(x, num_filters=6, filter_size=4, stride=2, padding=1, act="relu")
        z = fluid.layers.conv2d_transpose(y, num_filters=3, output_size=16, stride=2, padding="SAME",
                                          bias_attr=False)
        d = fluid.layers.conv2d_transpose(z, num_filters=3, filter_size=3, groups=3, padding=1, use_cudnn=False)
        a = fluid.layers.conv2d_transpose(z, num_filters=2, filter_size=(3, 2), padding=[0, 1, 1, 0])
    params = {p.name: p.shape for p in main.global_block().all_parameters()}
    # output_size 16 from 8 with stride 2 and SAME pads: filter (16 - 7*2 + 0 - 1) // 1 + 1 = 2.
    assert params["conv2d_transpose_0.w_0"] == (8, 6, 4, 4) and params["conv2d_transpose_0.b_0"] == (6,)
    assert params["conv2d_transpose_1.w_0"] == (6, 3, 2, 2) and "conv2d_transpose_1.b_0" not in params
    assert params["depthwise_conv2d_transpose_0.w_0"] == (3, 1, 3, 3)
    assert tuple(y.shape) == (-1, 6, 8, 8) and tuple(z.shape) == (-1, 3, 16, 16)
    assert tuple(d.shape) == (-1, 3, 16, 16) and tuple(a.shape) == (-1, 2, 17, 16)
    ops = main.global_block().ops
    assert [op.type for op in ops][:3] == ["conv2d_transpose", "elementwise_add", "relu"]
    assert ops[0].attr("paddings") == [1, 1] and ops[0].attr("output_size") == []
    assert ops[3].attr("padding_algorithm") == "SAME" and ops[3].attr("output_size") == [16, 16]
    assert ops[-2].attr("paddings") == [0, 1, 1, 0]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.random.RandomState(1).uniform(-1, 1, (2, 8, 4, 4)).astype("float32")
    yv, zv = exe.run(main, feed={"x": xv}, fetch_list=[y, z])
    scope = fluid.global_scope()
    w0 = np.array(scope.find_var("conv2d_transpose_0.w_0").get_tensor())
    b0 = np.array(scope.find_var("conv2d_transpose_0.b_0").get_tensor())
    want = np.maximum(conv_transpose_ref(xv, w0, (2, 2), (1, 1, 1, 1)) + b0.reshape(1, -1, 1, 1), 0)
    np.testing.assert_allclose(yv, want, rtol=1e-5, atol=1e-5)
    w1 = np.array(scope.find_var("conv2d_transpose_1.w_0").get_tensor())
    np.testing.assert_allclose(zv, conv_transpose_ref(yv, w1, (2, 2)), rtol=1e-5, atol=1e-5)


def test_transpose_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 8, 8], dtype="float32")
        with pytest.raises(ValueError, match="conv2d_transpose: output_size must be set when filter_size is None"):
            fluid.layers.conv2d_transpose(x, num_filters=4)
        with pytest.raises(ValueError, match="conv2d_transpose: data_format must be 'NCHW'"):
            fluid.layers.conv2d_transpose(x, num_filters=4, filter_size=3, data_format="NHWC")
        with pytest.raises(ValueError, match="conv2d_transpose: padding must be 'SAME', 'VALID'"):
            fluid.layers.conv2d_transpose(x, num_filters=4, filter_size=3, padding="FULL")
        with pytest.raises(ValueError, match="conv2d_transpose: num_filters = 4 must be divisible by groups = 3"):
            fluid.layers.conv2d_transpose(x, num_filters=4, filter_size=3, groups=3)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"conv2d_transpose: output_size height 30 must be in"):
            fluid.layers.conv2d_transpose(x, num_filters=4, filter_size=3, output_size=30)
        with pytest.raises(TypeError, match="conv2d_transpose: 'input' must be a Variable"):
            fluid.layers.conv2d_transpose(np.zeros((1, 3, 8, 8)), num_filters=4, filter_size=3)


def test_transpose_trains():
    """A conv2d_transpose decoder learns to map codes to fixed images (loss falls to under a third)."""
    rng = np.random.RandomState(15)
    codes = rng.uniform(-1, 1, (8, 4, 2, 2)).astype("float32")
    target = rng.uniform(-1, 1, (8, 1, 8, 8)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup):
        c = fluid.layers.data("c", shape=[4, 2, 2], dtype="float32")
        t = fluid.layers.data("t", shape=[1, 8, 8], dtype="float32")
        h = fluid.layers.conv2d_transpose(c, num_filters=16, filter_size=4, stride=2, padding=1, act="relu")
        y = fluid.layers.conv2d_transpose(h, num_filters=1, filter_size=4, stride=2, padding=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(y, t))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed={"c": codes, "t": target}, fetch_list=[loss])[0].reshape(-1)[0])
              for _ in range(100)]
    assert losses[-1] < losses[0] / 3, losses[::10]


@pytest.mark.parametrize("act", ["", "relu", "relu6", "sigmoid", "tanh"])
@pytest.mark.parametrize("case", [((1, 3, 5, 5), (4, 3, 3, 3), 1, (1, 1)), ((2, 4, 4, 4), (4, 1, 3, 3), 4, (0, 0)),
                                  ((1, 8, 3, 3), (6, 8, 1, 1), 1, (0, 0))])
def test_conv2d_fusion_is_act_of_conv_plus_bias_plus_residual(case, act):
    """conv2d_fusion (made by the fuse_conv_bias_act inference pass): act(conv2d(Input, Filter) + Bias + ResidualData)
    against numpy, over the plain, depthwise and pointwise kernel paths."""
    xshape, wshape, groups, pad = case
    rng = np.random.RandomState(3)
    x, w = rng.randn(*xshape).astype("float32"), rng.randn(*wshape).astype("float32")
    b = rng.randn(wshape[0]).astype("float32")
    ref = conv_ref(x.astype("float64"), w.astype("float64"), pad=pad, groups=groups) + b.reshape(1, -1, 1, 1)
    res = rng.randn(*ref.shape).astype("float32")
    acts = {"": lambda v: v, "relu": lambda v: np.maximum(v, 0), "relu6": lambda v: np.clip(v, 0, 6),
            "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}
    attrs = {"paddings": list(pad), "groups": groups, "activation": act}
    OpTest("conv2d_fusion", {"Input": x, "Filter": w, "Bias": b}, {"Output": acts[act](ref).astype("float32")},
           attrs).check_output(rtol=1e-4, atol=1e-5)
    OpTest("conv2d_fusion", {"Input": x, "Filter": w, "Bias": b, "ResidualData": res},
           {"Output": acts[act](ref + res).astype("float32")}, attrs).check_output(rtol=1e-4, atol=1e-5)
