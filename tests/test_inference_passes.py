"""The inference passes (kernels/passes/fold_batch_norm.cc, fuse_fc.cc, fuse_conv_bias_act.cc) and their fused ops
(batch_norm_fold, fc, conv2d_fusion), and ``python -m fluidlite.bench --mode infer``.

Tolerances: fuse_fc and fuse_conv_bias_act compute the same sums in the same order as the unfused ops and add the
bias and apply the activation with the same formulas, so their results are compared bit for bit. Folding batch
norm rounds differently: conv(X, W * a) + b' against (conv(X, W) - mean) * a + shift, where each output is a sum of
K = C*kh*kw products, so each folded output differs by a few float32 ulps of the terms' magnitudes: rtol 1e-5 with
atol 1e-5 (the outputs here are O(1)) holds with margin, while a wrong fold (a missed channel, a stale mean, the
epsilon dropped) is off by 1e-2 or more.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLD_TOL = {"rtol": 1e-5, "atol": 1e-5}
INFERENCE_PASSES = ["fold_batch_norm", "fuse_fc", "fuse_conv_bias_act"]


def strategy(on):
    bs = fluid.BuildStrategy()
    bs.inference_optimize = on
    bs.fuse_elementwise_chains = False  # other engineers' passes: keep these tests about the inference passes
    bs.fuse_reductions = False
    return bs


def run(exe, program, feed, fetch, scope, on):
    return exe.run(fluid.CompiledProgram(program, build_strategy=strategy(on)), feed=feed, fetch_list=fetch,
                   scope=scope)


def prepared_ops(exe, program, feed, fetch, scope, on=True):
    view = exe.prepared_program(program, feed=list(feed), fetch_list=fetch, scope=scope, build_strategy=strategy(on))
    return [op.type for op in view.global_block().ops if op.type not in ("feed", "fetch")], view


def randomize_bn(program, scope, seed=1):
    rng = np.random.RandomState(seed)
    for op in program.global_block().ops:
        if op.type != "batch_norm":
            continue
        for slot, lo, hi in (("Scale", 0.5, 1.5), ("Bias", -0.5, 0.5), ("Mean", -0.5, 0.5), ("Variance", 0.5, 2.0)):
            t = scope.find_var(op.input(slot)[0]).get_tensor()
            t.set(rng.uniform(lo, hi, size=np.array(t).shape).astype("float32"))


def conv_bn_net(conv_bias=False, act="relu", fc_bn=True, depthwise=False):
    """conv -> batch_norm(act) -> [depthwise conv -> bn -> relu6] -> fc -> [batch_norm] -> fc: (main, startup, out)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
        h = fluid.layers.conv2d(x, 8, 3, padding=1, bias_attr=None if conv_bias else False)
        h = fluid.layers.batch_norm(h, act=act)
        if depthwise:
            h = fluid.layers.conv2d(h, 8, 3, padding=1, groups=8, bias_attr=False, use_cudnn=False)
            h = fluid.layers.relu6(fluid.layers.batch_norm(h))
        h = fluid.layers.fc(h, 16)
        if fc_bn:
            h = fluid.layers.batch_norm(h, act="relu")
        out = fluid.layers.fc(h, 4)
    return main, startup, out


def setup(main, startup, seed=1):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    randomize_bn(main, scope, seed)
    return exe, scope


def feed_x(n=2, seed=0):
    return {"x": np.random.RandomState(seed).standard_normal((n, 3, 8, 8)).astype("float32")}


def test_passes_are_registered_in_order():
    order = {p["name"]: p["order"] for p in core.passes()}
    assert [order[n] for n in INFERENCE_PASSES] == [100, 200, 300]


@pytest.mark.parametrize("conv_bias", [False, True])
@pytest.mark.parametrize("depthwise", [False, True])
def test_fold_and_fuse_match_unfolded(conv_bias, depthwise):
    main, startup, out = conv_bn_net(conv_bias=conv_bias, depthwise=depthwise)
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup)
    feed = feed_x()
    ref, = run(exe, test, feed, [out], scope, on=False)
    got, = run(exe, test, feed, [out], scope, on=True)
    np.testing.assert_allclose(got, ref, **FOLD_TOL)
    ops, view = prepared_ops(exe, test, feed, [out], scope)
    want = ["batch_norm_fold", "conv2d_fusion"] + (["conv2d_fusion"] if depthwise else []) + ["fc", "fc"]
    assert ops == want
    assert "batch_norm" not in ops
    text = str(view)
    assert "fold_batch_norm: %d changes" % (3 if depthwise else 2) in text
    fused = [op for op in view.global_block().ops if op.type == "conv2d_fusion"]
    assert fused[0].attr("fused_ops") == ["conv2d", "elementwise_add", "relu"]
    assert fused[0].attr("activation") == "relu"
    if depthwise:
        assert fused[1].attr("fused_ops") == ["depthwise_conv2d", "elementwise_add", "relu6"]
        assert fused[1].attr("activation") == "relu6"


