"""Elementwise fusion: the fused_elementwise op and the fuse_elementwise_chains / fuse_elewise_add_act passes.

The fused op runs the replaced ops' own functors, in their order, so every comparison of pass on vs off here is bit
for bit (np.array_equal), for forward values, gradients and SGD updates, on the primitive-op LSTM (whose ops live
in a StaticRNN step block and its grad block) and on an MLP."""
import json
import os

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, profiler
from fluidlite.bench.models import lstm_primitive

L = fluid.layers
PASS = "fuse_elementwise_chains"


@pytest.fixture(autouse=True)
def _no_disabled_passes(monkeypatch):
    monkeypatch.delenv("FLUIDLITE_DISABLE_PASSES", raising=False)


def op_types(block):
    """The block's op types without the executor's feed and fetch ops."""
    return [op.type for op in block.ops if op.type not in ("feed", "fetch")]


def run(main, startup, feed, fetch, steps=1, disable=None, strategy=None, params=()):
    """Runs `steps` steps in a fresh scope, optionally with FLUIDLITE_DISABLE_PASSES=disable; returns the fetches of
    every step and the final values of `params`."""
    old = os.environ.pop("FLUIDLITE_DISABLE_PASSES", None)
    if disable:
        os.environ["FLUIDLITE_DISABLE_PASSES"] = disable
    try:
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup, scope=scope)
        prog = fluid.CompiledProgram(main, build_strategy=strategy) if strategy else main
        outs = [exe.run(prog, feed=feed, fetch_list=fetch, scope=scope) for _ in range(steps)]
        return outs, {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    finally:
        os.environ.pop("FLUIDLITE_DISABLE_PASSES", None)
        if old is not None:
            os.environ["FLUIDLITE_DISABLE_PASSES"] = old


def assert_bit_equal(a, b):
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert np.array_equal(np.asarray(u), np.asarray(v)), "pass on and off differ"


def chain_program(shape=(6, 10), bias_shape=(10,)):
    """out = relu(scale(sigmoid(x) * y + b, 2, 0.5)) - x, with b broadcast along the rows."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=list(shape), dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=list(shape), dtype="float32", append_batch_size=False)
        b = L.data(name="b", shape=list(bias_shape), dtype="float32", append_batch_size=False)
        t = L.elementwise_add(L.elementwise_mul(L.sigmoid(x), y), b)
        out = L.elementwise_sub(L.relu(L.scale(t, scale=2.0, bias=0.5)), x)
    return main, startup, out, t


def chain_feed(shape=(6, 10), bias_shape=(10,)):
    rng = np.random.RandomState(3)
    return {"x": rng.uniform(-2, 2, shape).astype("float32"), "y": rng.uniform(-2, 2, shape).astype("float32"),
            "b": rng.uniform(-1, 1, bias_shape).astype("float32")}


def test_the_pass_is_registered_with_fluids_flag_too():
    names = {p["name"]: p["order"] for p in core.passes()}
    assert names[PASS] == 700 and names["fuse_elewise_add_act"] == 600


def test_a_chain_becomes_one_op_that_matches_numpy_and_the_unfused_ops_bit_for_bit():
    main, startup, out, _ = chain_program()
    feed = chain_feed()
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[out])
    ops = [op for op in view.global_block().ops if op.type not in ("feed", "fetch")]
    assert [op.type for op in ops] == ["fused_elementwise"]
    assert ops[0].attr("fused_ops") == ["sigmoid", "elementwise_mul", "elementwise_add", "scale", "relu",
                                        "elementwise_sub"]
    assert ops[0].output("Out") == [out.name]  # the intermediates are never written
    assert "fuse_elementwise_chains: 1 change" in str(view)
    (fused,), _ = run(main, startup, feed, [out])
    (plain,), _ = run(main, startup, feed, [out], disable=PASS)
    assert np.array_equal(fused[0], plain[0])
    x, y, b = feed["x"], feed["y"], feed["b"]
    want = np.maximum(2.0 * ((1 / (1 + np.exp(-x))) * y + b) + 0.5, 0) - x
    np.testing.assert_allclose(fused[0], want, rtol=1e-5, atol=1e-6)


def test_large_tensors_are_split_in_tiles_across_threads_with_the_same_bits():
    shape = (300, 1000)  # 300000 elements: many tiles, a partial last one, split across the pool
    main, startup, out, _ = chain_program(shape, (1000,))
    feed = chain_feed(shape, (1000,))
    (fused,), _ = run(main, startup, feed, [out])
    (plain,), _ = run(main, startup, feed, [out], disable=PASS)
    assert np.array_equal(fused[0], plain[0])


def test_a_scalar_and_a_middle_axis_broadcast_are_fused_too():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        s = L.data(name="s", shape=[1], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[3], dtype="float32", append_batch_size=False)
        out = L.tanh(L.elementwise_mul(L.elementwise_add(x, c, axis=1), s))
    rng = np.random.RandomState(0)
    feed = {"x": rng.randn(2, 3, 4).astype("float32"), "s": np.array([0.7], "float32"),
            "c": rng.randn(3).astype("float32")}
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[out])
    assert "fused_elementwise" in op_types(view.global_block())
    (fused,), _ = run(main, startup, feed, [out])
    (plain,), _ = run(main, startup, feed, [out], disable=PASS)
    assert np.array_equal(fused[0], plain[0])
    np.testing.assert_allclose(fused[0], np.tanh((feed["x"] + feed["c"][None, :, None]) * 0.7), rtol=1e-5)


@pytest.mark.parametrize("shape, bias_shape, axis", [((4, 6, 50, 7), (6,), 1), ((5, 3, 70), (3, 70), 1),
                                                   ((9, 333), (1,), -1), ((2, 700), (2, 1), 0)])
def test_broadcast_patterns_across_tile_boundaries_are_bit_identical(shape, bias_shape, axis):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=list(shape), dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=list(bias_shape), dtype="float32", append_batch_size=False)
        out = L.relu(L.elementwise_add(x, c, axis=axis))
    rng = np.random.RandomState(1)
    feed = {"x": rng.randn(*shape).astype("float32"), "c": rng.randn(*bias_shape).astype("float32")}
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[out])
    assert op_types(view.global_block()) == ["fused_elementwise"]
    (on,), _ = run(main, startup, feed, [out])
    (off,), _ = run(main, startup, feed, [out], disable=PASS)
    assert np.array_equal(on[0], off[0])
    a = axis if axis >= 0 else len(shape) - len(bias_shape)
    c_full = feed["c"].reshape((1,) * a + bias_shape + (1,) * (len(shape) - a - len(bias_shape)))
    np.testing.assert_allclose(on[0], np.maximum(feed["x"] + c_full, 0), rtol=1e-6)


def test_an_intermediate_that_is_fetched_stays_an_output():
    main, startup, out, t = chain_program()
    feed = chain_feed()
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[out, t])
    (op,) = [op for op in view.global_block().ops if op.type == "fused_elementwise"]
    assert sorted(op.output("Out")) == sorted([out.name, t.name])
    (fused,), _ = run(main, startup, feed, [out, t])
    (plain,), _ = run(main, startup, feed, [out, t], disable=PASS)
    assert np.array_equal(fused[0], plain[0]) and np.array_equal(fused[1], plain[1])


def test_a_persistable_intermediate_stays_an_output():
    main, startup, out, t = chain_program()
    t.persistable = True
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(chain_feed()), fetch_list=[out])
    (op,) = [op for op in view.global_block().ops if op.type == "fused_elementwise"]
    assert t.name in op.output("Out")


def test_ops_of_different_shapes_are_not_fused_together():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[4, 8], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[8], dtype="float32", append_batch_size=False)
        r = L.relu(y)                      # [8]
        z = L.elementwise_add(x, r)        # [4, 8]: r is produced in another shape class
        out = L.sigmoid(L.reduce_sum(z, dim=[1]))  # a reduction ends the chain
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x", "y"], fetch_list=[out])
    assert op_types(view.global_block()) == ["relu", "elementwise_add", "reduce_sum", "sigmoid"]


def test_an_x_that_broadcasts_into_y_is_not_fused():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[8], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[4, 8], dtype="float32", append_batch_size=False)
        out = L.relu(L.elementwise_add(L.sigmoid(x), y))  # the add's output has Y's shape, not X's
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x", "y"], fetch_list=[out])
    assert op_types(view.global_block()) == ["sigmoid", "elementwise_add", "relu"]


def test_disable_passes_turns_it_off():
    main, startup, out, _ = chain_program()
    os.environ["FLUIDLITE_DISABLE_PASSES"] = PASS
    try:
        view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(chain_feed()), fetch_list=[out])
    finally:
        del os.environ["FLUIDLITE_DISABLE_PASSES"]
    assert "fused_elementwise" not in op_types(view.global_block())
    assert op_types(view.global_block()).count("sigmoid") == 1


def test_build_strategy_flag_turns_it_off():
    main, startup, out, _ = chain_program()
    bs = fluid.BuildStrategy()
    bs.fuse_elementwise_chains = False
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(chain_feed()), fetch_list=[out],
                                                             build_strategy=bs)
    assert "fused_elementwise" not in op_types(view.global_block())


def prepared_lstm(batch=4):
    built = lstm_primitive.build(batch, seed=1)
    exe = fluid.Executor(fluid.CPUPlace())
    return built, exe.prepared_program(built.main, feed=list(built.feed()), fetch_list=built.fetch_list)


def test_lstm_step_block_and_grad_block_each_become_few_fused_ops():
    built, view = prepared_lstm()
    step, grad = view.blocks[1], view.blocks[2]
    # fc on [x_t, h]: its sum and bias add are one op; the split is read in place by the cell's op.
    assert op_types(step) == ["mul", "mul", "fused_elementwise", "fused_elementwise", "rnn_memory_helper",
                              "rnn_memory_helper", "rnn_memory_helper"]
    fc, cell = [op for op in step.ops if op.type == "fused_elementwise"]
    assert fc.attr("fused_ops") == ["sum", "elementwise_add"]
    assert cell.attr("fused_ops") == ["split", "sigmoid", "sigmoid", "sigmoid", "tanh", "elementwise_mul",
                                      "elementwise_mul", "elementwise_add", "tanh", "elementwise_mul"]
    assert cell.attr("column_offsets") == [0, 128, 256, 384, -1]
    assert cell.input("X")[:4] == [fc.output("Out")[1]] * 4
    # The backward's cell: the gradient sums, elementwise_*_grad and activation grads in one op; the sum's two
    # gradient copies (scale) and elementwise_add_grad's copy of dOut are gone; the bias gradient (a reduction over
    # the batch) stays in elementwise_add_grad.
    assert op_types(grad) == ["rnn_memory_helper_grad"] * 3 + ["fused_elementwise", "concat", "elementwise_add_grad",
                                                              "mul_grad", "mul_grad"]
    (cell_grad,) = [op for op in grad.ops if op.type == "fused_elementwise"]
    assert cell_grad.attr("fused_ops") == ["sum", "elementwise_mul_grad", "tanh_grad", "sum", "elementwise_add_grad",
                                           "elementwise_mul_grad", "elementwise_mul_grad", "tanh_grad", "sigmoid_grad",
                                           "sigmoid_grad", "sigmoid_grad"]
    (add_grad,) = [op for op in grad.ops if op.type == "elementwise_add_grad"]
    assert add_grad.output("X@GRAD") == [] and add_grad.output("Y@GRAD") == ["fc_0.b_0@GRAD"]
    concat_out = [op for op in grad.ops if op.type == "concat"][0].output("Out")
    assert [op.input("Out@GRAD") for op in grad.ops if op.type == "mul_grad"] == [concat_out, concat_out]


def test_lstm_training_is_bit_identical_with_the_pass_on_and_off():
    built = lstm_primitive.build(8, seed=2)
    feed = built.feed()
    params = ["fc_0.w_0", "fc_0.w_1", "fc_0.b_0"]
    on, p_on = run(built.main, built.startup, feed, built.fetch_list, steps=3, params=params)
    off, p_off = run(built.main, built.startup, feed, built.fetch_list, steps=3, disable=PASS, params=params)
    _, p_init = run(built.main, built.startup, feed, [], steps=0, params=params)
    assert_bit_equal(on, off)
    for p in params:
        assert np.array_equal(p_on[p], p_off[p]), p
        assert not np.array_equal(p_on[p], p_init[p]), p  # SGD did update it


def test_a_split_part_read_outside_the_group_is_not_folded():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 8], dtype="float32", append_batch_size=False)
        m = L.data(name="m", shape=[-1, 4], dtype="float32", append_batch_size=False)
        a, b = L.split(x, 2, dim=1)
        out = L.elementwise_add(L.elementwise_mul(L.sigmoid(a), L.tanh(b)), m)
    rng = np.random.RandomState(0)
    feed = {"x": rng.randn(3, 8).astype("float32"), "m": rng.randn(3, 4).astype("float32")}
    exe = fluid.Executor(fluid.CPUPlace())
    folded = exe.prepared_program(main, feed=list(feed), fetch_list=[out])
    assert op_types(folded.global_block()) == ["fused_elementwise"]
    kept = exe.prepared_program(main, feed=list(feed), fetch_list=[out, b])  # part b is fetched
    assert op_types(kept.global_block()) == ["split", "fused_elementwise"]
    for fetch in ([out], [out, b]):
        (on,), _ = run(main, startup, feed, fetch)
        (off,), _ = run(main, startup, feed, fetch, disable=PASS)
        assert all(np.array_equal(u, v) for u, v in zip(on, off))
    np.testing.assert_allclose(on[0], 1 / (1 + np.exp(-feed["x"][:, :4])) * np.tanh(feed["x"][:, 4:]) + feed["m"],
                               rtol=1e-5, atol=1e-6)


def lstm_short_program(seq, batch):
    """The lstm_primitive network with its backward and no optimizer (the gradients stay in the scope)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[seq, batch, lstm_primitive.HIDDEN], dtype="float32", append_batch_size=False)
        loss = lstm_primitive.network(x)
        fluid.backward.append_backward(loss)
    return main, startup, loss


