"""inplace (BuildStrategy.enable_inplace): an op declared Inplace(out, in) whose input nothing reads afterwards writes
into the input's variable. Training with the pass equals training without it bit for bit; the rewritten op lists;
the cases where it must not fire (the input read later, fetched, persistable, named by a sub-block; a possible
broadcast)."""
import importlib

import numpy as np
import pytest

import fluidlite as fluid

from pass_util import only_passes  # noqa: E402


@pytest.fixture(autouse=True)
def _only_this_pass(monkeypatch):
    """The passes on by default (fusion) would rewrite what these tests count further."""
    only_passes(monkeypatch, "inplace")



def _net(extra=None, seed=2):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[6], dtype="float64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        pre = fluid.layers.fc(x, 8)  # mul + elementwise_add -> fc_0.tmp_1
        h = fluid.layers.relu(pre)
        if extra == "read_later":  # the relu's input is read again after it
            h = fluid.layers.elementwise_add(h, fluid.layers.scale(pre, 0.5))
        h = fluid.layers.tanh(fluid.layers.scale(h, 2.0, bias=0.1))
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=0.3).minimize(loss)
    return main, startup, loss, pre


def _feed(step):
    r = np.random.RandomState(step)
    return {"x": r.standard_normal((5, 6)), "label": r.randint(0, 3, size=(5, 1)).astype("int64")}


def _strategy(on):
    bs = fluid.BuildStrategy()
    bs.enable_inplace = on
    return bs


def _view(main, fetch, on=True, feed=("x", "label")):
    return fluid.Executor(fluid.CPUPlace()).prepared_program(
        fluid.CompiledProgram(main, build_strategy=_strategy(on)), feed=list(feed), fetch_list=fetch)


_INITS = {}


def _train(main, startup, fetch, on, feeds):
    exe = fluid.Executor(fluid.CPUPlace())
    if id(startup) not in _INITS:
        s0 = fluid.Scope()
        with fluid.scope_guard(s0):
            exe.run(startup)
        _INITS[id(startup)] = (startup, {v.name: np.array(s0.find_var(v.name).get_tensor()) for v in main.list_vars()
                                         if v.persistable and s0.find_var(v.name) is not None})
    scope = fluid.Scope()
    prog = fluid.CompiledProgram(main, build_strategy=_strategy(on))
    with fluid.scope_guard(scope):
        exe.run(startup)
        for n, v in _INITS[id(startup)][1].items():
            scope.find_var(n).get_tensor().set(v, fluid.CPUPlace())
        out = [exe.run(prog, feed=f, fetch_list=fetch) for f in feeds]
        params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    return out, params


def _assert_same(a, b):
    for x, y in zip(a[0], b[0]):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    for n in a[1]:
        np.testing.assert_array_equal(a[1][n], b[1][n], err_msg=n)


def _in_place(view, op_type):
    return [op for op in view.global_block().ops if op.type == op_type and op.input("X") == op.output("Out")]


def test_chain_writes_in_place_and_results_equal():
    main, startup, loss, pre = _net()
    fetch = [loss, "fc_0.w_0@GRAD", "fc_1.w_0@GRAD"]
    _assert_same(_train(main, startup, fetch, False, [_feed(s) for s in range(3)]),
                 _train(main, startup, fetch, True, [_feed(s) for s in range(3)]))
    view = _view(main, [loss])
    relu, = _in_place(view, "relu")
    assert relu.input("X") == [pre.name]
    assert len(_in_place(view, "tanh")) == 1
    # the forward scale is not: relu_grad reads its input (relu's output, now pre's variable) later
    fwd_scale = [op for op in view.global_block().ops if op.type == "scale" and op.input("X") == [pre.name]]
    assert len(fwd_scale) == 1 and fwd_scale[0].output("Out") != fwd_scale[0].input("X")
    # relu's output variable is gone; relu_grad reads the shared variable and writes over its Out@GRAD
    names = set(view.global_block().vars)
    assert "relu_0.tmp_0" not in names
    relu_grad, = [op for op in view.global_block().ops if op.type == "relu_grad"]
    assert relu_grad.input("Out") == [pre.name]
    assert relu_grad.output("X@GRAD") == relu_grad.input("Out@GRAD")
    tanh_grad, = [op for op in view.global_block().ops if op.type == "tanh_grad"]
    assert tanh_grad.output("X@GRAD") == tanh_grad.input("Out@GRAD")
    (r,) = [r for r in view.pass_results if r["pass"] == "inplace"]
    assert r["changes"] == 5 and "relu: relu_0.tmp_0 -> %s (in place)" % pre.name in r["details"]
    # without the pass nothing is in place
    assert not _in_place(_view(main, [loss], on=False), "relu")


