"""layer_norm, group_norm, instance_norm, affine_channel: forward against numpy, gradients (X, Scale, Bias) against
central differences, the layers' parameters and build-time errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked

rng = np.random.RandomState(11)


# ------------------------------------------------------------------ numpy references

def layer_norm_ref(x, scale, bias, axis, eps):
    left = int(np.prod(x.shape[:axis]))
    x2 = x.reshape(left, -1).astype("float64")
    mean, var = x2.mean(axis=1), x2.var(axis=1)
    y = (x2 - mean[:, None]) / np.sqrt(var[:, None] + eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y.reshape(x.shape), mean, var


def to_nchw(x, layout):
    return x if layout == "NCHW" else np.moveaxis(x, -1, 1)


def from_nchw(x, layout):
    return x if layout == "NCHW" else np.moveaxis(x, 1, -1)


def group_norm_ref(x, scale, bias, groups, eps, layout="NCHW"):
    xc = to_nchw(x, layout).astype("float64")
    n, c = xc.shape[:2]
    g = xc.reshape(n, groups, -1)
    mean, var = g.mean(axis=2), g.var(axis=2)
    y = ((g - mean[..., None]) / np.sqrt(var[..., None] + eps)).reshape(xc.shape)
    bshape = [1, c] + [1] * (xc.ndim - 2)
    if scale is not None:
        y = y * scale.reshape(bshape)
    if bias is not None:
        y = y + bias.reshape(bshape)
    return from_nchw(y, layout), mean, var


def instance_norm_ref(x, scale, bias, eps):
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, -1).astype("float64")
    mean, var = x3.mean(axis=2), x3.var(axis=2)
    y = (x3 - mean[..., None]) / np.sqrt(var[..., None] + eps) * scale[:, None] + bias[:, None]
    return y.reshape(x.shape), mean.reshape(-1), (1 / np.sqrt(var + eps)).reshape(-1)


def affine_ref(x, scale, bias, layout):
    shape = [1] * x.ndim
    shape[-1 if layout == "NHWC" else 1] = -1
    return x * scale.reshape(shape) + bias.reshape(shape)


# ------------------------------------------------------------------ a weighted gradient check

def weighted_grad_check(op_type, inputs, outputs, attrs, out_slot, wrt, rtol=1e-5):
    """d sum(out * W) / d inputs[wrt] against central differences (float64), with random weights W: a mean()
    loss leaves the X gradient of a normalisation (nearly) zero, so a wrong kernel could pass."""
    main, startup = fluid.Program(), fluid.Program()
    feed = {k.lower(): v.astype("float64") for k, v in inputs.items()}
    out_shape = inputs["X"].shape
    feed["w"] = rng.uniform(-1, 1, out_shape)
    with fluid.program_guard(main, startup):
        block = main.global_block()
        vs = {k: block.create_var(name=k.lower(), shape=v.shape, dtype="float64", stop_gradient=k not in wrt)
              for k, v in inputs.items()}
        w = block.create_var(name="w", shape=out_shape, dtype="float64")
        outs = {s: block.create_var(name="out_" + s, dtype="float64") for s in outputs}
        block.append_op(type=op_type, inputs=vs, outputs=outs, attrs=attrs)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(outs[out_slot], w))
        grads = fluid.gradients([loss], [vs[k] for k in wrt])
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed=feed, fetch_list=grads)
    for k, g in zip(wrt, got):
        want = OpTest._numeric_grad(exe, main, feed, k.lower(), loss, 1e-6)
        np.testing.assert_allclose(g, want, rtol=rtol, atol=1e-7, err_msg="%s %s" % (op_type, k))
        assert np.abs(want).max() > 1e-3, k  # a non-trivial gradient was compared
    record_checked("grad", op_type)
    return got


# ------------------------------------------------------------------ layer_norm

LN_CASES = [((4, 6), 1), ((2, 3, 5), 1), ((2, 3, 5), 2), ((2, 2, 3, 4), 3), ((3, 1), 1),
            ((64, 300), 1),  # rows split across the thread pool; n not a multiple of the vector width
            ((2, 4, 37), 2)]


@pytest.mark.parametrize("shape,axis", LN_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_forward(shape, axis, dtype):
    x = rng.uniform(-2, 2, shape).astype(dtype)
    right = int(np.prod(shape[axis:]))
    scale = rng.uniform(0.5, 1.5, right).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, right).astype(dtype)
    y, mean, var = layer_norm_ref(x, scale, bias, axis, 1e-5)
    tol = 1e-5 if dtype == "float32" else 1e-10
    OpTest("layer_norm", {"X": x, "Scale": scale, "Bias": bias},
           {"Y": y.astype(dtype), "Mean": mean.astype(dtype), "Variance": var.astype(dtype)},
           {"begin_norm_axis": axis, "epsilon": 1e-5}).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("with_scale,with_bias", [(False, False), (True, False), (False, True)])
def test_layer_norm_without_scale_or_bias(with_scale, with_bias):
    x = rng.uniform(-2, 2, (3, 8)).astype("float32")
    scale = rng.uniform(0.5, 1.5, 8).astype("float32") if with_scale else None
    bias = rng.uniform(-0.5, 0.5, 8).astype("float32") if with_bias else None
    y, mean, var = layer_norm_ref(x, scale, bias, 1, 1e-3)
    inputs = {"X": x}
    if with_scale:
        inputs["Scale"] = scale
    if with_bias:
        inputs["Bias"] = bias
    OpTest("layer_norm", inputs, {"Y": y.astype("float32"), "Mean": None, "Variance": var.astype("float32")},
           {"epsilon": 1e-3}).check_output(atol=1e-5, rtol=1e-5)


def test_layer_norm_large_mean_is_stable():
    x = (rng.uniform(-1, 1, (4, 64)) + 1e4).astype("float32")
    y, mean, var = layer_norm_ref(x, None, None, 1, 1e-5)
    OpTest("layer_norm", {"X": x}, {"Y": y.astype("float32"), "Variance": var.astype("float32")},
           {}).check_output(atol=3e-3, rtol=3e-3)


@pytest.mark.parametrize("shape,axis", [((3, 5), 1), ((2, 3, 4), 2), ((2, 3, 2), 1)])
def test_layer_norm_grad(shape, axis):
    right = int(np.prod(shape[axis:]))
    inputs = {"X": rng.uniform(-2, 2, shape), "Scale": rng.uniform(0.5, 1.5, right),
              "Bias": rng.uniform(-0.5, 0.5, right)}
    weighted_grad_check("layer_norm", inputs, ["Y", "Mean", "Variance"], {"begin_norm_axis": axis}, "Y",
                        ["X", "Scale", "Bias"])


def test_layer_norm_grad_large_rows_and_optest():
    # rows split into blocks whose Scale / Bias gradients are summed in order; OpTest's mean(Y) loss
    x = rng.uniform(-2, 2, (40, 7))
    scale, bias = rng.uniform(0.5, 1.5, 7), rng.uniform(-0.5, 0.5, 7)
    y = layer_norm_ref(x, scale, bias, 1, 1e-5)[0]
    OpTest("layer_norm", {"X": x, "Scale": scale, "Bias": bias}, {"Y": y, "Mean": None, "Variance": None},
           {}).check_grad(["X", "Scale", "Bias"], "Y", max_relative_error=1e-4)


def test_layer_norm_grad_without_scale():
    weighted_grad_check("layer_norm", {"X": rng.uniform(-2, 2, (3, 6))}, ["Y", "Mean", "Variance"], {}, "Y", ["X"])


def test_layer_norm_layer_parameters_and_training():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[4, 6])
        y = fluid.layers.layer_norm(x, begin_norm_axis=2, act="relu")
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    params = {p.name: p for p in main.global_block().all_parameters()}
    assert sorted(params) == ["layer_norm_0.b_0", "layer_norm_0.w_0"]
    assert list(params["layer_norm_0.w_0"].shape) == [6] and list(params["layer_norm_0.b_0"].shape) == [6]
    op = [o for o in main.global_block().ops if o.type == "layer_norm"][0]
    assert op.attr("begin_norm_axis") == 2 and op.attr("epsilon") == pytest.approx(1e-5)
    assert sorted(op.output_names) == ["Mean", "Variance", "Y"]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("layer_norm_0.w_0").get_tensor()), np.ones(6, "float32"))
    np.testing.assert_array_equal(np.array(scope.find_var("layer_norm_0.b_0").get_tensor()), np.zeros(6, "float32"))
    xv = rng.uniform(-1, 1, (2, 4, 6)).astype("float32")
    out, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    want = np.maximum(layer_norm_ref(xv, None, None, 2, 1e-5)[0], 0)
    np.testing.assert_allclose(out, want, atol=1e-5)
    # one SGD step moved the bias by -lr * d mean(relu(y)) / d b
    b = np.array(scope.find_var("layer_norm_0.b_0").get_tensor())
    np.testing.assert_allclose(b, -0.1 * (want > 0).sum(axis=(0, 1)) / want.size, atol=1e-6)


def test_layer_norm_layer_no_scale_no_shift():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[5])
        fluid.layers.layer_norm(x, scale=False, shift=False, epsilon=1e-3)
    assert main.global_block().all_parameters() == []
    op = [o for o in main.global_block().ops if o.type == "layer_norm"][0]
    assert "Scale" not in op.input_names or op.input("Scale") == []


def test_layer_norm_layer_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[4, 6])
        with pytest.raises(ValueError, match=r"layer_norm: begin_norm_axis must be an int in \[1, 3\) for input x "
                                             r"of shape \[-1, 4, 6\], got 3"):
            fluid.layers.layer_norm(x, begin_norm_axis=3)
        with pytest.raises(TypeError, match="layer_norm: input xi must be float32 or float64, got int64"):
            fluid.layers.layer_norm(fluid.layers.data("xi", shape=[4], dtype="int64"))
        with pytest.raises(ValueError, match="layer_norm: param_attr should not be False"):
            fluid.layers.layer_norm(x, param_attr=False)
        with pytest.raises(Exception, match="epsilon"):
            fluid.layers.layer_norm(x, epsilon=0.5)  # Fluid's checker: epsilon in [0, 0.001]


def test_layer_norm_op_shape_errors():
    x = rng.uniform(-1, 1, (3, 4)).astype("float32")
    with pytest.raises(Exception, match=r"layer_norm: .*Scale.* must be \[4\]"):
        OpTest("layer_norm", {"X": x, "Scale": np.ones(5, "float32")}, {"Y": x}, {}).check_output()
    with pytest.raises(Exception, match=r"layer_norm: begin_norm_axis 2 must be in \[1, 2\)"):
        OpTest("layer_norm", {"X": x}, {"Y": x}, {"begin_norm_axis": 2}).check_output()


# ------------------------------------------------------------------ group_norm

GN_CASES = [((2, 4, 3, 3), 2, "NCHW"), ((2, 6, 5), 3, "NCHW"), ((3, 4), 4, "NCHW"), ((2, 6, 4, 4), 1, "NCHW"),
            ((2, 3, 3, 4), 2, "NHWC"), ((2, 5, 6), 3, "NHWC"), ((4, 32, 16, 16), 8, "NCHW")]


@pytest.mark.parametrize("shape,groups,layout", GN_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_group_norm_forward(shape, groups, layout, dtype):
    c = shape[1] if layout == "NCHW" else shape[-1]
    x = rng.uniform(-2, 2, shape).astype(dtype)
    scale = rng.uniform(0.5, 1.5, c).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, c).astype(dtype)
    y, mean, var = group_norm_ref(x, scale, bias, groups, 1e-5, layout)
    tol = 1e-5 if dtype == "float32" else 1e-10
    OpTest("group_norm", {"X": x, "Scale": scale, "Bias": bias},
           {"Y": y.astype(dtype), "Mean": mean.astype(dtype), "Variance": var.astype(dtype)},
           {"groups": groups, "epsilon": 1e-5, "data_layout": layout}).check_output(atol=tol, rtol=tol)


def test_group_norm_without_params():
    x = rng.uniform(-2, 2, (2, 4, 3)).astype("float32")
    y = group_norm_ref(x, None, None, 2, 1e-5)[0]
    OpTest("group_norm", {"X": x}, {"Y": y.astype("float32"), "Mean": None, "Variance": None},
           {"groups": 2}).check_output()


@pytest.mark.parametrize("shape,groups,layout", [((2, 4, 2, 3), 2, "NCHW"), ((2, 3, 2, 4), 2, "NHWC"),
                                                 ((3, 6), 3, "NCHW")])
def test_group_norm_grad(shape, groups, layout):
    c = shape[1] if layout == "NCHW" else shape[-1]
    inputs = {"X": rng.uniform(-2, 2, shape), "Scale": rng.uniform(0.5, 1.5, c), "Bias": rng.uniform(-0.5, 0.5, c)}
    weighted_grad_check("group_norm", inputs, ["Y", "Mean", "Variance"],
                        {"groups": groups, "data_layout": layout}, "Y", ["X", "Scale", "Bias"])


def test_group_norm_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[6, 2, 2])
        y0 = fluid.layers.group_norm(x, groups=3)  # Fluid 1.8: no scale / bias unless param_attr / bias_attr
        y1 = fluid.layers.group_norm(x, groups=2, param_attr=fluid.ParamAttr(name="gs"),
                                     bias_attr=fluid.ParamAttr(name="gb"))
        with pytest.raises(ValueError, match=r"group_norm: groups 4 must divide the 6 channels of input x "
                                             r"\[-1, 6, 2, 2\] \(data_layout NCHW\)"):
            fluid.layers.group_norm(x, groups=4)
        with pytest.raises(ValueError, match="group_norm: data_layout must be 'NCHW' or 'NHWC', got 'NCWH'"):
            fluid.layers.group_norm(x, groups=2, data_layout="NCWH")
    assert sorted(p.name for p in main.global_block().all_parameters()) == ["gb", "gs"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = rng.uniform(-1, 1, (2, 6, 2, 2)).astype("float32")
    a, b = exe.run(main, feed={"x": xv}, fetch_list=[y0, y1])
    np.testing.assert_allclose(a, group_norm_ref(xv, None, None, 3, 1e-5)[0], atol=1e-5)
    np.testing.assert_allclose(b, group_norm_ref(xv, None, None, 2, 1e-5)[0], atol=1e-5)


def test_group_norm_op_errors():
    x = rng.uniform(-1, 1, (2, 6, 3)).astype("float32")
    with pytest.raises(Exception, match="group_norm: groups 4 must divide the channel count 6"):
        OpTest("group_norm", {"X": x}, {"Y": x}, {"groups": 4}).check_output()
    with pytest.raises(Exception, match=r"group_norm: .*Scale.* must be \[6\]"):
        OpTest("group_norm", {"X": x, "Scale": np.ones(3, "float32")}, {"Y": x}, {"groups": 3}).check_output()


# ------------------------------------------------------------------ instance_norm

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 7), (1, 2, 2, 2, 3), (3, 4, 33, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_instance_norm_forward(shape, dtype):
    x = rng.uniform(-2, 2, shape).astype(dtype)
    scale = rng.uniform(0.5, 1.5, shape[1]).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, shape[1]).astype(dtype)
    y, mean, inv = instance_norm_ref(x, scale, bias, 1e-5)
    tol = 1e-5 if dtype == "float32" else 1e-10
    OpTest("instance_norm", {"X": x, "Scale": scale, "Bias": bias},
           {"Y": y.astype(dtype), "SavedMean": mean.astype(dtype), "SavedVariance": inv.astype(dtype)},
           {"epsilon": 1e-5}).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("shape", [(2, 3, 2, 3), (2, 2, 5)])
def test_instance_norm_grad(shape):
    c = shape[1]
    inputs = {"X": rng.uniform(-2, 2, shape), "Scale": rng.uniform(0.5, 1.5, c), "Bias": rng.uniform(-0.5, 0.5, c)}
    weighted_grad_check("instance_norm", inputs, ["Y", "SavedMean", "SavedVariance"], {}, "Y",
                        ["X", "Scale", "Bias"])


def test_instance_norm_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[3, 4, 4])
        y = fluid.layers.instance_norm(x)
        with pytest.raises(ValueError, match=r"instance_norm: expected 2D or 3D or 4D or 5D input \(got 1D input"):
            fluid.layers.instance_norm(fluid.layers.data("v", shape=[3], append_batch_size=False))
    params = sorted(p.name for p in main.global_block().all_parameters())
    assert params == ["instance_norm_0.b_0", "instance_norm_0.w_0"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = rng.uniform(-1, 1, (2, 3, 4, 4)).astype("float32")
    out, = exe.run(main, feed={"x": xv}, fetch_list=[y])
    np.testing.assert_allclose(out, instance_norm_ref(xv, np.ones(3), np.zeros(3), 1e-5)[0], atol=1e-5)


# ------------------------------------------------------------------ affine_channel

@pytest.mark.parametrize("shape,layout", [((2, 3, 4, 5), "NCHW"), ((2, 3, 4, 5), "NHWC"), ((4, 3), "AnyLayout"),
                                          ((2, 3, 4), "NHWC")])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_affine_channel_forward(shape, layout, dtype):
    c = shape[-1] if layout == "NHWC" else shape[1]
    x = rng.uniform(-2, 2, shape).astype(dtype)
    scale, bias = rng.uniform(0.5, 1.5, c).astype(dtype), rng.uniform(-1, 1, c).astype(dtype)
    OpTest("affine_channel", {"X": x, "Scale": scale, "Bias": bias}, {"Out": affine_ref(x, scale, bias, layout)},
           {"data_layout": layout}).check_output()


@pytest.mark.parametrize("shape,layout", [((2, 3, 2, 2), "NCHW"), ((2, 2, 2, 3), "NHWC")])
def test_affine_channel_grad(shape, layout):
    c = shape[-1] if layout == "NHWC" else shape[1]
    x, scale, bias = rng.uniform(-2, 2, shape), rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c)
    t = OpTest("affine_channel", {"X": x, "Scale": scale, "Bias": bias}, {"Out": affine_ref(x, scale, bias, layout)},
               {"data_layout": layout})
    t.check_grad(["X", "Scale", "Bias"], "Out")


def test_affine_channel_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[3, 2, 2])
        s = fluid.layers.create_parameter([3], "float32", name="s",
                                          default_initializer=fluid.initializer.Constant(2.0))
        b = fluid.layers.create_parameter([3], "float32", name="b",
                                          default_initializer=fluid.initializer.Constant(0.5))
        y = fluid.layers.affine_channel(x, scale=s, bias=b, act="relu")
        with pytest.raises(ValueError, match="affine_channel: bias must be given"):
            fluid.layers.affine_channel(x, scale=s)
        with pytest.raises(Exception, match=r"affine_channel: .*Scale.* must be \[C\] = \[2\]"):
            fluid.layers.affine_channel(x, scale=s, bias=b, data_layout="NHWC")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = rng.uniform(-1, 1, (2, 3, 2, 2)).astype("float32")
    out, = exe.run(main, feed={"x": xv}, fetch_list=[y])
    np.testing.assert_allclose(out, np.maximum(xv * 2 + 0.5, 0), rtol=1e-6)
