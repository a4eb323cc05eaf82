"""fuse_optimizer_ops (BuildStrategy.fuse_all_optimizer_ops): the sgd/momentum/adam updates of one group become
one fused_sgd/fused_momentum/fused_adam. Parameters and accumulators after several steps equal those of the
unfused program bit for bit (the fused ops run the single ops' own element loops); the op lists; the cases where
the pass must not fire; save/load and scope access of the parameters after fused steps; FLUIDLITE_DISABLE_PASSES."""
import numpy as np
import pytest

import fluidlite as fluid
import op_test
from fluidlite import core

UPDATES = {"sgd", "momentum", "adam", "fused_sgd", "fused_momentum", "fused_adam"}


def _mlp(make_opt, sizes=(13, 16, 8, 3), seed=3, sparse_vocab=None, dtype="float32", param_lrs=None):
    """A small classifier (optionally with an embedding in front), its startup program and its loss."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[sizes[0]], dtype=dtype)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = x
        if sparse_vocab:
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            emb = fluid.embedding(ids, size=[sparse_vocab, sizes[0]], is_sparse=True)
            h = fluid.layers.elementwise_add(h, fluid.layers.reshape(emb, [-1, sizes[0]]))
        for i, n in enumerate(sizes[1:]):
            lr = (param_lrs or {}).get(i, 1.0)
            h = fluid.layers.fc(h, n, act="relu" if i < len(sizes) - 2 else None,
                                param_attr=fluid.ParamAttr(learning_rate=lr))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(h, label))
        make_opt().minimize(loss)
    return main, startup, loss


def _feed(sizes=(13,), batch=8, sparse_vocab=None, dtype="float32", step=0):
    rng = np.random.RandomState(100 + step)
    feed = {"x": rng.standard_normal((batch, sizes[0])).astype(dtype),
            "label": rng.randint(0, 3, size=(batch, 1)).astype("int64")}
    if sparse_vocab:
        feed["ids"] = rng.randint(0, sparse_vocab, size=(batch, 1)).astype("int64")
    return feed


def _train(main, startup, loss, fuse, steps=4, **feed_kw):
    """Persistable values after `steps` steps and the losses, with fuse_all_optimizer_ops on or off."""
    bs = fluid.BuildStrategy()
    bs.fuse_all_optimizer_ops = fuse
    prog = fluid.CompiledProgram(main, build_strategy=bs)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        losses = [exe.run(prog, feed=_feed(step=s, **feed_kw), fetch_list=[loss])[0] for s in range(steps)]
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
             if v.persistable and scope.find_var(v.name) is not None and v.name not in ("feed", "fetch")}
    return state, losses, scope


def _prepared_ops(main, loss, fuse=True, feed=("x", "label")):
    bs = fluid.BuildStrategy()
    bs.fuse_all_optimizer_ops = fuse
    exe = fluid.Executor(fluid.CPUPlace())
    view = exe.prepared_program(fluid.CompiledProgram(main, build_strategy=bs), feed=list(feed), fetch_list=[loss])
    return [op.type for op in view.global_block().ops], view


def _assert_same_state(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(learning_rate=0.1),
    "momentum": lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9),
    "nesterov": lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.8, use_nesterov=True),
    "adam": lambda: fluid.optimizer.Adam(learning_rate=0.01),
}
FUSED = {"sgd": "fused_sgd", "momentum": "fused_momentum", "nesterov": "fused_momentum", "adam": "fused_adam"}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_updates_equal_unfused_bit_for_bit(kind, dtype):
    main, startup, loss = _mlp(OPTIMIZERS[kind], dtype=dtype)
    off, losses_off, _ = _train(main, startup, loss, False, dtype=dtype)
    on, losses_on, _ = _train(main, startup, loss, True, dtype=dtype)
    _assert_same_state(off, on)
    np.testing.assert_array_equal(np.array(losses_off), np.array(losses_on))
    # the parameters did move, so the comparison compared updates
    init, _, _ = _train(main, startup, loss, False, steps=0, dtype=dtype)
    assert any(not np.array_equal(init[n], on[n]) for n in on if n.endswith(".w_0"))
    ops, view = _prepared_ops(main, loss)
    assert [t for t in ops if t in UPDATES] == [FUSED[kind]]
    fused = [op for op in view.global_block().ops if op.type == FUSED[kind]][0]
    unfused = [op.input("Param")[0] for op in main.global_block().ops if op.type in UPDATES]
    assert fused.input("Param") == unfused and len(unfused) == 6
    assert fused.attr("fused_ops") == [FUSED[kind][len("fused_"):] if kind != "nesterov" else "momentum"] * 6
    if kind == "adam":  # the beta-pow scale ops stay, after the fused update
        assert ops.index("fused_adam") < ops.index("scale")
    if dtype == "float64" and kind in ("sgd", "adam"):
        op_test.record_checked("output", FUSED[kind])
    if dtype == "float64" and kind == "nesterov":
        op_test.record_checked("output", "fused_momentum")


def test_fused_sgd_against_numpy():
    """One fused_sgd over three parameters of different shapes against p - lr * g."""
    rng = np.random.RandomState(0)
    shapes = [(3, 4), (5,), (70000,)]  # the last one large enough to split over the pool
    main = fluid.Program()
    block = main.global_block()
    ps, gs = [], []
    for i, s in enumerate(shapes):
        ps.append(block.create_var(name="p%d" % i, shape=s, dtype="float32", persistable=True))
        gs.append(block.create_var(name="g%d" % i, shape=s, dtype="float32"))
    lr = block.create_var(name="lr", shape=[1], dtype="float32")
    block.append_op(type="fused_sgd", inputs={"Param": ps, "Grad": gs, "LearningRate": lr},
                    outputs={"ParamOut": ps}, attrs={"fused_ops": ["sgd"] * 3})
    feed = {"p%d" % i: rng.standard_normal(s).astype("float32") for i, s in enumerate(shapes)}
    feed.update({"g%d" % i: rng.standard_normal(s).astype("float32") for i, s in enumerate(shapes)})
    feed["lr"] = np.array([0.3], "float32")
    out = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["p0", "p1", "p2"])
    for i in range(3):
        want = feed["p%d" % i] - np.float32(0.3) * feed["g%d" % i]
        np.testing.assert_allclose(out[i], want, rtol=1e-6, atol=1e-7)
    op_test.record_checked("output", "fused_sgd")


def test_fused_op_checks_its_slots():
    main = fluid.Program()
    block = main.global_block()
    p = [block.create_var(name="p%d" % i, shape=[4], dtype="float32", persistable=True) for i in range(2)]
    g = [block.create_var(name="g%d" % i, shape=[4], dtype="float32") for i in range(2)]
    lr = block.create_var(name="lr", shape=[1], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match=r"fused_sgd: Grad lists 1 variables, Param 2; one per parameter"):
        block.append_op(type="fused_sgd", inputs={"Param": p, "Grad": g[:1], "LearningRate": lr},
                        outputs={"ParamOut": p})
    with pytest.raises(core.EnforceNotMet, match=r"fused_sgd: ParamOut\[1\] 'g1' must be Param\[1\] 'p1' itself"):
        block.append_op(type="fused_sgd", inputs={"Param": p, "Grad": g, "LearningRate": lr},
                        outputs={"ParamOut": [p[0], g[1]]})
    with pytest.raises(core.EnforceNotMet, match=r"fused_sgd: parameter 'p0' is listed twice"):
        block.append_op(type="fused_sgd", inputs={"Param": [p[0], p[0]], "Grad": g, "LearningRate": lr},
                        outputs={"ParamOut": [p[0], p[0]]})
    bad = block.create_var(name="g_bad", shape=[5], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match=r"fused_sgd: Grad 'g_bad' \[5\] must have the shape of Param 'p1'"):
        block.append_op(type="fused_sgd", inputs={"Param": p, "Grad": [g[0], bad], "LearningRate": lr},
                        outputs={"ParamOut": p})


def test_pass_log_and_results():
    main, startup, loss = _mlp(OPTIMIZERS["momentum"])
    ops, view = _prepared_ops(main, loss)
    (r,) = [r for r in view.pass_results if r["pass"] == "fuse_optimizer_ops"]
    assert r["changes"] == 1
    assert r["details"] == ["fused_momentum: 6 momentum ops (LearningRate learning_rate_0): fc_0.b_0 fc_0.w_0 "
                            "fc_1.b_0 fc_1.w_0 fc_2.b_0 fc_2.w_0"]
    assert "fuse_optimizer_ops: 1 change" in str(view)


def test_off_by_default_and_disabled_by_env(monkeypatch):
    main, startup, loss = _mlp(OPTIMIZERS["sgd"])
    exe = fluid.Executor(fluid.CPUPlace())
    plain = [op.type for op in exe.prepared_program(main, feed=["x", "label"], fetch_list=[loss]).global_block().ops]
    assert plain.count("sgd") == 6 and "fused_sgd" not in plain
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_optimizer_ops")
    ops, _ = _prepared_ops(main, loss)
    assert ops.count("sgd") == 6 and "fused_sgd" not in ops
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "all")
    ops, _ = _prepared_ops(main, loss)
    assert ops.count("sgd") == 6


def test_different_learning_rates_are_not_fused_together():
    """ParamAttr(learning_rate=...) scales the rate into a LearningRate variable of the parameter's own: that
    update stays an sgd op, the others (the global rate) fuse."""
    main, startup, loss = _mlp(OPTIMIZERS["sgd"], param_lrs={1: 0.5})
    ops, view = _prepared_ops(main, loss)
    updates = {op.type: op for op in view.global_block().ops if op.type in UPDATES}
    assert sorted(t for t in ops if t in UPDATES) == ["fused_sgd", "sgd"]
    assert updates["sgd"].input("Param") == ["fc_1.w_0"]
    assert len(updates["fused_sgd"].input("Param")) == 5
    assert updates["sgd"].input("LearningRate") != updates["fused_sgd"].input("LearningRate")
    off, _, _ = _train(main, startup, loss, False)
    on, _, _ = _train(main, startup, loss, True)
    _assert_same_state(off, on)


def test_different_attrs_are_not_fused_together():
    main, startup, loss = _mlp(OPTIMIZERS["momentum"])
    momentum = [op for op in main.global_block().ops if op.type == "momentum"]
    momentum[0]._set_attr("mu", 0.5)  # fc_0.w_0 alone with mu 0.5: stays a momentum op
    momentum[3]._set_attr("use_nesterov", True)
    ops, view = _prepared_ops(main, loss)
    assert [t for t in ops if t in UPDATES] == ["momentum", "momentum", "fused_momentum"]
    fused = [op for op in view.global_block().ops if op.type == "fused_momentum"][0]
    assert fused.input("Param") == [op.input("Param")[0] for i, op in enumerate(momentum) if i not in (0, 3)]
    off, _, _ = _train(main, startup, loss, False)
    on, _, _ = _train(main, startup, loss, True)
    _assert_same_state(off, on)


def test_sparse_gradient_is_not_fused():
    main, startup, loss = _mlp(OPTIMIZERS["sgd"], sparse_vocab=20)
    ops, view = _prepared_ops(main, loss, feed=("x", "label", "ids"))
    updates = [op for op in view.global_block().ops if op.type in UPDATES]
    assert [op.type for op in updates] == ["sgd", "fused_sgd"]
    assert updates[0].input("Param") == ["embedding_0.w_0"]
    off, _, _ = _train(main, startup, loss, False, sparse_vocab=20)
    on, _, _ = _train(main, startup, loss, True, sparse_vocab=20)
    _assert_same_state(off, on)


def test_regularization_and_clipping_keep_results():
    """Regularization and clipping ops come before every update (Optimizer.apply_gradients): the updates still
    fuse, and the results equal the unfused ones."""
    make = lambda: fluid.optimizer.Momentum(  # noqa: E731
        learning_rate=0.05, momentum=0.9, regularization=fluid.regularizer.L2Decay(0.01),
        grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5))
    main, startup, loss = _mlp(make)
    ops, _ = _prepared_ops(main, loss)
    assert [t for t in ops if t in UPDATES] == ["fused_momentum"]
    off, _, _ = _train(main, startup, loss, False)
    on, _, _ = _train(main, startup, loss, True)
    _assert_same_state(off, on)


def test_op_between_updates_that_reads_a_parameter_splits_the_group():
    """An op between two updates that reads a parameter the earlier update writes: moving that update past it
    would change what it reads, so the group splits around it and the result is unchanged."""
    main, startup, loss = _mlp(OPTIMIZERS["sgd"])
    block = main.global_block()
    sgd_at = [i for i, op in enumerate(block.ops) if op.type == "sgd"]
    with fluid.program_guard(main, startup):
        probe = block.create_var(name="probe", shape=[13, 16], dtype="float32")
    block._insert_op(sgd_at[2] + 1, type="scale", inputs={"X": ["fc_0.w_0"]}, outputs={"Out": [probe]},
                     attrs={"scale": 2.0})
    ops, view = _prepared_ops(main, loss)
    updates = [op for op in view.global_block().ops if op.type in UPDATES or op.type == "scale"]
    assert [op.type for op in updates] == ["fused_sgd", "scale", "fused_sgd"]
    assert updates[0].input("Param") == [block.ops[i].input("Param")[0] for i in sgd_at[:3]]
    assert "fc_0.w_0" in updates[0].input("Param")
    bs = fluid.BuildStrategy()
    bs.fuse_all_optimizer_ops = True
    results = []
    for prog in (main, fluid.CompiledProgram(main, build_strategy=bs)):
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        with fluid.scope_guard(scope):
            exe.run(startup)
            results.append(exe.run(prog, feed=_feed(), fetch_list=["probe", "fc_2.w_0"]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_parameter_updated_twice_is_not_fused():
    main, startup, loss = _mlp(OPTIMIZERS["sgd"])
    block = main.global_block()
    first = [op for op in block.ops if op.type == "sgd"][0]
    block.append_op(type="sgd", inputs={"Param": first.input("Param"), "Grad": first.input("Grad"),
                                        "LearningRate": first.input("LearningRate")},
                    outputs={"ParamOut": first.input("Param")})
    ops, view = _prepared_ops(main, loss)
    updates = [op for op in view.global_block().ops if op.type in UPDATES]
    assert [op.type for op in updates] == ["sgd", "fused_sgd", "sgd"]
    assert first.input("Param")[0] not in updates[1].input("Param") and len(updates[1].input("Param")) == 5
    off, _, _ = _train(main, startup, loss, False)
    on, _, _ = _train(main, startup, loss, True)
    _assert_same_state(off, on)


def test_scope_access_and_save_load_after_fused_steps(tmp_path):
    main, startup, loss = _mlp(OPTIMIZERS["adam"])
    on, _, scope = _train(main, startup, loss, True, steps=3)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        # the user's view of a parameter is the updated tensor itself
        np.testing.assert_array_equal(np.array(scope.find_var("fc_1.w_0").get_tensor()), on["fc_1.w_0"])
        fluid.save(main, str(tmp_path / "m"))
        # a value set from Python is what the next fused step updates
        w = np.full(on["fc_0.w_0"].shape, 0.25, "float32")
        scope.find_var("fc_0.w_0").get_tensor().set(w, fluid.CPUPlace())
        bs = fluid.BuildStrategy()
        bs.fuse_all_optimizer_ops = True
        prog = fluid.CompiledProgram(main, build_strategy=bs)
        exe.run(prog, feed=_feed(step=9), fetch_list=[loss])
        after_set = np.array(scope.find_var("fc_0.w_0").get_tensor())
    assert not np.array_equal(after_set, w) and np.abs(after_set - w).max() < 0.1
    scope2 = fluid.Scope()
    with fluid.scope_guard(scope2):
        exe.run(startup)
        fluid.load(main, str(tmp_path / "m"), exe)
        for name, value in on.items():
            np.testing.assert_array_equal(np.array(scope2.find_var(name).get_tensor()), value, err_msg=name)
    # the same set-then-step without the pass
    scope3 = fluid.Scope()
    with fluid.scope_guard(scope3):
        exe.run(startup)
        fluid.load(main, str(tmp_path / "m"), exe)
        scope3.find_var("fc_0.w_0").get_tensor().set(w, fluid.CPUPlace())
        exe.run(main, feed=_feed(step=9), fetch_list=[loss])
        np.testing.assert_array_equal(np.array(scope3.find_var("fc_0.w_0").get_tensor()), after_set)
