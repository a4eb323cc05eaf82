"""lstm and lstmp (dynamic_lstm, dynamic_lstmp): forward against a numpy LSTM written per sequence and per step,
numeric gradients of every input in float64, the layers, and the errors."""
import itertools

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare

rng = np.random.RandomState(15)
ACT_NAMES = ["sigmoid", "tanh", "relu", "identity"]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTS = {"sigmoid": sigmoid, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0), "identity": lambda x: x}


def rand(*shape, scale=1.0):
    return rng.uniform(-scale, scale, shape)


def lstm_ref(x, lens, w, b, h0=None, c0=None, use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
             cell_activation="tanh", candidate_activation="tanh", proj_w=None, proj_activation="tanh", cell_clip=0.0,
             proj_clip=0.0):
    """(out, cell): out is the hidden state (lstm) or the projection (lstmp, when proj_w is given), row by row in
    the input's order. A plain loop over the sequences and, inside each, over its steps."""
    d = x.shape[1] // 4
    act_g, act_h, act_c = ACTS[gate_activation], ACTS[cell_activation], ACTS[candidate_activation]
    # Fluid 1.8's lstmp applies cell_activation to the projection unless proj_activation is identity.
    act_p = ACTS["identity"] if proj_activation == "identity" else act_h
    rec = proj_w.shape[1] if proj_w is not None else d
    cell_clip, proj_clip = float(np.float32(cell_clip)), float(np.float32(proj_clip))  # float attributes
    out, cell = np.zeros((x.shape[0], rec)), np.zeros((x.shape[0], d))
    w_ic, w_fc, w_oc = (b[0, 4 * d:5 * d], b[0, 5 * d:6 * d], b[0, 6 * d:]) if use_peepholes else (0, 0, 0)
    start = 0
    for s, n in enumerate(lens):
        rows = list(range(start, start + n))
        if is_reverse:
            rows.reverse()
        r = h0[s] if h0 is not None else np.zeros(rec)
        c = c0[s] if c0 is not None else np.zeros(d)
        for row in rows:
            pre_c, pre_i, pre_f, pre_o = np.split(x[row] + r @ w + b[0, :4 * d], 4)
            i = act_g(pre_i + c * w_ic)
            f = act_g(pre_f + c * w_fc)
            c = f * c + i * act_c(pre_c)
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            o = act_g(pre_o + c * w_oc)
            h = o * act_h(c)
            if proj_w is not None:
                r = act_p(h @ proj_w)
                if proj_clip > 0:
                    r = np.clip(r, -proj_clip, proj_clip)
            else:
                r = h
            out[row], cell[row] = r, c
        start += n
    return out, cell


def _cast(ins, dtype):
    return {k: ((v[0].astype(dtype), v[1]) if isinstance(v, tuple) else v.astype(dtype)) for k, v in ins.items()}


def _ref_args(ins, slots):
    """(x, lens, w, b) in float64 from the (possibly float32) inputs the op is fed."""
    x, lens = ins[slots[0]]
    return [x.astype("float64"), lens[0]] + [ins[s].astype("float64") for s in slots[1:]]


def lstm_case(lens, d, peep=True, h0=True, c0=None, dtype="float64", scale=1.0, **attrs):
    """(inputs, expected outputs, attrs) of one lstm OpTest."""
    t, n = sum(lens), len(lens)
    c0 = h0 if c0 is None else c0
    x, w, b = rand(t, 4 * d, scale=scale), rand(d, 4 * d, scale=scale), rand(1, (7 if peep else 4) * d, scale=scale)
    ins = {"Input": (x, [lens]), "Weight": w, "Bias": b}
    if h0:
        ins["H0"] = rand(n, d)
    if c0:
        ins["C0"] = rand(n, d)
    attrs = dict(attrs, use_peepholes=peep)
    cast = _cast(ins, dtype)
    hidden, cell = lstm_ref(*_ref_args(cast, ["Input", "Weight", "Bias"]), cast.get("H0"), cast.get("C0"), **attrs)
    outs = {"Hidden": (hidden.astype(dtype), [lens]), "Cell": (cell.astype(dtype), [lens]), "BatchGate": None,
            "BatchCellPreAct": None}
    return cast, outs, attrs