def test_lstm_gradients_are_bit_identical_and_match_a_numeric_gradient():
    seq, batch = 3, 2
    main, startup, loss = lstm_short_program(seq, batch)
    rng = np.random.RandomState(0)
    feed = {"x": rng.uniform(-1, 1, (seq, batch, lstm_primitive.HIDDEN)).astype("float32")}
    grads = ["fc_0.w_0@GRAD", "fc_0.w_1@GRAD", "fc_0.b_0@GRAD"]
    on, _ = run(main, startup, feed, [loss] + grads)
    off, _ = run(main, startup, feed, [loss] + grads, disable=PASS)
    assert_bit_equal(on, off)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    bias = scope.find_var("fc_0.b_0").get_tensor()
    b0 = np.array(bias).copy()
    picks, eps, numeric = [0, 130, 300, 450], 1e-2, []  # one element of each gate's bias
    for k in picks:
        vals = []
        for sign in (1, -1):
            b = b0.copy()
            b[k] += sign * eps
            bias.set(b, fluid.CPUPlace())
            vals.append(float(np.asarray(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]).reshape(-1)[0]))
        numeric.append((vals[0] - vals[1]) / (2 * eps))
    np.testing.assert_allclose(np.asarray(on[0][3])[picks], numeric, rtol=2e-2, atol=2e-6)


