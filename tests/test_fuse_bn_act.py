"""fuse_bn_act (BuildStrategy.fuse_bn_act_ops): batch_norm + relu -> fused_batch_norm_act and relu_grad +
batch_norm_grad -> fused_batch_norm_act_grad. The fused op against numpy and central differences; training with the
pass equals training without it bit for bit (losses, gradients, parameters, running statistics); the op lists; the
cases where it must not fire."""
import importlib

import numpy as np
import pytest

import fluidlite as fluid
import op_test
from fluidlite import core

rng = np.random.RandomState(11)


def _bn_relu_ref(x, scale, bias, eps, layout):
    axes = tuple(i for i in range(x.ndim) if i != (1 if layout == "NCHW" else x.ndim - 1))
    shape = [1] * x.ndim
    shape[1 if layout == "NCHW" else -1] = -1
    m, v = x.mean(axis=axes), x.var(axis=axes)
    y = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)
    return np.maximum(y, 0), m, v


def _fused_program(shape, layout, dtype="float64"):
    c = shape[1] if layout == "NCHW" else shape[-1]
    feed = {"x": rng.uniform(-1, 1, shape).astype(dtype) * 2, "scale": rng.uniform(0.5, 1.5, c).astype(dtype),
            "bias": rng.uniform(-0.5, 0.5, c).astype(dtype), "mean": np.zeros(c, dtype), "var": np.ones(c, dtype),
            "w": rng.uniform(-1, 1, shape).astype(dtype)}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        vs = {n: block.create_var(name=n, shape=a.shape, dtype=dtype, stop_gradient=n not in ("x", "scale", "bias"))
              for n, a in feed.items()}
        outs = {k: block.create_var(name=k, dtype=dtype) for k in ("y", "sm", "sv")}
        block.append_op(type="fused_batch_norm_act",
                        inputs={"X": vs["x"], "Scale": vs["scale"], "Bias": vs["bias"], "Mean": vs["mean"],
                                "Variance": vs["var"]},
                        outputs={"Y": outs["y"], "MeanOut": vs["mean"], "VarianceOut": vs["var"],
                                 "SavedMean": outs["sm"], "SavedVariance": outs["sv"]},
                        attrs={"data_layout": layout, "act_type": "relu", "epsilon": 1e-5})
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(outs["y"], vs["w"]))
        grads = fluid.gradients([loss], [vs["x"], vs["scale"], vs["bias"]])
    return main, feed, outs, loss, grads


@pytest.mark.parametrize("shape,layout", [((2, 3, 4, 5), "NCHW"), ((6, 4), "NCHW"), ((2, 4, 3, 3), "NHWC"),
                                          ((8, 16, 24, 24), "NCHW")])
def test_fused_batch_norm_act_against_numpy(shape, layout):
    main, feed, outs, loss, grads = _fused_program(shape, layout)
    y, sm = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[outs["y"], outs["sm"]])
    want, m, _ = _bn_relu_ref(feed["x"], feed["scale"], feed["bias"], float(np.float32(1e-5)), layout)
    np.testing.assert_allclose(y, want, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(sm, m, rtol=1e-9, atol=1e-12)
    assert (y == 0).mean() > 0.2  # relu clipped a good part of it
    op_test.record_checked("output", "fused_batch_norm_act")


@pytest.mark.parametrize("shape,layout", [((2, 3, 3, 2), "NCHW"), ((5, 3), "NCHW"), ((2, 2, 3, 3), "NHWC")])
def test_fused_batch_norm_act_grad_numeric(shape, layout):
    main, feed, outs, loss, grads = _fused_program(shape, layout)
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed=feed, fetch_list=grads)
    for name, g in zip(("x", "scale", "bias"), got):
        want = op_test.OpTest._numeric_grad(exe, main, feed, name, loss, 1e-6)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7, err_msg=name)
    assert np.abs(got[0]).max() > 1e-3
    op_test.record_checked("grad", "fused_batch_norm_act")


def test_act_type_is_checked():
    main, feed, outs, loss, grads = _fused_program((2, 3), "NCHW")
    op = [o for o in main.global_block().ops if o.type == "fused_batch_norm_act"][0]
    with pytest.raises(core.EnforceNotMet, match=r"act_type"):
        op._set_attr("act_type", "tanh")
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[outs["y"]])