def test_user_parameters_untouched_and_folded_weights_in_kid_scope():
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup)
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in ("conv2d_0.w_0", "batch_norm_0.w_1")}
    run(exe, test, feed_x(), [out], scope, on=True)
    for n, v in before.items():
        np.testing.assert_array_equal(np.array(scope.find_var(n).get_tensor()), v)
    assert scope.find_var("conv2d_0.w_0@bn_folded") is None  # not in the user's scope: in the prepared kid scope
    _, view = prepared_ops(exe, test, feed_x(), [out], scope)
    assert not view.global_block().var("conv2d_0.w_0@bn_folded").persistable


def _set(scope, name, value):
    scope.find_var(name).get_tensor().set(np.asarray(value, dtype="float32"))


def test_refolds_when_a_parameter_changes_after_prepare():
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup)
    feed = feed_x()
    first, = run(exe, test, feed, [out], scope, on=True)  # prepared and folded
    rng = np.random.RandomState(7)
    for name in ("conv2d_0.w_0", "batch_norm_0.w_1", "batch_norm_0.w_2", "batch_norm_0.b_0", "fc_0.w_0"):
        t = np.array(scope.find_var(name).get_tensor())
        _set(scope, name, rng.uniform(0.5, 1.5, size=t.shape))
        got, = run(exe, test, feed, [out], scope, on=True)
        ref, = run(exe, test, feed, [out], scope, on=False)
        np.testing.assert_allclose(got, ref, **FOLD_TOL, err_msg="after changing " + name)
        assert not np.allclose(got, first, rtol=1e-3), name  # the change matters
        first = got


def test_refolds_after_load_persistables():
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup, seed=1)
    other_exe, other_scope = setup(main, startup, seed=2)  # other weights, saved
    for p in main.global_block().all_parameters():  # different conv and fc weights too
        t = np.array(other_scope.find_var(p.name).get_tensor())
        _set(other_scope, p.name, t * 1.5 + 0.1)
    feed = feed_x()
    with tempfile.TemporaryDirectory() as d:
        with fluid.scope_guard(other_scope):
            fluid.io.save_persistables(other_exe, d, main)
        before, = run(exe, test, feed, [out], scope, on=True)
        with fluid.scope_guard(scope):
            fluid.io.load_persistables(exe, d, main)
    got, = run(exe, test, feed, [out], scope, on=True)
    expected, = run(other_exe, test, feed, [out], other_scope, on=False)
    np.testing.assert_allclose(got, expected, **FOLD_TOL)
    assert not np.allclose(got, before, rtol=1e-3)


def test_training_between_inference_runs_is_seen():
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    with fluid.program_guard(main, startup), fluid.unique_name.guard("opt"):
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    exe, scope = setup(main, startup)
    feed = feed_x()
    previous = None
    for _ in range(3):
        got, = run(exe, test, feed, [out], scope, on=True)
        ref, = run(exe, test, feed, [out], scope, on=False)
        np.testing.assert_allclose(got, ref, **FOLD_TOL)
        if previous is not None:
            assert not np.allclose(got, previous, rtol=1e-4)  # the training step changed the weights
        previous = got
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)  # updates W and the batch norms' statistics


def test_training_program_is_never_changed():
    main, startup, out = conv_bn_net()
    with fluid.program_guard(main, startup), fluid.unique_name.guard("opt"):
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    exe, scope = setup(main, startup)
    ops, view = prepared_ops(exe, main, feed_x(), [loss], scope, on=True)  # forced on
    assert ops == [op.type for op in main.global_block().ops]
    assert all(r["changes"] == 0 for r in view.pass_results)