def mlp_program():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[16], dtype="float32")
        label = L.data(name="label", shape=[1], dtype="int64")
        h = L.fc(input=x, size=32, act="relu")
        h = L.elementwise_mul(L.sigmoid(h), L.tanh(h))  # a gated unit: a chain with its backward
        logits = L.fc(input=h, size=4)
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    rng = np.random.RandomState(1)
    feed = {"x": rng.randn(8, 16).astype("float32"), "label": rng.randint(0, 4, (8, 1)).astype("int64")}
    return main, startup, loss, feed


def test_mlp_training_is_bit_identical_and_its_backward_is_fused():
    main, startup, loss, feed = mlp_program()
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[loss])
    fused = [op.attr("fused_ops") for op in view.global_block().ops if op.type == "fused_elementwise"]
    assert ["elementwise_add", "relu", "sigmoid", "tanh", "elementwise_mul"] in fused
    assert any("sigmoid_grad" in f and "elementwise_mul_grad" in f and "relu_grad" in f for f in fused)
    params = ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0"]
    on, p_on = run(main, startup, feed, [loss], steps=3, params=params)
    off, p_off = run(main, startup, feed, [loss], steps=3, disable=PASS, params=params)
    assert_bit_equal(on, off)
    for p in params:
        assert np.array_equal(p_on[p], p_off[p]), p