def _convnet(seed=5, extra=None, layout="NCHW", is_test=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.conv2d(img, 4, 3, padding=1, bias_attr=False)
        h = fluid.layers.batch_norm(h, act="relu", is_test=is_test)
        h = fluid.layers.conv2d(h, 4, 3, padding=1, bias_attr=False)
        h = fluid.layers.batch_norm(h)
        pre = h
        h = fluid.layers.relu(h)
        if extra == "reuse_out":  # relu's output read twice: its gradient is a sum
            h = fluid.layers.elementwise_add(h, fluid.layers.scale(h, 0.5))
        if extra == "reuse_pre":  # batch_norm's output read by another op than relu
            h = fluid.layers.elementwise_add(h, pre)
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9).minimize(loss)
    return main, startup, loss, pre


def _feed(step):
    r = np.random.RandomState(step)
    return {"img": r.standard_normal((4, 3, 8, 8)).astype("float32"),
            "label": r.randint(0, 3, size=(4, 1)).astype("int64")}


def _strategy(on):
    bs = fluid.BuildStrategy()
    bs.fuse_bn_act_ops = on
    return bs


_INITS = {}


def _train(main, startup, fetch, on, steps=3, feed_fn=_feed):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    if id(startup) not in _INITS:  # one set of initial values for both runs of a comparison
        s0 = fluid.Scope()
        with fluid.scope_guard(s0):
            exe.run(startup)
        _INITS[id(startup)] = (startup, {v.name: np.array(s0.find_var(v.name).get_tensor()) for v in main.list_vars()
                                         if v.persistable and s0.find_var(v.name) is not None})
    prog = fluid.CompiledProgram(main, build_strategy=_strategy(on))
    with fluid.scope_guard(scope):
        exe.run(startup)
        for n, v in _INITS[id(startup)][1].items():
            scope.find_var(n).get_tensor().set(v, fluid.CPUPlace())
        out = [exe.run(prog, feed=feed_fn(s), fetch_list=fetch) for s in range(steps)]
        state = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
                 if v.persistable and scope.find_var(v.name) is not None and v.name not in ("feed", "fetch")}
    return out, state


def _assert_equal_runs(a, b):
    (out_a, st_a), (out_b, st_b) = a, b
    for x, y in zip(out_a, out_b):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    assert sorted(st_a) == sorted(st_b)
    for n in st_a:
        np.testing.assert_array_equal(st_a[n], st_b[n], err_msg=n)


def _ops(main, fetch, on=True, feed=("img", "label")):
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(
        fluid.CompiledProgram(main, build_strategy=_strategy(on)), feed=list(feed), fetch_list=fetch)
    return [op.type for op in view.global_block().ops], view


def test_training_equal_bit_for_bit_and_op_list():
    main, startup, loss, pre = _convnet()
    fetch = [loss, "conv2d_0.w_0@GRAD", "batch_norm_0.w_0@GRAD"]
    _assert_equal_runs(_train(main, startup, fetch, False), _train(main, startup, fetch, True))
    ops, view = _ops(main, [loss])
    assert ops.count("fused_batch_norm_act") == 2 and ops.count("fused_batch_norm_act_grad") == 2
    assert "batch_norm" not in ops and "relu" not in ops and "relu_grad" not in ops
    assert "batch_norm_grad" not in ops
    fused = [op for op in view.global_block().ops if op.type == "fused_batch_norm_act"]
    assert fused[0].attr("fused_ops") == ["batch_norm", "relu"] and fused[0].attr("act_type") == "relu"
    names = {v.name for v in view.global_block().vars.values()}
    assert "batch_norm_0.tmp_2" not in names and "batch_norm_0.tmp_2@GRAD" not in names
    (r,) = [r for r in view.pass_results if r["pass"] == "fuse_bn_act"]
    assert r["changes"] == 2


