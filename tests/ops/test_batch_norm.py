"""batch_norm: forward (NCHW, NHWC, train/test), gradients, running statistics over several steps,
is_test / clone(for_test=True), build-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(7)


def channel_axes(x, layout):
    return tuple(i for i in range(x.ndim) if i != (1 if layout == "NCHW" else x.ndim - 1))


def bcast(v, x, layout):
    shape = [1] * x.ndim
    shape[1 if layout == "NCHW" else -1] = -1
    return v.reshape(shape)


def bn_train_ref(x, scale, bias, mean, var, momentum, eps, layout):
    axes = channel_axes(x, layout)
    bm = x.mean(axis=axes)
    bv = x.var(axis=axes)  # biased, as Fluid 1.x uses for both normalising and the running update
    y = (x - bcast(bm, x, layout)) / np.sqrt(bcast(bv, x, layout) + eps) * bcast(scale, x, layout) \
        + bcast(bias, x, layout)
    return y, mean * momentum + bm * (1 - momentum), var * momentum + bv * (1 - momentum), bm, 1 / np.sqrt(bv + eps)


def bn_test_ref(x, scale, bias, mean, var, eps, layout):
    return (x - bcast(mean, x, layout)) / np.sqrt(bcast(var, x, layout) + eps) * bcast(scale, x, layout) \
        + bcast(bias, x, layout)


def make_inputs(shape, layout, dtype="float64", offset=0.0):
    c = shape[1] if layout == "NCHW" else shape[-1]
    x = (rng.uniform(-1, 1, shape) * 2 + offset).astype(dtype)
    scale = rng.uniform(0.5, 1.5, c).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, c).astype(dtype)
    mean = rng.uniform(-0.2, 0.2, c).astype(dtype)
    var = rng.uniform(0.5, 1.5, c).astype(dtype)
    return x, scale, bias, mean, var


SHAPES = [
    ((2, 3, 4, 5), "NCHW"), ((3, 4), "NCHW"), ((2, 3, 1, 1), "NCHW"), ((1, 2, 3, 3), "NCHW"), ((2, 2, 3, 2, 2), "NCHW"),
    ((2, 4, 5, 3), "NHWC"), ((5, 3), "NHWC"), ((1, 1, 1, 4), "NHWC"),
    ((8, 16, 24, 24), "NCHW"),  # large enough to be split across the thread pool
]


def op_test(x, scale, bias, mean, var, attrs, outputs):
    return OpTest("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var}, outputs, attrs)


@pytest.mark.parametrize("shape,layout", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_train_forward(shape, layout, dtype):
    x, scale, bias, mean, var = make_inputs(shape, layout, dtype)
    # momentum and epsilon are float attributes: the reference uses their float32 values
    y, mo, vo, sm, sv = bn_train_ref(*(a.astype("float64") for a in (x, scale, bias, mean, var)),
                                     float(np.float32(0.9)), float(np.float32(1e-5)), layout)
    attrs = {"momentum": 0.9, "epsilon": 1e-5, "data_layout": layout, "is_test": False}
    outs = {"Y": y.astype(dtype), "MeanOut": mo.astype(dtype), "VarianceOut": vo.astype(dtype),
            "SavedMean": sm.astype(dtype), "SavedVariance": sv.astype(dtype)}
    tol = 1e-4 if dtype == "float32" else 1e-9
    op_test(x, scale, bias, mean, var, attrs, outs).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("shape,layout", SHAPES)
@pytest.mark.parametrize("mode", ["is_test", "use_global_stats"])
def test_batch_norm_global_stats_forward(shape, layout, mode):
    x, scale, bias, mean, var = make_inputs(shape, layout, "float32")
    y = bn_test_ref(x.astype("float64"), scale, bias, mean, var, 1e-3, layout)
    attrs = {"epsilon": 1e-3, "data_layout": layout, mode: True}
    outs = {"Y": y.astype("float32"), "MeanOut": mean, "VarianceOut": var, "SavedMean": mean,
            "SavedVariance": (1 / np.sqrt(var.astype("float64") + 1e-3)).astype("float32")}
    op_test(x, scale, bias, mean, var, attrs, outs).check_output(atol=1e-5, rtol=1e-5)


def test_batch_norm_large_mean_is_stable():
    # float32 with a mean 1e4 times the spread: the shifted sums keep the variance accurate.
    x, scale, bias, mean, var = make_inputs((4, 3, 16, 16), "NCHW", "float32", offset=1e4)
    y, mo, vo, sm, sv = bn_train_ref(*(a.astype("float64") for a in (x, scale, bias, mean, var)), 0.9, 1e-5, "NCHW")
    outs = {"Y": y.astype("float32"), "MeanOut": None, "VarianceOut": vo.astype("float32"),
            "SavedMean": None, "SavedVariance": sv.astype("float32")}
    op_test(x, scale, bias, mean, var, {}, outs).check_output(atol=2e-3, rtol=2e-3)


def weighted_grad_check(shape, layout, attrs):
    """d sum(Y * W) / d{X, Scale, Bias} against central differences, with random weights W: with OpTest's
    mean(Y) the training-mode X gradient is identically 0 and a wrong kernel could pass."""
    x, scale, bias, mean, var = make_inputs(shape, layout)
    w = rng.uniform(-1, 1, shape)
    main, startup = fluid.Program(), fluid.Program()
    feed = {"x": x, "scale": scale, "bias": bias, "mean": mean, "var": var, "w": w}
    with fluid.program_guard(main, startup):
        block = main.global_block()
        vs = {n: block.create_var(name=n, shape=a.shape, dtype="float64", stop_gradient=n not in
                                  ("x", "scale", "bias")) for n, a in feed.items()}
        outs = {k: block.create_var(name=k, dtype="float64") for k in ("y", "mo", "vo", "sm", "sv")}
        block.append_op(type="batch_norm", inputs={"X": vs["x"], "Scale": vs["scale"], "Bias": vs["bias"],
                                                   "Mean": vs["mean"], "Variance": vs["var"]},
                        outputs={"Y": outs["y"], "MeanOut": outs["mo"], "VarianceOut": outs["vo"],
                                 "SavedMean": outs["sm"], "SavedVariance": outs["sv"]},
                        attrs=dict(attrs, data_layout=layout))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(outs["y"], vs["w"]))
        grads = fluid.gradients([loss], [vs["x"], vs["scale"], vs["bias"]])
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed=feed, fetch_list=grads)
    for name, g in zip(("x", "scale", "bias"), got):
        want = OpTest._numeric_grad(exe, main, feed, name, loss, 1e-6)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7, err_msg=name)
    return got


@pytest.mark.parametrize("shape,layout", [((2, 3, 3, 2), "NCHW"), ((4, 3), "NCHW"), ((2, 2, 3, 3), "NHWC"),
                                          ((1, 2, 1, 3), "NCHW"), ((3, 2, 2, 1, 2), "NCHW")])
def test_batch_norm_train_grad(shape, layout):
    gx = weighted_grad_check(shape, layout, {})[0]
    assert np.abs(gx).max() > 1e-3  # the check above compared a non-trivial gradient


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["is_test", "use_global_stats"])
def test_batch_norm_global_stats_grad(layout, mode):
    weighted_grad_check((2, 3, 2, 3), layout, {mode: True})


def test_batch_norm_optest_grad():
    # OpTest's mean(Y) loss: X's gradient is 0 in training, Scale's and Bias's are not.
    x, scale, bias, mean, var = make_inputs((2, 3, 2, 2), "NCHW")
    y = bn_train_ref(x, scale, bias, mean, var, 0.9, 1e-5, "NCHW")[0]
    t = op_test(x, scale, bias, mean, var, {},
                {"Y": y, "MeanOut": None, "VarianceOut": None, "SavedMean": None, "SavedVariance": None})
    t.check_grad(["X", "Scale", "Bias"], "Y", max_relative_error=1e-4)


def build_bn_net(layout="NCHW", shape=(3, 4, 4), momentum=0.8):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=list(shape))
        y = fluid.layers.batch_norm(x, momentum=momentum, data_layout=layout)
        loss = fluid.layers.mean(fluid.layers.square(y))
    return main, startup, x, y, loss


def test_batch_norm_layer_parameters():
    main, startup, x, y, loss = build_bn_net()
    params = {p.name: p for p in main.global_block().all_parameters()}
    assert sorted(params) == ["batch_norm_0.b_0", "batch_norm_0.w_0", "batch_norm_0.w_1", "batch_norm_0.w_2"]
    assert params["batch_norm_0.w_0"].trainable and params["batch_norm_0.b_0"].trainable
    for n in ("batch_norm_0.w_1", "batch_norm_0.w_2"):
        assert not params[n].trainable and params[n].persistable and params[n].stop_gradient
        assert params[n].shape == (3,)
    op = [o for o in main.global_block().ops if o.type == "batch_norm"][0]
    assert op.output("MeanOut") == ["batch_norm_0.w_1"] and op.input("Mean") == ["batch_norm_0.w_1"]
    assert op.output("VarianceOut") == ["batch_norm_0.w_2"] and op.input("Variance") == ["batch_norm_0.w_2"]
    assert y.shape == (-1, 3, 4, 4)
    scope = fluid.core.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        for n, v in (("batch_norm_0.w_0", 1), ("batch_norm_0.b_0", 0), ("batch_norm_0.w_1", 0),
                     ("batch_norm_0.w_2", 1)):
            np.testing.assert_array_equal(np.array(scope.find_var(n).get_tensor()), np.full(3, v, "float32"))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_batch_norm_running_stats_over_training_steps(layout):
    shape = (3, 4, 4) if layout == "NCHW" else (4, 4, 3)
    main, startup, x, y, loss = build_bn_net(layout, shape, momentum=0.8)
    test_prog = main.clone(for_test=True)
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    test_op = [o for o in test_prog.global_block().ops if o.type == "batch_norm"][0]
    train_op = [o for o in main.global_block().ops if o.type == "batch_norm"][0]
    assert test_op.attr("is_test") and not train_op.attr("is_test")

    scope = fluid.core.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    run_mean, run_var = np.zeros(3), np.ones(3)
    with fluid.scope_guard(scope):
        exe.run(startup)
        for step in range(5):
            xb = (rng.uniform(-1, 1, (6,) + shape) * (step + 1) + step).astype("float32")
            exe.run(main, feed={"x": xb}, fetch_list=[loss])
            axes = channel_axes(xb, layout)
            run_mean = run_mean * 0.8 + xb.mean(axis=axes) * 0.2
            run_var = run_var * 0.8 + xb.var(axis=axes) * 0.2
        got_mean = np.array(scope.find_var("batch_norm_0.w_1").get_tensor())
        got_var = np.array(scope.find_var("batch_norm_0.w_2").get_tensor())
        np.testing.assert_allclose(got_mean, run_mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_var, run_var, rtol=1e-5, atol=1e-6)
        scale = np.array(scope.find_var("batch_norm_0.w_0").get_tensor())
        bias = np.array(scope.find_var("batch_norm_0.b_0").get_tensor())
        assert not np.allclose(scale, 1)  # SGD moved them, so the test program sees trained values

        xt = rng.uniform(-1, 1, (2,) + shape).astype("float32")
        yt, = exe.run(test_prog, feed={"x": xt}, fetch_list=[y.name])
        np.testing.assert_allclose(yt, bn_test_ref(xt.astype("float64"), scale, bias, got_mean, got_var, 1e-5,
                                                   layout), rtol=1e-4, atol=1e-5)
        # Inference leaves the running statistics alone.
        np.testing.assert_array_equal(np.array(scope.find_var("batch_norm_0.w_1").get_tensor()), got_mean)
        np.testing.assert_array_equal(np.array(scope.find_var("batch_norm_0.w_2").get_tensor()), got_var)
        # The training program normalises with the batch statistics instead.
        yb, = exe.run(main, feed={"x": xt}, fetch_list=[y.name])
        axes = channel_axes(xt, layout)
        np.testing.assert_allclose(yb, bn_test_ref(xt.astype("float64"), scale, bias, xt.mean(axis=axes),
                                                   xt.var(axis=axes), 1e-5, layout), rtol=1e-4, atol=1e-4)


def test_batch_norm_is_test_layer_and_act():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2, 3, 3])
        y = fluid.layers.batch_norm(x, is_test=True, act="relu")
    xv = rng.uniform(-2, 2, (4, 2, 3, 3)).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": xv}, fetch_list=[y])
    np.testing.assert_allclose(got, np.maximum(xv / np.sqrt(1 + 1e-5), 0), rtol=1e-5)


def test_batch_norm_build_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4, 4])
        with pytest.raises(ValueError, match="data_layout"):
            fluid.layers.batch_norm(x, data_layout="NCDHW")
        block = fluid.default_main_program().global_block()
        vs = {n: block.create_var(name=n, shape=s, dtype="float32")
              for n, s in (("s", [3]), ("b", [3]), ("m", [4]), ("v", [3]), ("x1", [5]))}
        outs = {k: block.create_var(name="o_" + k, dtype="float32") for k in ("Y", "MO", "VO")}
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"batch_norm: Mean 'm' \[4\] must be \[C\] = \[3\] for X 'x' \[-1, 3, 4, 4\]"):
            block.append_op(type="batch_norm", inputs={"X": x, "Scale": vs["s"], "Bias": vs["b"], "Mean": vs["m"],
                                                       "Variance": vs["v"]},
                            outputs={"Y": outs["Y"], "MeanOut": vs["m"], "VarianceOut": vs["v"]})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"batch_norm: X 'x1' \[5\] must have rank 2 to 5"):
            block.append_op(type="batch_norm", inputs={"X": vs["x1"], "Scale": vs["s"], "Bias": vs["b"],
                                                       "Mean": vs["v"], "Variance": vs["v"]},
                            outputs={"Y": outs["Y"], "MeanOut": outs["MO"], "VarianceOut": outs["VO"]})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op batch_norm: attribute 'data_layout' = 'NDHWC' is "
                                                           r"invalid: must be one of 'NCHW', 'NHWC', 'AnyLayout'"):
            block.append_op(type="batch_norm", inputs={"X": x, "Scale": vs["s"], "Bias": vs["b"], "Mean": vs["v"],
                                                       "Variance": vs["v"]},
                            outputs={"Y": outs["Y"], "MeanOut": outs["MO"], "VarianceOut": outs["VO"]},
                            attrs={"data_layout": "NDHWC"})


def test_batch_norm_in_place_writes_input():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2, 3, 3])
        h = fluid.layers.scale(x, scale=2.0)
        y = fluid.layers.batch_norm(h, in_place=True)
    assert y.name == h.name
    xv = rng.uniform(-1, 1, (4, 2, 3, 3)).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": xv}, fetch_list=[y])
    want = bn_train_ref(2 * xv.astype("float64"), np.ones(2), np.zeros(2), np.zeros(2), np.ones(2), 0.9, 1e-5,
                        "NCHW")[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_batch_norm_train_grad_large_against_formula():
    # Split across the thread pool (channels for the sums, rows for the affine pass); the closed form
    # dX = scale * inv_std / N * (N * dY - sum(dY) - xhat * sum(dY * xhat)) per channel.
    shape = (8, 16, 24, 24)
    x, scale, bias, mean, var = make_inputs(shape, "NCHW")
    w = rng.uniform(-1, 1, shape)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=list(shape), dtype="float64", append_batch_size=False)
        xv.stop_gradient = False
        wv = fluid.layers.data("w", shape=list(shape), dtype="float64", append_batch_size=False)
        y = fluid.layers.batch_norm(xv)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(y, wv))
        gx, = fluid.gradients([loss], [xv])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": x, "w": w}, fetch_list=[gx])
    axes = (0, 2, 3)
    n = x.size / shape[1]
    mu = x.mean(axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
    xhat = (x - mu) * inv_std
    want = inv_std / n * (n * w - w.sum(axis=axes, keepdims=True) - xhat * (w * xhat).sum(axis=axes, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)  # scale initialised to 1


def test_batch_norm_fold_folds_scale_shift_and_statistics_into_the_weights():
    """batch_norm_fold (made by the fold_batch_norm inference pass): FoldedFilter = Filter * a along the output-channel
    axis, FoldedBias = Bias * a + Shift - Mean * a, a = Scale / sqrt(Variance + eps), against numpy; a conv filter
    with a bias and a mul weight without one in one op."""
    rng = np.random.RandomState(7)
    conv_w, conv_b = rng.randn(4, 3, 2, 2), rng.randn(4)
    mul_w = rng.randn(5, 6)
    stats = [(rng.rand(c) + 0.5, rng.randn(c), rng.randn(c), rng.rand(c) + 0.1) for c in (4, 6)]
    eps = [1e-5, 1e-3]
    want_w, want_b = [], []
    for (scale, shift, mean, var), e, w, axis, bias in zip(stats, eps, (conv_w, mul_w), (0, 1), (conv_b, None)):
        a = scale / np.sqrt(var + e)
        shape = [1] * w.ndim
        shape[axis] = -1
        want_w.append(w * a.reshape(shape))
        want_b.append((bias if bias is not None else 0) * a + shift - mean * a)
    f32 = lambda v: np.asarray(v, "float32")  # noqa: E731
    OpTest("batch_norm_fold",
           {"Filter": [("cw", f32(conv_w)), ("mw", f32(mul_w))], "Bias": [("cb", f32(conv_b))],
            "Scale": [("s%d" % i, f32(s[0])) for i, s in enumerate(stats)],
            "Shift": [("t%d" % i, f32(s[1])) for i, s in enumerate(stats)],
            "Mean": [("m%d" % i, f32(s[2])) for i, s in enumerate(stats)],
            "Variance": [("v%d" % i, f32(s[3])) for i, s in enumerate(stats)]},
           {"FoldedFilter": [("fw0", f32(want_w[0])), ("fw1", f32(want_w[1]))],
            "FoldedBias": [("fb0", f32(want_b[0])), ("fb1", f32(want_b[1]))]},
           {"channel_axis": [0, 1], "bias_index": [0, -1], "epsilon": eps}).check_output(rtol=1e-5, atol=1e-5)
