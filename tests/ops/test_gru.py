"""gru (kernels/gru.cc, layers.dynamic_gru): forward against numpy written sequence by sequence and step by step
(tests/gru_reference.py) for every activation pair, both origin modes, is_reverse, with and without H0 and bias, on
ragged batches (one-element sequences, a single sequence, empty sequences, two LoD levels); the Batch* outputs in
their documented order; numeric gradients of every input; the thread-split path; errors at build and run time;
the dynamic_gru layer; and lstm_unit on a LoD batch (kernels/lstm_unit.cc), as Fluid 1.8 runs it."""
import numpy as np
import pytest

import fluidlite as fluid
from gru_reference import ACTIVATIONS, batch_rows, dynamic_gru
from op_test import OpTest, declare, record_checked

rng = np.random.RandomState(7)

RAGGED = [[3, 1, 4], [1], [5], [1, 1, 1], [2, 0, 3], [0, 2], [4, 4, 1, 2]]


def rand(*shape, dtype="float64", scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(dtype)


def case(lens, d, with_h0=True, with_bias=True, dtype="float64"):
    ins = {"Input": rand(sum(lens), 3 * d, dtype=dtype, scale=2.0), "Weight": rand(d, 3 * d, dtype=dtype)}
    if with_h0:
        ins["H0"] = rand(len(lens), d, dtype=dtype)
    if with_bias:
        ins["Bias"] = rand(1, 3 * d, dtype=dtype)
    return ins


def run_reference(ins, lens, act="tanh", gate_act="sigmoid", is_reverse=False, origin_mode=False):
    f64 = {k: v.astype("float64") for k, v in ins.items()}
    return dynamic_gru(f64["Input"], lens, f64["Weight"], f64.get("Bias"), f64.get("H0"), act, gate_act, is_reverse,
                       origin_mode)


def gru_test(ins, lens, lod=None, act="tanh", gate_act="sigmoid", is_reverse=False, origin_mode=False,
             batch_outputs=False, dtype="float64"):
    """An OpTest of gru on `ins` (Input given the LoD `lod`, default [lens]); Hidden compared with the numpy
    reference, and with batch_outputs the Batch* outputs too, in their documented row order and with the step
    offsets as their LoD."""
    hidden, reset_h, gate = run_reference(ins, lens, act, gate_act, is_reverse, origin_mode)
    lod = lod or [lens]
    outs = {"Hidden": (hidden.astype(dtype), lod), "BatchGate": None, "BatchResetHiddenPrev": None,
            "BatchHidden": None}
    if batch_outputs:
        rows = batch_rows(lens, is_reverse)
        steps = [[sum(n > t for n in lens) for t in range(max(lens, default=0))]]  # sequences alive at each step
        outs.update(BatchGate=(gate[rows].astype(dtype), steps),
                    BatchResetHiddenPrev=(reset_h[rows].astype(dtype), steps),
                    BatchHidden=(hidden[rows].astype(dtype), steps))
    feeds = dict(ins, Input=(ins["Input"], lod))
    return OpTest("gru", feeds, outs, {"activation": act, "gate_activation": gate_act, "is_reverse": is_reverse,
                                       "origin_mode": origin_mode})


@pytest.mark.parametrize("lens", RAGGED)
@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("origin_mode", [False, True])
@pytest.mark.parametrize("with_h0,with_bias", [(True, True), (False, False), (True, False), (False, True)])
def test_gru_forward(lens, is_reverse, origin_mode, with_h0, with_bias):
    ins = case(lens, 3, with_h0, with_bias)
    gru_test(ins, lens, is_reverse=is_reverse, origin_mode=origin_mode).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("lens", [[3, 1, 4], [2, 0, 5, 5]])
@pytest.mark.parametrize("is_reverse", [False, True])
def test_gru_forward_float32(lens, is_reverse):
    ins = case(lens, 17, dtype="float32")
    gru_test(ins, lens, is_reverse=is_reverse, dtype="float32").check_output(atol=5e-6, rtol=5e-6)


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("gate_act", sorted(ACTIVATIONS))
def test_gru_activations(act, gate_act):
    lens = [2, 3]
    ins = case(lens, 2)
    gru_test(ins, lens, act=act, gate_act=gate_act).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_gru_batch_outputs_in_length_order(is_reverse, with_h0):
    # Ties (the two 3s) keep their input order; the empty sequence has no rows.
    lens = [3, 1, 0, 4, 3]
    ins = case(lens, 2, with_h0=with_h0)
    gru_test(ins, lens, is_reverse=is_reverse, batch_outputs=True).check_output(atol=1e-12, rtol=1e-12)


def test_gru_two_lod_levels_runs_over_the_last_level():
    lens = [2, 3, 1]
    ins = case(lens, 3)
    gru_test(ins, lens, lod=[[2, 1], lens]).check_output(atol=1e-12, rtol=1e-12)


def test_gru_only_empty_sequences():
    lens = [0, 0]
    ins = case(lens, 2)
    gru_test(ins, lens, batch_outputs=True).check_output()


def test_gru_rows_split_across_threads():
    # 100 sequences alive at the first steps, D = 64: two row blocks of the pool (gru_cell.h RowGrain: 41 rows).
    lens = list(rng.randint(1, 6, size=100))
    ins = case(lens, 64, dtype="float32")
    gru_test(ins, lens, dtype="float32").check_output(atol=5e-6, rtol=5e-6)


def test_gru_gradients_equal_with_one_and_two_threads():
    # The thread split of the backward steps (rows) and of the weight-gradient GEMMs changes no result beyond
    # rounding: the same program, run with 1 thread and with 2.
    lens = list(rng.randint(1, 8, size=90))
    ins = case(lens, 64, dtype="float32")
    main = fluid.Program()
    startup = fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[192], dtype="float32", lod_level=1)
        x.stop_gradient = False
        h0 = fluid.layers.data("h0", shape=[64], dtype="float32")
        h0.stop_gradient = False
        h = fluid.layers.dynamic_gru(x, 64, h_0=h0)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(h, h))
        grads = fluid.gradients([loss], [x, h0, main.global_block().var("gru_0.w_0"),
                                         main.global_block().var("gru_0.b_0")])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"x": fluid.create_lod_tensor(ins["Input"], [lens], fluid.CPUPlace()), "h0": ins["H0"]}
    threads = fluid.core.get_num_threads()
    try:
        fluid.core.set_num_threads(1)
        one = exe.run(main, feed=feed, fetch_list=grads, return_numpy=False)
        fluid.core.set_num_threads(2)
        two = exe.run(main, feed=feed, fetch_list=grads, return_numpy=False)
    finally:
        fluid.core.set_num_threads(threads)
    # float32 sums of ~400 products per weight-gradient element, grouped differently: an element that cancels to
    # 0.06 from terms of ~1 differs by a few ulp of 1 (3.6e-6 seen), so atol is relative to the terms.
    for a, b in zip(one, two):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=2e-5, atol=1e-5)