def lstmp_case(lens, d, p, peep=True, h0=True, dtype="float64", scale=1.0, **attrs):
    t, n = sum(lens), len(lens)
    x, w, pw = rand(t, 4 * d, scale=scale), rand(p, 4 * d, scale=scale), rand(d, p, scale=scale)
    b = rand(1, (7 if peep else 4) * d, scale=scale)
    ins = {"Input": (x, [lens]), "Weight": w, "ProjWeight": pw, "Bias": b}
    if h0:
        ins["H0"], ins["C0"] = rand(n, p), rand(n, d)
    attrs = dict(attrs, use_peepholes=peep)
    cast = _cast(ins, dtype)
    proj, cell = lstm_ref(*_ref_args(cast, ["Input", "Weight", "Bias"]), cast.get("H0"), cast.get("C0"),
                          proj_w=cast["ProjWeight"].astype("float64"), **attrs)
    outs = {"Projection": (proj.astype(dtype), [lens]), "Cell": (cell.astype(dtype), [lens]), "BatchGate": None,
            "BatchCellPreAct": None, "BatchHidden": None}
    return cast, outs, attrs


# Ragged batches: a one-element sequence among longer ones, a single sequence, an empty sequence, all length 1.
LENS = [[3, 1, 4], [5], [2, 0, 3], [1, 1, 1], [4, 6, 2, 6]]


# ------------------------------------------------------------------ lstm forward