def test_fuse_elewise_add_act_fuses_pairs_only():
    main, startup, loss, feed = mlp_program()
    bs = fluid.BuildStrategy()
    bs.fuse_elementwise_chains = False
    bs.fuse_elewise_add_act_ops = True
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=[loss],
                                                             build_strategy=bs)
    fused = [op.attr("fused_ops") for op in view.global_block().ops if op.type == "fused_elementwise"]
    assert fused == [["elementwise_add", "relu"]]
    assert "sigmoid" in op_types(view.global_block())
    on, _ = run(main, startup, feed, [loss], steps=2, strategy=bs)
    off, _ = run(main, startup, feed, [loss], steps=2, disable="fuse_elewise_add_act", strategy=bs)
    assert_bit_equal(on, off)


def test_the_profiler_shows_one_row_naming_the_fused_ops():
    main, startup, out, _ = chain_program()
    feed = chain_feed()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed=feed, fetch_list=[out])
    rows = {r["event"]: r for r in profiler.summary()}
    assert "fused_elementwise" in rows and "sigmoid" not in rows and "elementwise_mul" not in rows
    (ev,) = [e for e in profiler.events() if e["name"] == "fused_elementwise"]
    args = json.loads("{" + ev["args"] + "}")
    assert args["fused_ops"] == ["sigmoid", "elementwise_mul", "elementwise_add", "scale", "relu", "elementwise_sub"]