def test_gru_new_lod_each_run():
    # One prepared program, batches of different shapes and LoD: outputs follow each run's LoD.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[6], dtype="float64", lod_level=1)
        h = fluid.layers.dynamic_gru(x, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("gru_0.w_0").get_tensor())
    for lens in ([3, 1], [1, 4, 2], [2]):
        xv = rand(sum(lens), 6)
        got, = exe.run(main, feed={"x": fluid.create_lod_tensor(xv, [lens], fluid.CPUPlace())}, fetch_list=[h],
                       scope=scope, return_numpy=False)
        assert got.recursive_sequence_lengths() == [lens]
        np.testing.assert_allclose(np.array(got), dynamic_gru(xv, lens, w, np.zeros((1, 6)))[0], rtol=1e-12,
                                   atol=1e-12)
    record_checked("output", "gru")


@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("origin_mode", [False, True])
@pytest.mark.parametrize("with_h0,with_bias", [(True, True), (False, False), (False, True)])
def test_gru_grad(is_reverse, origin_mode, with_h0, with_bias):
    lens = [3, 1, 2]
    ins = case(lens, 2, with_h0, with_bias)
    gru_test(ins, lens, is_reverse=is_reverse, origin_mode=origin_mode).check_grad(sorted(ins), "Hidden")