def test_training_mode_batch_norm_is_not_folded():
    main, startup, out = conv_bn_net()  # not cloned for test: batch_norm uses batch statistics
    exe, scope = setup(main, startup)
    ops, view = prepared_ops(exe, main, feed_x(), [out], scope, on=True)
    assert ops.count("batch_norm") == 2 and "batch_norm_fold" not in ops
    fold = [r for r in view.pass_results if r["pass"] == "fold_batch_norm"]
    assert fold[0]["changes"] == 0
    # fuse_fc and fuse_conv_bias_act still fuse what they can: the last fc (mul + add, no batch norm).
    assert ops[-1] == "fc"


def _conv_program(extra_reader=False, fetch_conv=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
        c = fluid.layers.conv2d(x, 4, 3, padding=1, bias_attr=False)
        y = fluid.layers.batch_norm(c, act="relu")
        outs = [y]
        if extra_reader:
            outs.append(fluid.layers.scale(c, scale=2.0))
        if fetch_conv:
            outs.append(c)
    return main.clone(for_test=True), startup, outs


@pytest.mark.parametrize("case", ["conv output read by another op", "conv output fetched"])
def test_not_folded_when_the_conv_output_is_used_elsewhere(case):
    test, startup, outs = _conv_program(extra_reader=case.endswith("op"), fetch_conv=case.endswith("fetched"))
    exe, scope = setup(test, startup)
    feed = feed_x()
    ops, _ = prepared_ops(exe, test, feed, outs, scope)
    assert "batch_norm" in ops and "batch_norm_fold" not in ops and "conv2d_fusion" not in ops
    got = run(exe, test, feed, outs, scope, on=True)
    ref = run(exe, test, feed, outs, scope, on=False)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def _fc_program(act="relu"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        h = fluid.layers.fc(x, 5, act=act)
        y = fluid.layers.fc(h, 3)
    return main, startup, x, h, y


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", None])
def test_fuse_fc_bit_exact(act):
    main, startup, x, h, y = _fc_program(act)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(0).standard_normal((7, 6)).astype("float32")}
    ops, view = prepared_ops(exe, main, feed, [y], scope)
    assert ops == ["fc", "fc"]
    fc = view.global_block().ops[1]
    assert fc.attr("activation_type") == (act or "")
    assert fc.attr("fused_ops") == ["mul", "elementwise_add"] + ([act] if act else [])
    got, = run(exe, main, feed, [y], scope, on=True)
    ref, = run(exe, main, feed, [y], scope, on=False)
    np.testing.assert_array_equal(got, ref)


def test_fuse_fc_not_when_the_intermediate_is_fetched():
    main, startup, x, h, y = _fc_program("relu")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    pre_act = main.global_block().ops[1].output("Out")[0]  # mul -> add -> [pre_act] -> relu
    feed = {"x": np.ones((2, 6), "float32")}
    ops, _ = prepared_ops(exe, main, feed, [y, pre_act], scope)
    assert ops == ["fc", "relu", "fc"]  # mul + add fused, the fetched pre-activation kept
    got = run(exe, main, feed, [y, pre_act], scope, on=True)
    ref = run(exe, main, feed, [y, pre_act], scope, on=False)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_fuse_conv_bias_act_bit_exact_and_shape_mismatch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
        a = fluid.layers.conv2d(x, 4, 3, padding=1, act="relu")  # conv + bias add + relu
        b = fluid.layers.conv2d(x, 4, 1, bias_attr=False)
        other = fluid.layers.create_parameter([4, 8, 8], "float32", name="not_a_bias")
        c = fluid.layers.elementwise_add(b, other, axis=1)  # Y is [C, H, W], not a per-channel bias
        out = fluid.layers.elementwise_add(a, fluid.layers.relu(c))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = feed_x(3)
    ops, view = prepared_ops(exe, main, feed, [out], scope)
    assert ops == ["conv2d_fusion", "conv2d", "elementwise_add", "relu", "elementwise_add"]
    got, = run(exe, main, feed, [out], scope, on=True)
    ref, = run(exe, main, feed, [out], scope, on=False)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("filter_size,channels", [(3, 16), (1, 16), (3, 4)])  # direct kernel, pointwise, GEMM
def test_conv2d_fusion_sees_new_filter_values(filter_size, channels):
    # conv2d_fusion keeps its filters' packed layouts between runs: a new filter value must be packed again.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
        out = fluid.layers.conv2d(x, channels, filter_size, padding=filter_size // 2, act="relu")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = feed_x(1)
    assert prepared_ops(exe, main, feed, [out], scope)[0] == ["conv2d_fusion"]
    w = main.global_block().ops[0].input("Filter")[0]
    for k in range(3):
        got, = run(exe, main, feed, [out], scope, on=True)
        ref, = run(exe, main, feed, [out], scope, on=False)
        np.testing.assert_array_equal(got, ref)
        _set(scope, w, np.random.RandomState(k).standard_normal(np.array(scope.find_var(w).get_tensor()).shape))


# (channels, filters, image size, kernel, groups, batch, exact): conv2d_fusion's kernel paths. Each equals conv2d +
# elementwise_add + relu bit for bit except the pointwise NCHW GEMM (another summation order: float rounding).
CONV_PATHS = [
    (16, 16, 8, 3, 16, 1, True),   # depthwise, channels last
    (4, 4, 8, 3, 4, 3, True),      # depthwise, few channels: conv2d's plane loops
    (16, 32, 8, 3, 1, 1, True),    # the direct kernel
    (3, 4, 8, 3, 1, 2, True),      # the patch GEMM path
    # pointwise, <= 16 pixels at batch 1: the register-tile kernel (AVX-512 only; elsewhere conv2d_fusion and conv2d
    # take paths that sum in another order)
    (16, 32, 2, 1, 1, 1, "avx512"),
    (16, 32, 4, 1, 1, 4, True),    # pointwise, small images at batch 4: conv2d's stacked patch path
    (16, 32, 8, 1, 1, 1, False),   # pointwise NCHW GEMM (batch 1)
    (16, 32, 8, 1, 1, 4, False),   # pointwise NCHW GEMM (>= 64 pixels)
]


@pytest.mark.parametrize("c,m,hw,k,groups,batch,exact", CONV_PATHS)
def test_conv2d_fusion_paths_match_unfused(c, m, hw, k, groups, batch, exact):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[c, hw, hw], dtype="float32")
        y = fluid.layers.conv2d(x, m, k, padding=k // 2, groups=groups, act="relu", use_cudnn=groups == 1)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(0).standard_normal((batch, c, hw, hw)).astype("float32")}
    assert prepared_ops(exe, main, feed, [y], scope)[0] == ["conv2d_fusion"]
    got, = run(exe, main, feed, [y], scope, on=True)
    ref, = run(exe, main, feed, [y], scope, on=False)
    if exact == "avx512":
        exact = _has_avx512()
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def _has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.parametrize("conv_is_y", [False, True])
def test_residual_add_fuses_into_conv2d_fusion(conv_is_y):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[8, 6, 6], dtype="float32")
        h = fluid.layers.conv2d(x, 8, 3, padding=1)  # conv + bias add
        out = fluid.layers.elementwise_add(x, h, act="relu") if conv_is_y else \
            fluid.layers.elementwise_add(h, x, act="relu")
        bias_row = fluid.layers.create_parameter([6], "float32", name="row")
        g = fluid.layers.conv2d(x, 8, 3, padding=1)
        other = fluid.layers.elementwise_add(g, bias_row)  # broadcast, not a residual of Output's shape
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(0).standard_normal((2, 8, 6, 6)).astype("float32")}
    ops, view = prepared_ops(exe, main, feed, [out, other], scope)
    assert ops == ["conv2d_fusion", "conv2d_fusion", "elementwise_add"]
    fused = view.global_block().ops[1]
    assert fused.attr("fused_ops") == ["conv2d", "elementwise_add", "elementwise_add", "relu"]
    assert fused.input("ResidualData") == ["x"] and fused.attr("activation") == "relu"
    got = run(exe, main, feed, [out, other], scope, on=True)
    ref = run(exe, main, feed, [out, other], scope, on=False)
    for g_, r_ in zip(got, ref):
        np.testing.assert_array_equal(g_, r_)


