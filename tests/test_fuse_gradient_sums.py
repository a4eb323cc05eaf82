"""fuse_gradient_sums (BuildStrategy.fuse_gradient_sums): a gradient sum over elementwise_add_grad's copy of
Out@GRAD reads Out@GRAD itself and the copy is not written. Gradients, parameters and losses equal those without
the pass bit for bit (the sum adds the same values in the same order), also in a StaticRNN's grad block; the op
lists; the cases where it must not fire."""
import importlib

import numpy as np
import pytest

import fluidlite as fluid

from pass_util import only_passes  # noqa: E402


@pytest.fixture(autouse=True)
def _only_this_pass(monkeypatch):
    """The passes on by default (fusion) would rewrite what these tests count further."""
    only_passes(monkeypatch, "fuse_gradient_sums")



def _residual(seed=1, broadcast_reuse=False):
    """x -> fc -> h; out = h + fc(h) (a residual add: h's gradient is a sum over add_grad's copy of out@GRAD)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[6], dtype="float64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(x, 8, act="tanh")
        r = fluid.layers.elementwise_add(h, fluid.layers.fc(h, 8, act="relu"))
        if broadcast_reuse:  # b is added broadcast over r and used again: its gradient sums a reduced add_grad
            b = fluid.layers.create_parameter([8], "float64", name="b")
            r = fluid.layers.elementwise_add(r, b)
            r = fluid.layers.elementwise_add(r, fluid.layers.reshape(fluid.layers.scale(b, 2.0), [1, 8]))
        logits = fluid.layers.fc(r, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=0.2).minimize(loss)
    return main, startup, loss, h


def _feed(step, batch=5):
    rng = np.random.RandomState(step)
    return {"x": rng.standard_normal((batch, 6)), "label": rng.randint(0, 3, size=(batch, 1)).astype("int64")}


def _strategy(on):
    bs = fluid.BuildStrategy()
    bs.fuse_gradient_sums = on
    return bs


_INITS = {}


def _initial_state(main, startup):
    """The startup program's values, computed once per program: a startup program's random ops draw anew on each
    run, so both runs of a comparison start from these."""
    key = id(startup)
    if key not in _INITS:
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.Executor(fluid.CPUPlace()).run(startup)
        _INITS[key] = (startup, {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
                                 if v.persistable and scope.find_var(v.name) is not None})
    return _INITS[key][1]


def _train(main, startup, fetch, on, feeds):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    prog = fluid.CompiledProgram(main, build_strategy=_strategy(on))
    init = _initial_state(main, startup)
    with fluid.scope_guard(scope):
        exe.run(startup)
        for name, value in init.items():
            scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
        out = [exe.run(prog, feed=f, fetch_list=fetch) for f in feeds]
        params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    return out, params


def _view(main, fetch, on=True, feed=("x", "label")):
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.prepared_program(fluid.CompiledProgram(main, build_strategy=_strategy(on)), feed=list(feed),
                                fetch_list=fetch)


def _sums(view):
    return [op for blk in view.blocks for op in blk.ops if op.type == "sum"]


def test_residual_gradient_sum_reads_out_grad_and_results_equal():
    main, startup, loss, h = _residual()
    fetch = [loss, h.name + "@GRAD", "fc_0.w_0@GRAD"]
    off, p_off = _train(main, startup, fetch, False, [_feed(s) for s in range(4)])
    on, p_on = _train(main, startup, fetch, True, [_feed(s) for s in range(4)])
    for a, b in zip(off, on):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    for n in p_off:
        np.testing.assert_array_equal(p_off[n], p_on[n], err_msg=n)
    view = _view(main, [loss])
    (sum_op,) = _sums(view)
    assert sum_op.output("Out") == [h.name + "@GRAD"]
    out_grad = "elementwise_add_0.tmp_0@GRAD"
    assert out_grad in sum_op.input("X")
    add_grads = [op for op in view.global_block().ops if op.type == "elementwise_add_grad"
                 and op.input("Out@GRAD") == [out_grad]]
    assert [op.output("X@GRAD") for op in add_grads] == [[]]  # the copy for X is gone, Y's stays
    assert add_grads[0].output("Y@GRAD") == ["fc_1.tmp_2@GRAD"]
    (r,) = [r for r in view.pass_results if r["pass"] == "fuse_gradient_sums"]
    assert r["changes"] == 1 and out_grad in r["details"][0]
    # without the pass: the sum reads the copy
    (plain,) = _sums(_view(main, [loss], on=False))
    assert any("@RENAME@" in x for x in plain.input("X"))


def test_off_by_default_and_disabled_by_env(monkeypatch):
    main, startup, loss, h = _residual()
    plain = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x", "label"], fetch_list=[loss])
    assert any("@RENAME@" in x for x in _sums(plain)[0].input("X"))
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "all")
    assert any("@RENAME@" in x for x in _sums(_view(main, [loss]))[0].input("X"))


def test_fetched_copy_is_kept():
    main, startup, loss, h = _residual()
    renamed = [op.output("X@GRAD")[0] for op in main.global_block().ops
               if op.type == "elementwise_add_grad" and op.output("X@GRAD") and "@RENAME@" in op.output("X@GRAD")[0]]
    assert renamed
    view = _view(main, [loss, renamed[0]])
    assert renamed[0] in _sums(view)[0].input("X")
    assert not [r for r in view.pass_results if r["pass"] == "fuse_gradient_sums" and r["changes"]]


def test_broadcast_operand_is_not_forwarded():
    """b [8] is broadcast over r [N, 8]: its add_grad reduces, not copies; that contribution stays."""
    main, startup, loss, h = _residual(broadcast_reuse=True)
    view = _view(main, [loss])
    b_sum = [op for op in _sums(view) if op.output("Out") == ["b@GRAD"]]
    assert len(b_sum) == 1 and all("@RENAME@" in x or x.startswith("b@GRAD") for x in b_sum[0].input("X"))
    producers = {x: op.type for op in view.global_block().ops for x in op.output_arg_names}
    assert sorted(producers[x] for x in b_sum[0].input("X")) == ["elementwise_add_grad", "scale"]
    fetch = [loss, "b@GRAD"]
    off, p_off = _train(main, startup, fetch, False, [_feed(s) for s in range(3)])
    on, p_on = _train(main, startup, fetch, True, [_feed(s) for s in range(3)])
    for a, b in zip(off, on):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_static_rnn_grad_block_equal_bit_for_bit():
    """The seq2seq bench model: sums in its StaticRNN grad blocks are rewritten; every fetched
    loss and every parameter after two steps equal those without the pass."""
    mod = importlib.import_module("fluidlite.bench.models.seq2seq")
    b = mod.build(4, 0)
    feed = b.feed()
    view = _view(b.main, b.fetch_list, feed=list(feed))
    (r,) = [r for r in view.pass_results if r["pass"] == "fuse_gradient_sums"]
    assert r["changes"] >= 2
    plain = _view(b.main, b.fetch_list, on=False, feed=list(feed))
    changed_blocks = {i for i, (blk, before) in enumerate(zip(view.blocks, plain.blocks))
                      if [op.input("X") for op in blk.ops if op.type == "sum"]
                      != [op.input("X") for op in before.ops if op.type == "sum"]}
    assert any(i > 0 for i in changed_blocks)  # the StaticRNN grad blocks' sums
    off, p_off = _train(b.main, b.startup, b.fetch_list, False, [feed, feed])
    on, p_on = _train(b.main, b.startup, b.fetch_list, True, [feed, feed])
    for x, y in zip(off, on):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    for n in p_off:
        np.testing.assert_array_equal(p_off[n], p_on[n], err_msg=n)


@pytest.mark.parametrize("model", ["resnet_small", "transformer_encoder"])
def test_bench_models_fire_and_match(model):
    mod = importlib.import_module("fluidlite.bench.models." + model)
    b = mod.build(2, 0)
    feed = b.feed()
    view = _view(b.main, b.fetch_list, feed=list(feed))
    (r,) = [r for r in view.pass_results if r["pass"] == "fuse_gradient_sums"]
    assert r["changes"] == {"resnet_small": 7, "transformer_encoder": 4}[model]
    off, p_off = _train(b.main, b.startup, b.fetch_list, False, [feed, feed])
    on, p_on = _train(b.main, b.startup, b.fetch_list, True, [feed, feed])
    for x, y in zip(off, on):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    for n in p_off:
        np.testing.assert_array_equal(p_off[n], p_on[n], err_msg=n)