@pytest.mark.parametrize("act,gate_act", [("relu", "tanh"), ("sigmoid", "identity"), ("identity", "relu"),
                                          ("tanh", "sigmoid")])
def test_gru_grad_activations(act, gate_act):
    lens = [2, 3]
    ins = case(lens, 2)
    gru_test(ins, lens, act=act, gate_act=gate_act).check_grad(sorted(ins), "Hidden")


@pytest.mark.parametrize("lens", [[4], [1, 1, 1], [2, 0, 3], [1, 3, 0]])
def test_gru_grad_ragged(lens):
    ins = case(lens, 2)
    gru_test(ins, lens, is_reverse=True).check_grad(sorted(ins), "Hidden")


@pytest.mark.parametrize("wanted", [["Input", "Weight"], ["Weight"], ["Bias"], ["H0"]])
def test_gru_grad_with_h0_not_trained(wanted):
    # H0 is given but keeps stop_gradient (a fed initial state): the first step's h_prev still contributes to
    # Weight@GRAD and the reset gate's Input@GRAD (Fluid 1.8 drops both when H0@GRAD is not wanted).
    lens = [2, 3, 1]
    ins = case(lens, 3)
    gru_test(ins, lens).check_grad(wanted, "Hidden")


def test_gru_grad_two_lod_levels():
    lens = [2, 1, 2]
    ins = case(lens, 2)
    gru_test(ins, lens, lod=[[1, 2], lens], origin_mode=True).check_grad(sorted(ins), "Hidden")


@pytest.mark.parametrize("op_type, extra", [("gru", {"Input": "x"}), ("gru_unit", {"Input": "x", "Hidden": "h"})])
def test_grad_op_accepts_the_inputs_fluid_passes(op_type, extra):
    # Fluid's gru_grad lists Input, gru_unit_grad Input (and Hidden before 1.8). fluidlite's backward leaves them
    # out (the kernels do not read them); a program written by Fluid, which passes them, binds and gives the same.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[6], dtype="float64", lod_level=1)
        x.stop_gradient = False
        if op_type == "gru":
            h = fluid.layers.dynamic_gru(x, 2)
        else:
            h0 = fluid.layers.data("h0", shape=[2], dtype="float64")
            h0.stop_gradient = False
            h, _, _ = fluid.layers.gru_unit(x, h0, 6)
        grads = fluid.gradients([fluid.layers.mean(h)], [x])
    grad_op, = [op for op in main.global_block().ops if op.type == op_type + "_grad"]
    assert not set(extra) & set(grad_op.input_names)
    feed = {"x": fluid.create_lod_tensor(rand(5, 6), [[2, 3]], fluid.CPUPlace())}
    if op_type == "gru_unit":
        feed["h0"] = rand(5, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    ours = np.array(exe.run(main, feed=feed, fetch_list=grads, scope=scope, return_numpy=False)[0])
    for slot, name in extra.items():
        grad_op.desc.set_input(slot, [h.name if name == "h" else name])
    fluids = np.array(exe.run(main, feed=feed, fetch_list=grads, scope=scope, return_numpy=False)[0])
    np.testing.assert_array_equal(ours, fluids)


def test_gru_input_grad_keeps_lod():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[6], dtype="float32", lod_level=1)
        x.stop_gradient = False
        h = fluid.layers.dynamic_gru(x, 2)
        dx, = fluid.gradients([fluid.layers.mean(h)], [x])
    assert dx.lod_level == 1 and h.lod_level == 1
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": fluid.create_lod_tensor(rand(5, 6, dtype="float32"), [[2, 0, 3]],
                                                            fluid.CPUPlace())}, fetch_list=[dx], return_numpy=False)
    assert got.recursive_sequence_lengths() == [[2, 0, 3]] and np.array(got).shape == (5, 6)


# ------------------------------------------------------------------ errors