@pytest.mark.parametrize("model,ops", [
    # 21 convs, each with its batch norm, activation and (9 blocks) shortcut add in one conv2d_fusion
    ("resnet_small", {"batch_norm_fold": 1, "conv2d_fusion": 21, "pool2d": 1, "fc": 1}),
    # 53 convs + bn (+ relu6), the 10 shortcut adds fused into the units' last conv
    ("mobilenet_v2", {"batch_norm_fold": 1, "conv2d_fusion": 53, "pool2d": 1, "fc": 1}),
])
def test_bench_models_inference_programs(model, ops, tmp_path):
    from fluidlite.bench import infer, models
    fl = infer.FluidliteInfer(models.load(model), 0, fluid.CPUPlace(), str(tmp_path / "m"))
    x = np.random.RandomState(0).standard_normal((2,) + models.load(model).IMAGE_SHAPE).astype("float32")
    feed = {fl.feed_names[0]: x}
    types, _ = prepared_ops(fl.exe, fl.program, feed, fl.fetch, fl.scope)
    assert {t: types.count(t) for t in set(types)} == ops
    got, = run(fl.exe, fl.program, feed, fl.fetch, fl.scope, on=True)
    ref, = run(fl.exe, fl.program, feed, fl.fetch, fl.scope, on=False)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)  # tens of folded layers: each rounds differently