def test_off_by_default_and_disabled_by_env(monkeypatch):
    main, startup, loss, pre = _convnet()
    plain = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["img", "label"], fetch_list=[loss])
    assert "fused_batch_norm_act" not in [op.type for op in plain.global_block().ops]
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_bn_act")
    assert "fused_batch_norm_act" not in _ops(main, [loss])[0]


def test_fetched_batch_norm_output_is_not_fused():
    main, startup, loss, pre = _convnet()
    ops, _ = _ops(main, [loss, pre])
    assert ops.count("fused_batch_norm_act") == 1 and ops.count("batch_norm") == 1 and ops.count("relu") == 1
    fetch = [loss, pre]
    _assert_equal_runs(_train(main, startup, fetch, False), _train(main, startup, fetch, True))


def test_batch_norm_output_read_elsewhere_is_not_fused():
    main, startup, loss, pre = _convnet(extra="reuse_pre")
    ops, _ = _ops(main, [loss])
    assert ops.count("fused_batch_norm_act") == 1 and ops.count("batch_norm") == 1
    _assert_equal_runs(_train(main, startup, [loss], False), _train(main, startup, [loss], True))


def test_relu_output_read_twice_still_fuses():
    """relu's output is read twice: its gradient is a sum, which relu_grad then reads as before; batch_norm's own
    output and its gradient still have one reader each, so both directions fuse."""
    main, startup, loss, pre = _convnet(extra="reuse_out")
    ops, _ = _ops(main, [loss])
    assert ops.count("fused_batch_norm_act") == 2
    assert ops.count("fused_batch_norm_act_grad") == 2
    fetch = [loss, "conv2d_1.w_0@GRAD"]
    _assert_equal_runs(_train(main, startup, fetch, False), _train(main, startup, fetch, True))


def test_is_test_program_matches():
    main, startup, loss, pre = _convnet(is_test=True)
    _assert_equal_runs(_train(main, startup, [loss], False), _train(main, startup, [loss], True))
    assert _ops(main, [loss])[0].count("fused_batch_norm_act") == 2


@pytest.mark.parametrize("model", ["resnet_small", "vgg_small"])
def test_bench_models_equal(model):
    mod = importlib.import_module("fluidlite.bench.models." + model)
    b = mod.build(2, 0)
    feed = b.feed()
    ops, view = _ops(b.main, b.fetch_list, feed=list(feed))
    assert ops.count("fused_batch_norm_act") == {"resnet_small": 10, "vgg_small": 6}[model]
    _assert_equal_runs(_train(b.main, b.startup, b.fetch_list, False, steps=2, feed_fn=lambda s: feed),
                       _train(b.main, b.startup, b.fetch_list, True, steps=2, feed_fn=lambda s: feed))


def test_profiler_shows_one_row_naming_the_fused_ops():
    main, startup, loss, pre = _convnet()
    exe = fluid.Executor(fluid.CPUPlace())
    prog = fluid.CompiledProgram(main, build_strategy=_strategy(True))
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with fluid.profiler.Profiler("CPU") as prof:
            exe.run(prog, feed=_feed(0), fetch_list=[loss])
    events = [e for e in prof.events() if e["name"] == "fused_batch_norm_act"]
    assert len(events) == 2 and all('"fused_ops":["batch_norm","relu"]' in e["args"] for e in events)
    grads = [e for e in prof.events() if e["name"] == "fused_batch_norm_act_grad"]
    assert len(grads) == 2 and '"fused_ops":["relu_grad","batch_norm_grad"]' in grads[0]["args"]
    assert not [e for e in prof.events() if e["name"] in ("relu", "batch_norm", "relu_grad", "batch_norm_grad")]


def test_two_dim_batch_norm_equal_bit_for_bit():
    """batch_norm over [N, C] (one element per channel and row: the kernels' row-of-channels path)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.batch_norm(fluid.layers.fc(img, 40), act="relu")
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    ops, _ = _ops(main, [loss])
    assert ops.count("fused_batch_norm_act") == 1 and ops.count("fused_batch_norm_act_grad") == 1
    fetch = [loss, "fc_0.w_0@GRAD", "batch_norm_0.w_0@GRAD", "batch_norm_0.b_0@GRAD"]
    _assert_equal_runs(_train(main, startup, fetch, False), _train(main, startup, fetch, True))