@pytest.mark.parametrize("lens", LENS)
@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("init", ["none", "h0_c0", "c0"])
def test_lstm_forward(lens, peep, is_reverse, init):
    ins, outs, attrs = lstm_case(lens, 3, peep=peep, h0=init == "h0_c0", c0=init != "none", is_reverse=is_reverse)
    OpTest("lstm", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("d", [1, 8, 33])
def test_lstm_forward_dtypes_and_widths(dtype, d):
    ins, outs, attrs = lstm_case([7, 3, 12, 1], d, dtype=dtype, scale=2.0)
    tol = 1e-5 if dtype == "float32" else 1e-12
    OpTest("lstm", ins, outs, attrs).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("gate,cell,cand", list(itertools.product(ACT_NAMES, repeat=3)))
def test_lstm_every_activation_combination(gate, cell, cand):
    ins, outs, attrs = lstm_case([3, 1, 2], 2, scale=0.5, gate_activation=gate, cell_activation=cell,
                                 candidate_activation=cand, is_reverse=True)
    OpTest("lstm", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)


def test_lstm_saturated_gates():
    ins, outs, attrs = lstm_case([4, 2], 4, dtype="float32", scale=40.0)
    OpTest("lstm", ins, outs, attrs).check_output(atol=1e-5, rtol=1e-5)


def test_lstm_batch_outputs_carry_the_step_offsets():
    # BatchGate / BatchCellPreAct are in batch order: sequences sorted longest first (ties in input order), one
    # block of rows per time step; their LoD is the blocks' offsets. Lengths 2, 4, 1, 4 -> steps of 4, 3, 2, 2 rows.
    ins, outs, attrs = lstm_case([2, 4, 1, 4], 2)
    main = OpTest("lstm", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"in_%s_%s_var" % (k, k.lower()): (fluid.create_lod_tensor(v[0], v[1], fluid.CPUPlace())
                                               if isinstance(v, tuple) else v) for k, v in ins.items()}
    gate, pre_act = exe.run(main, feed=feed, fetch_list=["out_BatchGate_batchgate_var",
                                                         "out_BatchCellPreAct_batchcellpreact_var"],
                            return_numpy=False)
    assert gate.lod() == [[0, 4, 7, 9, 11]] and pre_act.lod() == [[0, 4, 7, 9, 11]]
    # Row 0 of the batch is step 0 of the first longest sequence (input row 2): its candidate gate activated.
    d, x, w, b, h0 = 2, ins["Input"][0], ins["Weight"], ins["Bias"], ins["H0"]
    np.testing.assert_allclose(np.array(gate)[0, :d], np.tanh(x[2, :d] + h0[1] @ w[:, :d] + b[0, :d]), rtol=1e-12)
    np.testing.assert_allclose(np.array(pre_act)[4], np.tanh(outs["Cell"][0][3]), rtol=1e-12)  # step 1 of seq 1


# ------------------------------------------------------------------ lstm gradients

@pytest.mark.parametrize("lens", [[3, 1, 4], [5], [2, 0, 3], [1, 1]])
@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("is_reverse", [False, True])
def test_lstm_grad(lens, peep, is_reverse):
    ins, outs, attrs = lstm_case(lens, 2, peep=peep, is_reverse=is_reverse)
    OpTest("lstm", ins, outs, attrs).check_grad(["Input", "Weight", "Bias", "H0", "C0"], ["Hidden"])


def test_lstm_grad_through_cell_and_hidden():
    # Cell@GRAD flows too (Fluid 1.8's lstm_grad ignores it; see docs/lod.md).
    ins, outs, attrs = lstm_case([3, 2, 4], 3)
    t = OpTest("lstm", ins, outs, attrs)
    t.check_grad(["Input", "Weight", "Bias", "H0", "C0"], ["Hidden", "Cell"])
    t.check_grad(["Input", "Weight", "C0"], ["Cell"])


def test_lstm_grad_without_initial_states():
    ins, outs, attrs = lstm_case([4, 1, 3], 2, h0=False, c0=False)
    OpTest("lstm", ins, outs, attrs).check_grad(["Input", "Weight", "Bias"], ["Hidden"])
    ins, outs, attrs = lstm_case([4, 1, 3], 2, h0=False, c0=True)
    OpTest("lstm", ins, outs, attrs).check_grad(["Input", "Weight", "Bias", "C0"], ["Hidden", "Cell"])


@pytest.mark.parametrize("gate,cell,cand", list(itertools.product(ACT_NAMES, repeat=3)))
def test_lstm_grad_every_activation_combination(gate, cell, cand):
    ins, outs, attrs = lstm_case([3, 2], 2, gate_activation=gate, cell_activation=cell, candidate_activation=cand)
    OpTest("lstm", ins, outs, attrs).check_grad(["Input", "Weight", "Bias", "H0", "C0"], ["Hidden", "Cell"])


def _lstm_program(op, d, p=None):
    """A float64 program: op over x (LoD) with its parameters fed, loss = mean(out) + mean(cell), and the gradients
    of x and every parameter."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4 * d], dtype="float64", lod_level=1)
        x.stop_gradient = False
        if op == "lstm":
            out, cell = fluid.layers.dynamic_lstm(input=x, size=4 * d, dtype="float64")
        else:
            out, cell = fluid.layers.dynamic_lstmp(input=x, size=4 * d, proj_size=p, dtype="float64")
        loss = fluid.layers.sums([fluid.layers.mean(out), fluid.layers.mean(cell)])
        params = main.global_block().all_parameters()
        grads = fluid.gradients([loss], [x] + params)
    return main, startup, [out, cell] + grads


@pytest.mark.parametrize("op", ["lstm", "lstmp"])
def test_rows_of_a_step_split_over_threads(op):
    # Enough sequences alive per step (up to 130, D = 64) that steps go to the pool split by hidden units (each part
    # its units' gate columns of the recurrent GEMMs and their cell): the same values as one thread, and the forward
    # as numpy's.
    d, lens = 64, [1] * 10 + list(rng.randint(2, 7, size=120))
    x = rand(sum(lens), 4 * d)
    main, startup, fetch = _lstm_program(op, d, p=48)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": fluid.create_lod_tensor(x, [lens], fluid.CPUPlace())}
    saved = fluid.core.get_num_threads()
    try:
        results = {}
        for threads in (1, 2):
            fluid.core.set_num_threads(threads)
            results[threads] = [np.array(t) for t in exe.run(main, feed=feed, fetch_list=fetch, scope=scope,
                                                             return_numpy=False)]
    finally:
        fluid.core.set_num_threads(saved)
    for a, b in zip(results[1], results[2]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    get = lambda n: np.array(scope.find_var(n).get_tensor())  # noqa: E731
    if op == "lstm":
        want = lstm_ref(x, lens, get("lstm_0.w_0"), get("lstm_0.b_0"))
    else:
        want = lstm_ref(x, lens, get("lstmp_0.w_0"), get("lstmp_0.b_0"), proj_w=get("lstmp_0.w_1"))
    np.testing.assert_allclose(results[2][0], want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results[2][1], want[1], rtol=1e-12, atol=1e-12)


def test_lstm_grad_leaves_input_out_but_accepts_it():
    # Fluid's lstm_grad lists Input. fluidlite's backward leaves it out (the kernel takes the LoD from Cell and
    # Input@GRAD's shape from BatchGate), so the [T, 4D] input is freed after the forward op; a Fluid program that
    # passes it still runs, to the same values.
    d, lens = 3, [2, 5, 1]
    main, startup, fetch = _lstm_program("lstm", d)
    grad_op, = [op for op in main.global_block().ops if op.type == "lstm_grad"]
    assert "Input" not in grad_op.input_names and grad_op.output("Input@GRAD") == ["x@GRAD"]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": fluid.create_lod_tensor(rand(sum(lens), 4 * d), [lens], fluid.CPUPlace())}
    ours = exe.run(main, feed=feed, fetch_list=fetch, scope=scope, return_numpy=False)
    assert ours[2].recursive_sequence_lengths() == [lens]  # Input@GRAD has Input's LoD
    grad_op.desc.set_input("Input", ["x"])
    fluids = exe.run(main, feed=feed, fetch_list=fetch, scope=scope, return_numpy=False)
    for a, b in zip(ours, fluids):
        np.testing.assert_array_equal(np.array(a), np.array(b))


# ------------------------------------------------------------------ lstmp

@pytest.mark.parametrize("lens", LENS)
@pytest.mark.parametrize("peep", [True, False])
@pytest.mark.parametrize("is_reverse", [False, True])
def test_lstmp_forward(lens, peep, is_reverse):
    ins, outs, attrs = lstmp_case(lens, 3, 2, peep=peep, is_reverse=is_reverse)
    OpTest("lstmp", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("proj_activation", ACT_NAMES)
@pytest.mark.parametrize("cell_activation", ["tanh", "relu", "sigmoid"])
def test_lstmp_projection_activation_as_fluid(proj_activation, cell_activation):
    # Any proj_activation but identity applies cell_activation (what Fluid 1.8's kernel computes).
    ins, outs, attrs = lstmp_case([3, 1, 2], 2, 3, proj_activation=proj_activation, cell_activation=cell_activation)
    OpTest("lstmp", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("cell_clip,proj_clip", [(0.3, 0.0), (0.0, 0.2), (0.25, 0.15)])
def test_lstmp_clips(cell_clip, proj_clip):
    rng.seed(3)  # data with both clipped and unclipped values, whatever ran before
    ins, outs, attrs = lstmp_case([4, 2, 3], 3, 2, scale=2.0, cell_clip=cell_clip, proj_clip=proj_clip,
                                  proj_activation="identity")
    cell, proj = outs["Cell"][0], outs["Projection"][0]
    for clip, values in ((cell_clip, cell), (proj_clip, proj)):
        if clip:  # some values clipped, some not
            edge = float(np.float32(clip))
            assert (np.abs(values) == edge).any() and (np.abs(values) < edge).any()
    OpTest("lstmp", ins, outs, attrs).check_output(atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstmp_forward_dtypes(dtype):
    ins, outs, attrs = lstmp_case([9, 4, 1, 6], 16, 8, dtype=dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    OpTest("lstmp", ins, outs, attrs).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("lens", [[3, 1, 4], [5], [2, 0, 3]])
@pytest.mark.parametrize("is_reverse", [False, True])
def test_lstmp_grad(lens, is_reverse):
    ins, outs, attrs = lstmp_case(lens, 2, 3, is_reverse=is_reverse)
    OpTest("lstmp", ins, outs, attrs).check_grad(["Input", "Weight", "ProjWeight", "Bias", "H0", "C0"],
                                                 ["Projection", "Cell"])


@pytest.mark.parametrize("proj_activation", ACT_NAMES)
@pytest.mark.parametrize("cell_activation", ["tanh", "relu", "sigmoid", "identity"])
def test_lstmp_grad_projection_activations(proj_activation, cell_activation):
    ins, outs, attrs = lstmp_case([3, 2], 2, 2, proj_activation=proj_activation, cell_activation=cell_activation)
    OpTest("lstmp", ins, outs, attrs).check_grad(["Input", "Weight", "ProjWeight", "Bias", "H0", "C0"],
                                                 ["Projection", "Cell"])


@pytest.mark.parametrize("attrs", [dict(use_peepholes=False, proj_activation="identity"),
                                   dict(cell_clip=0.3, proj_clip=0.25, scale=2.0),
                                   dict(gate_activation="tanh", cell_activation="sigmoid", candidate_activation="relu"),
                                   dict(h0=False)])
def test_lstmp_grad_variants(attrs):
    attrs = dict(attrs)
    kw = {k: attrs.pop(k) for k in ("use_peepholes", "scale", "h0") if k in attrs}
    peep = kw.pop("use_peepholes", True)
    ins, outs, attrs = lstmp_case([3, 1, 4], 2, 3, peep=peep, **kw, **attrs)
    names = [k for k in ("Input", "Weight", "ProjWeight", "Bias", "H0", "C0") if k in ins]
    OpTest("lstmp", ins, outs, attrs).check_grad(names, ["Projection"])


# ------------------------------------------------------------------ errors

def _block():
    return fluid.Program().global_block()


def _append(block, op, ins, attrs=None):
    outs = {"Hidden": ["h"], "Cell": ["c"], "BatchGate": ["bg"], "BatchCellPreAct": ["bc"]}
    if op == "lstmp":
        outs = {"Projection": ["p"], "Cell": ["c"], "BatchGate": ["bg"], "BatchCellPreAct": ["bc"],
                "BatchHidden": ["bh"]}
    for names in outs.values():
        if not block.has_var(names[0]):
            declare(block, names[0], None)
    block.append_op(type=op, inputs={k: [v] for k, v in ins.items()},
                    outputs={k: [block.var(v[0])] for k, v in outs.items()}, attrs=attrs or {})


@pytest.mark.parametrize("shapes,attrs,message", [
    (dict(x=[-1, 10], w=[2, 8], b=[1, 14]), {}, r"lstm: Input 'x' \[-1, 10\] must be \[T, 4 \* D\]: its width is not "
                                                r"a multiple of 4"),
    (dict(x=[-1, 8], w=[3, 8], b=[1, 14]), {}, r"lstm: Weight 'w' \[3, 8\] must be \[2, 8\] for Input 'x' \[-1, 8\]"),
    (dict(x=[-1, 8], w=[2, 8], b=[1, 8]), {}, r"lstm: Bias 'b' \[1, 8\] must be \[1, 14\] \(use_peepholes: 4 \* D gate "
                                              r"biases then the 3 \* D peephole weights"),
    (dict(x=[-1, 8], w=[2, 8], b=[1, 14]), {"use_peepholes": False},
     r"lstm: Bias 'b' \[1, 14\] must be \[1, 8\] \(4 \* D gate biases; use_peepholes is off\)"),
    (dict(x=[-1, 8], w=[2, 8], b=[1, 14], h0=[-1, 2]), {}, r"lstm: H0 'h0' \[-1, 2\] is given without C0"),
    (dict(x=[-1, 8], w=[2, 8], b=[1, 14], h0=[-1, 3], c0=[-1, 3]), {},
     r"lstm: H0 'h0' \[-1, 3\] must have rank 2 with last dim 2 \(\[N, 2\], one row per sequence\)"),
    (dict(x=[-1, 8, 1], w=[2, 8], b=[1, 14]), {}, r"lstm: Input 'x' \[-1, 8, 1\] must have rank 2"),
])
def test_lstm_build_errors(shapes, attrs, message):
    block = _block()
    names = {"x": "Input", "w": "Weight", "b": "Bias", "h0": "H0", "c0": "C0"}
    ins = {names[k]: declare(block, k, v) for k, v in shapes.items()}
    with pytest.raises(fluid.core.EnforceNotMet, match=message):
        _append(block, "lstm", ins, attrs)


def test_lstm_build_errors_dtype_and_attrs():
    block = _block()
    ins = {"Input": declare(block, "x", [-1, 8], "float64"), "Weight": declare(block, "w", [2, 8]),
           "Bias": declare(block, "b", [1, 14])}
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm: Input 'x' \[-1, 8\] is float64 but Weight 'w' \[2, 8\] "
                                                       r"is float32"):
        _append(block, "lstm", ins)
    ins["Input"] = declare(block, "x32", [-1, 8])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gate_activation.*softmax"):
        _append(block, "lstm", ins, {"gate_activation": "softmax"})


def test_lstmp_build_errors():
    block = _block()
    ins = {"Input": declare(block, "x", [-1, 8]), "Weight": declare(block, "w", [3, 8]),
           "ProjWeight": declare(block, "pw", [2, 4]), "Bias": declare(block, "b", [1, 14])}
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstmp: Weight 'w' \[3, 8\] must be \[4, 8\]"):
        _append(block, "lstmp", ins)
    ins["Weight"], ins["ProjWeight"] = declare(block, "w4", [4, 8]), declare(block, "pw3", [3, 4])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstmp: ProjWeight 'pw3' \[3, 4\] must be \[D, P\] with D = 2"):
        _append(block, "lstmp", ins)
    ins["ProjWeight"] = declare(block, "pw2", [2, 4])
    ins["H0"], ins["C0"] = declare(block, "h0", [-1, 2]), declare(block, "c0", [-1, 2])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstmp: H0 'h0' \[-1, 2\] must have rank 2 with last dim 4"):
        _append(block, "lstmp", ins)


def _run_lstm(x, lod, h0=None, c0=None, d=2):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        ins = {"Input": declare(block, "x", [-1, 4 * d], "float64"),
               "Weight": declare(block, "w", [d, 4 * d], "float64"), "Bias": declare(block, "b", [1, 7 * d], "float64")}
        feed = {"x": x if lod is None else fluid.create_lod_tensor(x, lod, fluid.CPUPlace()),
                "w": rand(d, 4 * d), "b": rand(1, 7 * d)}
        for name, v in (("h0", h0), ("c0", c0)):
            if v is not None:
                ins[name.upper()] = declare(block, name, [-1, d], "float64")
                feed[name] = v
        _append(block, "lstm", ins)
    return [np.array(t) for t in fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["h"],
                                                                         return_numpy=False)]


def test_lstm_run_errors():
    x = rand(5, 8)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm: Input 'x' \[5, 8\] must be a LoDTensor with at least 1 "
                                                       r"LoD level"):
        _run_lstm(x, None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm: Input 'x' \[5, 8\] has 2 LoD levels \{\{0, 1, 2\}"
                                                       r"\{0, 2, 5\}\}; lstm runs over one level of sequences"):
        _run_lstm(x, [[1, 1], [2, 3]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm: H0 'h0' \[3, 2\] must be \[2, 2\]: one row per sequence "
                                                       r"of Input's LoD \(2 sequences\)"):
        _run_lstm(x, [[2, 3]], h0=rand(3, 2), c0=rand(3, 2))
    h, = _run_lstm(x, [[2, 3]], h0=rand(2, 2), c0=rand(2, 2))
    assert h.shape == (5, 2)


def test_lstm_empty_batch():
    # Every sequence empty: no rows, no steps; the outputs are [0, D].
    h, = _run_lstm(np.zeros((0, 8)), [[0, 0]])
    assert h.shape == (0, 2)


# ------------------------------------------------------------------ layers

def _lod_data(name, width, dtype="float32"):
    return fluid.layers.data(name=name, shape=[width], dtype=dtype, lod_level=1)


def test_dynamic_lstm_layer_parameters_and_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = _lod_data("x", 32)
        hidden, cell = fluid.layers.dynamic_lstm(input=x, size=32)
        assert hidden.shape == (-1, 8) and cell.shape == (-1, 8)
        assert hidden.lod_level == 1 and cell.lod_level == 1
        params = {p.name: p.shape for p in main.global_block().all_parameters()}
        assert params == {"lstm_0.w_0": (8, 32), "lstm_0.b_0": (1, 56)}
        fluid.layers.dynamic_lstm(input=x, size=32, use_peepholes=False)
        params = {p.name: p.shape for p in main.global_block().all_parameters()}
        assert params["lstm_1.b_0"] == (1, 32)
        op = [o for o in main.global_block().ops if o.type == "lstm"][0]
        assert sorted(op.output_names) == ["BatchCellPreAct", "BatchGate", "Cell", "Hidden"]
        assert op.attr("gate_activation") == "sigmoid" and op.attr("use_peepholes") is True


def _layer_run(build, feed, dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        outs = build()
        loss = fluid.layers.mean(outs[0])
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor()).copy()
              for p in main.global_block().all_parameters()}
    got = exe.run(main, feed=feed, fetch_list=list(outs), scope=scope, return_numpy=False)
    trained = {n: np.array(scope.find_var(n).get_tensor()) for n in params}
    return params, got, trained


@pytest.mark.parametrize("is_reverse", [False, True])
def test_dynamic_lstm_layer_matches_numpy_and_trains(is_reverse):
    d, lens = 3, [2, 4, 1]
    x = rand(sum(lens), 4 * d)
    h0, c0 = rand(3, d), rand(3, d)

    def build():
        xv = _lod_data("x", 4 * d, "float64")
        h0v = fluid.layers.data(name="h0", shape=[d], dtype="float64")
        c0v = fluid.layers.data(name="c0", shape=[d], dtype="float64")
        return fluid.layers.dynamic_lstm(input=xv, size=4 * d, h_0=h0v, c_0=c0v, is_reverse=is_reverse,
                                         candidate_activation="relu", dtype="float64")

    feed = {"x": fluid.create_lod_tensor(x, [lens], fluid.CPUPlace()), "h0": h0, "c0": c0}
    params, (hidden, cell), trained = _layer_run(build, feed)
    want_h, want_c = lstm_ref(x, lens, params["lstm_0.w_0"], params["lstm_0.b_0"], h0, c0, is_reverse=is_reverse,
                              candidate_activation="relu")
    assert hidden.recursive_sequence_lengths() == [lens] and cell.recursive_sequence_lengths() == [lens]
    np.testing.assert_allclose(np.array(hidden), want_h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(cell), want_c, rtol=1e-12, atol=1e-12)
    for name in params:
        assert not np.allclose(trained[name], params[name]), name  # every parameter received a gradient


def test_dynamic_lstmp_layer_matches_numpy_and_trains():
    d, p, lens = 4, 2, [3, 1, 5]
    x = rand(sum(lens), 4 * d)

    def build():
        return fluid.layers.dynamic_lstmp(input=_lod_data("x", 4 * d, "float64"), size=4 * d, proj_size=p,
                                          cell_clip=0.5, proj_clip=0.4, proj_activation="identity", dtype="float64")

    feed = {"x": fluid.create_lod_tensor(x, [lens], fluid.CPUPlace())}
    params, (proj, cell), trained = _layer_run(build, feed)
    assert sorted((k, v.shape) for k, v in params.items()) == [("lstmp_0.b_0", (1, 7 * d)),
                                                                ("lstmp_0.w_0", (p, 4 * d)),
                                                                ("lstmp_0.w_1", (d, p))]
    want_p, want_c = lstm_ref(x, lens, params["lstmp_0.w_0"], params["lstmp_0.b_0"], proj_w=params["lstmp_0.w_1"],
                              cell_clip=0.5, proj_clip=0.4, proj_activation="identity")
    assert proj.recursive_sequence_lengths() == [lens]
    np.testing.assert_allclose(np.array(proj), want_p, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(cell), want_c, rtol=1e-12, atol=1e-12)
    for name in params:
        assert not np.allclose(trained[name], params[name]), name


def test_dynamic_lstmp_layer_shapes_and_attrs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = _lod_data("x", 64)
        h0 = fluid.layers.data(name="h0", shape=[6], dtype="float32")
        c0 = fluid.layers.data(name="c0", shape=[16], dtype="float32")
        proj, cell = fluid.layers.dynamic_lstmp(input=x, size=64, proj_size=6, h_0=h0, c_0=c0)
        assert proj.shape == (-1, 6) and cell.shape == (-1, 16) and proj.lod_level == 1
        op = [o for o in main.global_block().ops if o.type == "lstmp"][0]
        assert op.attr("cell_clip") == 0.0 and op.attr("proj_clip") == 0.0 and op.attr("proj_activation") == "tanh"
        assert op.input("H0") == ["h0"] and op.input("C0") == ["c0"]


def test_dynamic_lstm_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = _lod_data("x", 32)
        with pytest.raises(ValueError, match="dynamic_lstm: bias_attr must not be False"):
            fluid.layers.dynamic_lstm(input=x, size=32, bias_attr=False)
        with pytest.raises(ValueError, match=r"dynamic_lstm: size must be 4 \* hidden size \(a multiple of 4\), "
                                             r"got 30"):
            fluid.layers.dynamic_lstm(input=x, size=30)
        with pytest.raises(ValueError, match=r"dynamic_lstm: input x has width 32 but size is 16"):
            fluid.layers.dynamic_lstm(input=x, size=16)
        with pytest.raises(TypeError, match=r"dynamic_lstm: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.dynamic_lstm(input=fluid.layers.data(name="ids", shape=[32], dtype="int64"), size=32)
        with pytest.raises(ValueError, match=r"dynamic_lstm: h_0 h0 must have shape \[batch_size, 8\], got \(-1, 4\)"):
            fluid.layers.dynamic_lstm(input=x, size=32, h_0=fluid.layers.data(name="h0", shape=[4]),
                                      c_0=fluid.layers.data(name="c0", shape=[8]))
        with pytest.raises(TypeError, match=r"dynamic_lstm: 'h_0' must be a Variable, got ndarray"):
            fluid.layers.dynamic_lstm(input=x, size=32, h_0=np.zeros((2, 8)))
        with pytest.raises(ValueError, match=r"dynamic_lstm: h_0 h0_only is given without c_0: give both initial "
                                             r"states, only c_0, or neither"):
            fluid.layers.dynamic_lstm(input=x, size=32, h_0=fluid.layers.data(name="h0_only", shape=[8]))
        with pytest.raises(TypeError, match=r"dynamic_lstm: input x64 is float64 but dtype \(the parameters' and "
                                            r"outputs' dtype\) is float32: pass dtype='float64'"):
            fluid.layers.dynamic_lstm(input=_lod_data("x64", 32, "float64"), size=32)


def test_dynamic_lstmp_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = _lod_data("x", 32)
        with pytest.raises(ValueError, match="dynamic_lstmp: bias_attr must not be False"):
            fluid.layers.dynamic_lstmp(input=x, size=32, proj_size=4, bias_attr=False)
        with pytest.raises(ValueError, match=r"dynamic_lstmp: cell_clip must not be negative, got -1.0"):
            fluid.layers.dynamic_lstmp(input=x, size=32, proj_size=4, cell_clip=-1.0)
        with pytest.raises(ValueError, match=r"dynamic_lstmp: proj_size must be a positive int, got 0"):
            fluid.layers.dynamic_lstmp(input=x, size=32, proj_size=0)
        with pytest.raises(ValueError, match=r"dynamic_lstmp: h_0 h0 must have shape \[batch_size, 4\], got \(-1, 8\)"):
            fluid.layers.dynamic_lstmp(input=x, size=32, proj_size=4, h_0=fluid.layers.data(name="h0", shape=[8]),
                                       c_0=fluid.layers.data(name="c0", shape=[8]))