def test_load_inference_model_programs_get_the_passes_by_default():
    main, startup, out = conv_bn_net()
    exe, scope = setup(main, startup)
    feed = feed_x()
    with tempfile.TemporaryDirectory() as d:
        with fluid.scope_guard(scope):
            fluid.io.save_inference_model(d, ["x"], [out], exe, main)
            ref, = exe.run(main.clone(for_test=True), feed=feed, fetch_list=[out])
        infer_scope = fluid.Scope()
        with fluid.scope_guard(infer_scope):
            program, feeds, fetches = fluid.io.load_inference_model(d, exe)
            assert program._is_inference
            got, = exe.run(program, feed=feed, fetch_list=fetches)  # a plain run: BuildStrategy()'s defaults
            view = exe.prepared_program(program, feed=feeds, fetch_list=fetches)
    np.testing.assert_allclose(got, ref, **FOLD_TOL)
    ops = [op.type for op in view.global_block().ops]
    assert "batch_norm_fold" in ops and "batch_norm" not in ops
    # A program not from load_inference_model is left as it is by default.
    plain = exe.prepared_program(main.clone(for_test=True), feed=["x"], fetch_list=[out], scope=scope)
    assert "batch_norm" in [op.type for op in plain.global_block().ops]
    # inference_optimize=False turns them off for a loaded program.
    off = exe.prepared_program(program, feed=feeds, fetch_list=fetches, scope=infer_scope,
                               build_strategy=strategy(False))
    assert "batch_norm_fold" not in [op.type for op in off.global_block().ops]


def test_disable_by_env(monkeypatch):
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup)
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fold_batch_norm")
    ops, _ = prepared_ops(exe, test, feed_x(), [out], scope)
    assert "batch_norm" in ops and "batch_norm_fold" not in ops


def test_profiler_names_the_fused_ops():
    main, startup, out = conv_bn_net()
    test = main.clone(for_test=True)
    exe, scope = setup(main, startup)
    feed = feed_x()
    run(exe, test, feed, [out], scope, on=True)
    fluid.profiler.start_profiler("CPU")
    try:
        run(exe, test, feed, [out], scope, on=True)
    finally:
        fluid.profiler.stop_profiler(print_report=False, profile_path=None)
    events = [e for e in fluid.profiler.events() if e["name"] == "conv2d_fusion"]
    assert events and '"fused_ops":["conv2d","elementwise_add","relu"]' in events[0]["args"]
    rows = [r for r in fluid.profiler.summary() if r["event"] == "conv2d_fusion"]
    assert len(rows) == 1 and rows[0]["calls"] == 1  # one row for the fused op; no conv2d / relu rows
    assert not any(r["event"] in ("conv2d", "batch_norm", "relu") for r in fluid.profiler.summary())


def _append(block, type, inputs, outputs, attrs=None):
    return block.append_op(type=type, inputs=inputs, outputs=outputs, attrs=attrs or {})


def test_fc_op_bad_input_names_the_variables():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        w = fluid.layers.create_parameter([5, 3], "float32", name="w")
        block = main.global_block()
        out = block.create_var(name="out", dtype="float32")
        with pytest.raises(core.EnforceNotMet, match=r"fc: .*'x'.* has 6 columns but .*'w'.* has 5 rows"):
            _append(block, "fc", {"Input": [x], "W": [w]}, {"Out": [out]})