def _append(block, x, w, h0=None, b=None, **attrs):
    ins = {"Input": [x], "Weight": [w]}
    if h0 is not None:
        ins["H0"] = [h0]
    if b is not None:
        ins["Bias"] = [b]
    outs = {k: [declare(block, "%s_out" % k, None)] for k in ("BatchGate", "BatchResetHiddenPrev", "BatchHidden",
                                                               "Hidden")}
    return block.append_op(type="gru", inputs=ins, outputs=outs, attrs=attrs)


def test_gru_shapes_at_build_time():
    block = fluid.Program().global_block()
    x = block.create_var(name="x", shape=[-1, 12], dtype="float32", lod_level=1)
    _append(block, x, declare(block, "w", [4, 12]))
    assert block.var("Hidden_out").shape == (-1, 4) and block.var("Hidden_out").lod_level == 1
    assert block.var("BatchGate_out").shape == (-1, 12)
    assert block.var("BatchHidden_out").shape == (-1, 4) and block.var("BatchHidden_out").lod_level == 0


def test_gru_build_time_errors():
    block = fluid.Program().global_block()
    x, w = declare(block, "x", [-1, 12]), declare(block, "w", [4, 12])
    EnforceNotMet = fluid.core.EnforceNotMet
    with pytest.raises(EnforceNotMet, match=r"gru: Weight 'w2' \[4, 9\] must be \[D, 3 \* D\]"):
        _append(block, x, declare(block, "w2", [4, 9]))
    with pytest.raises(EnforceNotMet, match=r"gru: Input 'x2' \[-1, 10\] must have width 3 \* D = 12 for Weight 'w' "
                                            r"\[4, 12\]"):
        _append(block, declare(block, "x2", [-1, 10]), w)
    with pytest.raises(EnforceNotMet, match=r"gru: Input 'x3' \[-1, 2, 12\] must have rank 2"):
        _append(block, declare(block, "x3", [-1, 2, 12]), w)
    with pytest.raises(EnforceNotMet, match=r"gru: H0 'h0' \[-1, 3\] must be \[N, D\] with D = 4 for Weight 'w' "
                                            r"\[4, 12\] \(one row per sequence\)"):
        _append(block, x, w, h0=declare(block, "h0", [-1, 3]))
    with pytest.raises(EnforceNotMet, match=r"gru: Bias 'b' \[12\] must be \[1, 3 \* D\] = \[1, 12\]"):
        _append(block, x, w, b=declare(block, "b", [12]))
    with pytest.raises(EnforceNotMet, match=r"op gru: attribute 'activation' = 'softmax' is invalid"):
        _append(block, x, w, activation="softmax")
    with pytest.raises(EnforceNotMet, match=r"op gru: attribute 'gate_activation' = 'elu' is invalid"):
        _append(block, x, w, gate_activation="elu")


def _run_gru(x_feed, h0=None, d=2):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        x = block.create_var(name="x", shape=[-1, 3 * d], dtype="float64", lod_level=1)
        w = block.create_var(name="w", shape=[d, 3 * d], dtype="float64")
        h0v = block.create_var(name="h0", shape=[-1, d], dtype="float64") if h0 is not None else None
        _append(block, x, w, h0=h0v)
    feed = {"x": x_feed, "w": rand(d, 3 * d)}
    if h0 is not None:
        feed["h0"] = h0
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["Hidden_out"])


def test_gru_run_time_errors():
    EnforceNotMet = fluid.core.EnforceNotMet
    with pytest.raises(EnforceNotMet, match=r"gru: Input 'x' \[5, 6\] must be a LoDTensor with at least 1 LoD "
                                            r"level\(s\), got 0"):
        _run_gru(rand(5, 6))
    with pytest.raises(EnforceNotMet, match=r"gru: H0 'h0' \[3, 2\] must have one row per sequence of Input 'x' "
                                            r"\[5, 6\] LoD \{\{0, 2, 5\}\}: 2 sequences"):
        _run_gru((rand(5, 6), [[2, 3]]), h0=rand(3, 2))
    bad = fluid.LoDTensor()
    bad.set(rand(5, 6), fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, 2, 4\]\]: the last level ends at 4 "
                                         r"but the tensor has 5 rows"):
        bad.set_lod([[0, 2, 4]])