def test_run_time_shape_mismatch_names_the_op_and_the_variables():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 4], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[-1, 4], dtype="float32", append_batch_size=False)
        out = L.relu(L.elementwise_add(x, y))
    exe = fluid.Executor(fluid.CPUPlace())
    assert "fused_elementwise" in op_types(exe.prepared_program(main, feed=["x", "y"], fetch_list=[out])
                                           .global_block())
    with pytest.raises(Exception, match=r"fused_elementwise: X\[1\] 'y' has dims \[3, 4\] but X\[0\] 'x' has "
                                        r"\[2, 4\]"):
        exe.run(main, feed={"x": np.ones((2, 4), "float32"), "y": np.ones((3, 4), "float32")}, fetch_list=[out])


def test_programs_prepared_with_the_nan_check_on_are_not_fused():
    main, startup, out, _ = chain_program()
    exe = fluid.Executor(fluid.CPUPlace())
    fluid.set_flags({"FLAGS_check_nan_inf": True})
    try:
        view = exe.prepared_program(main, feed=list(chain_feed()), fetch_list=[out])
    finally:
        fluid.set_flags({"FLAGS_check_nan_inf": False})
    assert "fused_elementwise" not in op_types(view.global_block())
    assert "skipped: FLAGS_check_nan_inf is on" in str(view)