def test_conv2d_fusion_bad_bias_names_the_variables():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3, 8, 8], dtype="float32")
        w = fluid.layers.create_parameter([4, 3, 3, 3], "float32", name="w")
        b = fluid.layers.create_parameter([5], "float32", name="b")
        block = main.global_block()
        out = block.create_var(name="out", dtype="float32")
        with pytest.raises(core.EnforceNotMet, match=r"conv2d_fusion: .*'b'.* must hold M = 4 values"):
            _append(block, "conv2d_fusion", {"Input": [x], "Filter": [w], "Bias": [b]}, {"Output": [out]})


def _bench(*args, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "fluidlite.bench"] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_bench_infer_cli_tiny(tmp_path):
    path = tmp_path / "infer.json"
    r = _bench("--mode", "infer", "--model", "lenet", "--batch_size", "2", "--iterations", "1", "--repeat", "1",
               "--warmup", "0", "--threads", "1", "--json", str(path))
    assert r.returncode == 0, r.stderr
    assert "lenet (inference)" in r.stdout
    assert "fuse_conv_bias_act: 2 changes" in r.stdout
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location("make_table", os.path.join(ROOT, "benchmarks", "make_table.py"))
    make_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_table)
    doc = json.loads(path.read_text())
    assert doc["mode"] == "infer" and doc["results"][0]["batches"][0]["batch_size"] == 2
    text = "\n".join(make_table.render_infer(doc))  # docs/benchmarks.md's Inference section
    assert "## Inference" in text and "| `lenet` | 2 | 1 |" in text
    from fluidlite.bench import infer
    reason = infer.availability()
    if reason is not None:
        assert "reference   onnxruntime skipped: " + reason in r.stdout
        assert "ONNX Runtime was skipped" in text
        pytest.skip("the ONNX Runtime part needs onnxruntime, onnx and torch: " + reason)
    assert "logits agree within rtol" in r.stdout
    row = [line for line in r.stdout.splitlines() if line.strip().startswith("2 ")]
    assert row and row[0].rstrip().endswith("x")
    speedup = doc["results"][0]["batches"][0]["speedup"]
    assert speedup > 0 and ("%.2fx" % speedup) in text


def test_bench_infer_agreement_check_fails_loudly():
    from fluidlite.bench import infer, reference
    if infer.availability() is not None:
        pytest.skip("needs onnxruntime, onnx and torch: " + infer.availability())
    env = dict(os.environ)
    env[reference.PERTURB_ENV] = "onnxruntime"  # ONNX Runtime gets weights scaled by 1.05
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-m", "fluidlite.bench", "--mode", "infer", "--model", "lenet",
                        "--batch_size", "1", "--iterations", "1", "--repeat", "1", "--warmup", "0"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "AGREEMENT CHECK FAILED for model lenet" in r.stderr and "ONNX Runtime's logits differ" in r.stderr


def test_bench_infer_cli_errors():
    r = _bench("--mode", "infer", "--model", "mlp")
    assert r.returncode == 2 and "model mlp has no inference mode" in r.stderr
    r = _bench("--mode", "infer", "--compare", "torch")
    assert r.returncode == 2 and "--compare is not supported with --mode infer" in r.stderr


def test_bench_infer_without_onnxruntime_skips_the_reference():
    from test_bench_cli import run_cli
    r = run_cli("--mode", "infer", "--model", "lenet", "--batch_size", "1", "--iterations", "1", "--repeat", "1",
                "--warmup", "0", hide=["onnxruntime"], timeout=600)
    assert r.returncode == 0, r.stderr
    assert 'reference   onnxruntime skipped: onnxruntime not installed (pip install ".[compare]")' in r.stdout
    assert re.search(r"^  1 +[\d.]+ \([\d.]+ - [\d.]+\) +- +-$", r.stdout, re.M), r.stdout


def test_fused_ops_in_float64():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4, 6, 6], dtype="float64")
        h = fluid.layers.conv2d(x, 8, 1, act="relu")  # pointwise: the float kernels' vector paths are not taken
        h = fluid.layers.conv2d(h, 8, 3, padding=1, groups=8, act="relu6", use_cudnn=False)
        out = fluid.layers.fc(h, 3, act="tanh")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(0).standard_normal((1, 4, 6, 6))}
    ops, _ = prepared_ops(exe, main, feed, [out], scope)
    assert ops == ["conv2d_fusion", "conv2d_fusion", "fc"]
    got, = run(exe, main, feed, [out], scope, on=True)
    ref, = run(exe, main, feed, [out], scope, on=False)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