# ------------------------------------------------------------------ the layer


def _layer_program(d=3, in_width=4, **kwargs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[in_width], dtype="float64", lod_level=1)
        proj = fluid.layers.fc(x, size=3 * d, bias_attr=False)
        h = fluid.layers.dynamic_gru(proj, d, **kwargs)
    return main, startup, x, h


@pytest.mark.parametrize("kwargs", [{}, {"is_reverse": True, "origin_mode": True},
                                    {"gate_activation": "tanh", "candidate_activation": "relu"}])
def test_dynamic_gru_layer_matches_numpy(kwargs):
    main, startup, x, h = _layer_program(**kwargs)
    assert h.shape == (-1, 3) and h.lod_level == 1
    params = {p.name: p.shape for p in main.global_block().all_parameters()}
    assert params == {"fc_0.w_0": (4, 9), "gru_0.w_0": (3, 9), "gru_0.b_0": (1, 9)}
    op = [o for o in main.global_block().ops if o.type == "gru"][0]
    assert (op.attr("is_reverse"), op.attr("origin_mode"), op.attr("gate_activation"), op.attr("activation")) == (
        kwargs.get("is_reverse", False), kwargs.get("origin_mode", False), kwargs.get("gate_activation", "sigmoid"),
        kwargs.get("candidate_activation", "tanh"))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    scope.find_var("gru_0.b_0").get_tensor().set(rand(1, 9), fluid.CPUPlace())
    fc_w, w, b = (np.array(scope.find_var(n).get_tensor()) for n in ("fc_0.w_0", "gru_0.w_0", "gru_0.b_0"))
    lens = [2, 4, 1]
    xv = rand(7, 4)
    got, = exe.run(main, feed={"x": (xv, [lens])}, fetch_list=[h], scope=scope, return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    got = np.array(got)
    want = dynamic_gru(xv @ fc_w, lens, w, b, None, kwargs.get("candidate_activation", "tanh"),
                       kwargs.get("gate_activation", "sigmoid"), kwargs.get("is_reverse", False),
                       kwargs.get("origin_mode", False))[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_dynamic_gru_layer_h0_no_bias_trains():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[6], dtype="float32", lod_level=1)
        h0 = fluid.layers.data("h0", shape=[2], dtype="float32")
        h = fluid.layers.dynamic_gru(x, 2, h_0=h0, bias_attr=False, param_attr=fluid.ParamAttr(name="gru_w"))
        last = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(h, h))
        fluid.optimizer.SGD(0.5).minimize(last)
    assert [p.name for p in main.global_block().all_parameters()] == ["gru_w"]
    op = [o for o in main.global_block().ops if o.type == "gru"][0]
    assert op.input("H0") == ["h0"] and op.input("Bias") == []
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": (rand(5, 6, dtype="float32"), [[3, 2]]), "h0": rand(2, 2, dtype="float32")}
    losses = [exe.run(main, feed=feed, fetch_list=[last], scope=scope)[0][0] for _ in range(5)]
    assert losses[-1] < losses[0]


def test_dynamic_gru_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[12], dtype="float32", lod_level=1)
        with pytest.raises(ValueError, match=r"dynamic_gru: input x must have width 3 \* size = 15, got shape "
                                             r"\(-1, 12\)"):
            fluid.layers.dynamic_gru(x, 5)
        with pytest.raises(ValueError, match="dynamic_gru: candidate_activation must be one of sigmoid, tanh, relu, "
                                             "identity, got 'softmax'"):
            fluid.layers.dynamic_gru(x, 4, candidate_activation="softmax")
        with pytest.raises(ValueError, match=r"dynamic_gru: h_0 h must have width size = 4, got shape \(-1, 3\)"):
            fluid.layers.dynamic_gru(x, 4, h_0=fluid.layers.data("h", shape=[3], dtype="float32"))
        with pytest.raises(ValueError, match="dynamic_gru: size must be >= 1, got 0"):
            fluid.layers.dynamic_gru(x, 0)
        with pytest.raises(TypeError, match="dynamic_gru: 'input' must be a Variable, got list"):
            fluid.layers.dynamic_gru([x], 4)