def test_off_by_default_and_disabled_by_env(monkeypatch):
    main, startup, loss, pre = _net()
    plain = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x", "label"], fetch_list=[loss])
    assert not _in_place(plain, "relu")
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "inplace")
    assert not _in_place(_view(main, [loss]), "relu")


def test_input_read_later_is_not_overwritten():
    main, startup, loss, pre = _net(extra="read_later")
    view = _view(main, [loss])
    assert not _in_place(view, "relu")
    # pre's gradient is a sum of two contributions: it writes over one of them, which nothing reads after it
    (sum_op,) = [op for op in view.global_block().ops if op.type == "sum"]
    assert sum_op.output("Out")[0] in sum_op.input("X")
    plain_sum, = [op for op in _view(main, [loss], on=False).global_block().ops if op.type == "sum"]
    assert plain_sum.output("Out")[0] not in plain_sum.input("X")
    fetch = [loss, "fc_0.w_0@GRAD"]
    _assert_same(_train(main, startup, fetch, False, [_feed(s) for s in range(2)]),
                 _train(main, startup, fetch, True, [_feed(s) for s in range(2)]))


def test_fetched_input_or_output_is_kept():
    main, startup, loss, pre = _net()
    assert not _in_place(_view(main, [loss, pre]), "relu")
    assert not _in_place(_view(main, [loss, "relu_0.tmp_0"]), "relu")
    out_on, _ = _train(main, startup, [loss, pre, "relu_0.tmp_0"], True, [_feed(0)])
    out_off, _ = _train(main, startup, [loss, pre, "relu_0.tmp_0"], False, [_feed(0)])
    for u, v in zip(out_on[0], out_off[0]):
        np.testing.assert_array_equal(u, v)


def test_persistable_input_is_not_overwritten():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        w = fluid.layers.create_global_var([4], 1.5, "float32", persistable=True, name="w")
        y = fluid.layers.relu(w)
        out = fluid.layers.scale(y, 2.0)
    view = _view(main, [out], feed=())
    assert not _in_place(view, "relu") and len(_in_place(view, "scale")) == 0  # out is fetched
    view = _view(main, [], feed=())
    assert not _in_place(view, "relu")


def test_possible_broadcast_is_not_in_place():
    """elementwise_add(X [-1, 4], Y [-1, 4]): X may be broadcast at run time ([1, 4] against [3, 4])."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data(name="a", shape=[-1, 4], dtype="float32", append_batch_size=False)
        b = fluid.layers.data(name="b", shape=[-1, 4], dtype="float32", append_batch_size=False)
        s = fluid.layers.scale(a, 1.0)
        t = fluid.layers.elementwise_add(s, b)
        out = fluid.layers.reduce_sum(t)
    view = _view(main, [out], feed=("a", "b"))
    add, = [op for op in view.global_block().ops if op.type == "elementwise_add"]
    assert add.output("Out") != add.input("X")
    got = fluid.Executor(fluid.CPUPlace()).run(fluid.CompiledProgram(main, build_strategy=_strategy(True)),
                                               feed={"a": np.ones((1, 4), "float32"), "b": np.ones((3, 4), "float32")},
                                               fetch_list=[out])
    assert float(got[0]) == 24.0


def test_static_rnn_step_block_names_are_kept():
    """The seq2seq bench model (StaticRNN step blocks): variables other blocks name are never renamed; results equal."""
    mod = importlib.import_module("fluidlite.bench.models.seq2seq")
    b = mod.build(4, 0)
    feed = b.feed()
    view = _view(b.main, b.fetch_list, feed=list(feed))
    (r,) = [r for r in view.pass_results if r["pass"] == "inplace"]
    assert r["changes"] >= 1
    # the runner reads a memory's gradient by a derived name (ex_states + "@GRAD"): its sum keeps writing that name
    mem_sums = [op for blk in view.blocks[1:] for op in blk.ops
                if op.type == "sum" and op.output("Out")[0].endswith("@mem_0@GRAD")]
    assert len(mem_sums) == 3 and all(op.output("Out")[0] not in op.input("X") for op in mem_sums)
    # other sums in the step grad blocks do go in place
    assert any(op.output("Out")[0] in op.input("X") for blk in view.blocks[1:] for op in blk.ops if op.type == "sum")
    _assert_same(_train(b.main, b.startup, b.fetch_list, False, [feed, feed]),
                 _train(b.main, b.startup, b.fetch_list, True, [feed, feed]))


@pytest.mark.parametrize("model", ["resnet_small", "mobilenet_v2"])
def test_bench_models_equal(model):
    mod = importlib.import_module("fluidlite.bench.models." + model)
    b = mod.build(2, 0)
    feed = b.feed()
    _assert_same(_train(b.main, b.startup, b.fetch_list, False, [feed, feed]),
                 _train(b.main, b.startup, b.fetch_list, True, [feed, feed]))
