"""The RNN cell API (fluidlite/layers/rnn.py, layers/utils.py): layers.rnn over GRUCell / LSTMCell / custom cells
against numpy references written per sequence (sequence_length masking, is_reverse, time_major both ways, empty and
one-step sequences), numeric gradients in float64, Fluid 1.8's parameter names and shapes, nested structures,
birnn, build-time errors, and a tiny model that learns."""
import collections
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.layers import utils

L = fluid.layers
B, T, D, H = 4, 5, 3, 6


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


# ------------------------------------------------------------------ numpy references, one sequence at a time

def gru_step(p, x, h):
    w_gate, w_cand, b_gate, b_cand = p
    gates = sigmoid(np.concatenate([x, h]) @ w_gate + b_gate)
    r, u = gates[:len(h)], gates[len(h):]
    c = np.tanh(np.concatenate([x, r * h]) @ w_cand + b_cand)
    new = u * h + (1 - u) * c
    return new, new


def lstm_step(p, x, state, forget_bias=1.0):
    weight, bias = p
    h, c = state
    i, j, f, o = np.split(np.concatenate([x, h]) @ weight + bias, 4)
    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    new_h = np.tanh(new_c) * sigmoid(o)
    return new_h, (new_h, new_c)


def run_sequence(step, xs, state, length, reverse):
    """One sequence xs [T, D] from `state`: every step's output, and the state after the last valid step. A step at
    or past `length` still computes an output but keeps the previous state (Fluid's mask)."""
    outs = [None] * len(xs)
    for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
        out, new_state = step(xs[t], state)
        outs[t] = out
        if t < length:
            state = new_state
    return np.stack(outs), state


def params_of(scope, names):
    return [np.array(scope.find_var(n).get_tensor()) for n in names]


def build_rnn(cell_fn, dtype, time_major, is_reverse, with_lengths, with_init):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, None, D], dtype=dtype)
        x.stop_gradient = False
        lengths = fluid.data("lengths", shape=[None], dtype="int64") if with_lengths else None
        cell = cell_fn(dtype)
        init = None
        if with_init:
            init = [fluid.data("h0", shape=[None, H], dtype=dtype)]
            if isinstance(cell, L.LSTMCell):
                init.append(fluid.data("c0", shape=[None, H], dtype=dtype))
            else:
                init = init[0]
        out, final = L.rnn(cell, x, initial_states=init, sequence_length=lengths, time_major=time_major,
                           is_reverse=is_reverse)
    return main, startup, x, init, out, final


def gru(dtype):
    return L.GRUCell(H, dtype=dtype)


def lstm(dtype):
    return L.LSTMCell(H, dtype=dtype)


GRU_PARAMS = ["GRUCell/BasicGRUUnit_0.w_0", "GRUCell/BasicGRUUnit_0.w_1", "GRUCell/BasicGRUUnit_0.b_0",
              "GRUCell/BasicGRUUnit_0.b_1"]
LSTM_PARAMS = ["LSTMCell/BasicLSTMUnit_0.w_0", "LSTMCell/BasicLSTMUnit_0.b_0"]


def feed_for(rng, dtype, time_major, lengths, with_init, is_lstm):
    xb = rng.uniform(-1, 1, (B, T, D)).astype(dtype)
    feed = {"x": xb.transpose(1, 0, 2).copy() if time_major else xb}
    if lengths is not None:
        feed["lengths"] = np.array(lengths, dtype="int64")
    h0 = rng.uniform(-0.5, 0.5, (B, H)).astype(dtype)
    c0 = rng.uniform(-0.5, 0.5, (B, H)).astype(dtype)
    if with_init:
        feed["h0"] = h0
        if is_lstm:
            feed["c0"] = c0
    else:
        h0, c0 = np.zeros_like(h0), np.zeros_like(c0)
    return xb, feed, h0, c0


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("is_reverse", [False, True])
@pytest.mark.parametrize("lengths", [None, [5, 2, 0, 1]])   # full, ragged, an empty and a one-step sequence
@pytest.mark.parametrize("with_init", [False, True])
def test_rnn_forward_matches_numpy_per_sequence(kind, time_major, is_reverse, lengths, with_init):
    is_lstm = kind == "lstm"
    main, startup, x, init, out, final = build_rnn(lstm if is_lstm else gru, "float64", time_major, is_reverse,
                                                   lengths is not None, with_init)
    rng = np.random.RandomState(3)
    xb, feed, h0, c0 = feed_for(rng, "float64", time_major, lengths, with_init, is_lstm)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    fetch = [out] + (final if is_lstm else [final])
    got = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    p = params_of(scope, LSTM_PARAMS if is_lstm else GRU_PARAMS)
    for b in range(B):
        step = (lambda xt, s: lstm_step(p, xt, s)) if is_lstm else (lambda xt, s: gru_step(p, xt, s))
        state = (h0[b], c0[b]) if is_lstm else h0[b]
        length = T if lengths is None else lengths[b]
        want_out, want_state = run_sequence(step, xb[b], state, length, is_reverse)
        got_out = got[0][:, b] if time_major else got[0][b]
        np.testing.assert_allclose(got_out, want_out, rtol=1e-10, atol=1e-12)
        want_states = want_state if is_lstm else (want_state,)
        for g, w in zip(got[1:], want_states):
            np.testing.assert_allclose(g[b], w, rtol=1e-10, atol=1e-12)
    assert got[0].shape == ((T, B, H) if time_major else (B, T, H))


def test_rnn_float32_and_one_sequence():
    main, startup, x, init, out, final = build_rnn(gru, "float32", False, False, True, False)
    rng = np.random.RandomState(4)
    xb = rng.uniform(-1, 1, (1, T, D)).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got_out, got_state = exe.run(main, feed={"x": xb, "lengths": np.array([3])}, fetch_list=[out, final], scope=scope)
    assert got_out.dtype == np.float32 and got_state.shape == (1, H)
    p = params_of(scope, GRU_PARAMS)
    want_out, want_state = run_sequence(lambda xt, s: gru_step(p, xt, s), xb[0], np.zeros(H, "float32"), 3, False)
    np.testing.assert_allclose(got_out[0], want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state[0], want_state, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ gradients

def _numeric_check(exe, main, scope, feed, loss, targets, analytic, rng, per_var=10, eps=1e-6):
    """Central differences of `loss` for up to `per_var` entries of each target (a feed name or a parameter)."""

    def f():
        return float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].reshape(-1)[0])

    for name, ana in zip(targets, analytic):
        if name in feed:
            arr, put = feed[name], None
        else:
            t = scope.find_var(name).get_tensor()
            arr = np.array(t)
            put = t.set
        flat = arr.reshape(-1)
        for k in rng.choice(flat.size, size=min(per_var, flat.size), replace=False):
            orig = flat[k]
            flat[k] = orig + eps
            if put:
                put(arr, fluid.CPUPlace())
            plus = f()
            flat[k] = orig - eps
            if put:
                put(arr, fluid.CPUPlace())
            minus = f()
            flat[k] = orig
            if put:
                put(arr, fluid.CPUPlace())
            num = (plus - minus) / (2 * eps)
            got = ana.reshape(-1)[k]
            assert abs(num - got) <= 1e-6 * max(1.0, abs(num)), (name, k, num, got)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("time_major,is_reverse", [(False, False), (True, True)])
def test_rnn_numeric_gradients_float64(kind, time_major, is_reverse):
    is_lstm = kind == "lstm"
    main, startup, x, init, out, final = build_rnn(lstm if is_lstm else gru, "float64", time_major, is_reverse,
                                                   True, True)
    rng = np.random.RandomState(8)
    names = LSTM_PARAMS if is_lstm else GRU_PARAMS
    with fluid.program_guard(main, startup):
        finals = final if is_lstm else [final]
        # fixed random weights, so no gradient is a plain sum of ones
        terms = [L.reduce_sum(L.elementwise_mul(out, L.assign(rng.uniform(-1, 1, (B, T, H) if not time_major
                                                                          else (T, B, H)))))]
        terms += [L.reduce_sum(L.elementwise_mul(s, L.assign(rng.uniform(-1, 1, (B, H))))) for s in finals]
        loss = L.sums(terms)
        inits = init if is_lstm else [init]
        for v in inits:
            v.stop_gradient = False
        wrt = [x] + inits + [main.global_block().var(n) for n in names]
        grads = fluid.gradients([loss], wrt)
    _, feed, _, _ = feed_for(rng, "float64", time_major, [5, 2, 0, 1], True, is_lstm)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    analytic = exe.run(main, feed=feed, fetch_list=grads, scope=scope)
    _numeric_check(exe, main, scope, feed, loss, ["x"] + [v.name for v in inits] + names, analytic, rng)


def test_masked_steps_pass_the_state_gradient_through():
    """With length 0 the final state is the initial state: its gradient is exactly the loss weight on it, and the
    inputs of that sequence get no gradient through the state."""
    main, startup, x, init, out, final = build_rnn(gru, "float64", False, False, True, True)
    with fluid.program_guard(main, startup):
        init.stop_gradient = False
        loss = L.reduce_sum(final)
        gx, gh0 = fluid.gradients([loss], [x, init])
    rng = np.random.RandomState(9)
    _, feed, _, _ = feed_for(rng, "float64", False, [5, 0, 3, 0], True, False)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    gxv, gh0v = exe.run(main, feed=feed, fetch_list=[gx, gh0], scope=scope)
    np.testing.assert_array_equal(gh0v[1], np.ones(H))
    np.testing.assert_array_equal(gh0v[3], np.ones(H))
    np.testing.assert_array_equal(gxv[1], np.zeros((T, D)))
    np.testing.assert_array_equal(gxv[2, 3:], np.zeros((2, D)))   # steps past length 3 do not reach the final state
    assert np.abs(gxv[0]).min() > 0 and np.abs(gh0v[0] - 1).max() > 1e-3


# ------------------------------------------------------------------ Fluid's parameter names and shapes

def test_parameter_names_and_shapes_are_fluids():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, None, D], dtype="float32")
        L.rnn(L.GRUCell(H), x)
        L.rnn(L.GRUCell(H), x)
        L.rnn(L.LSTMCell(H), x)
        L.rnn(L.GRUCell(H, param_attr=fluid.ParamAttr(name="enc_w"), bias_attr=fluid.ParamAttr(name="enc_b"),
                        name="enc"), x)
        L.rnn(L.LSTMCell(H, param_attr="dec_w", bias_attr="dec_b", name="dec"), x)
    params = {p.name: tuple(p.shape) for p in main.global_block().all_parameters()}
    assert params == {
        "GRUCell/BasicGRUUnit_0.w_0": (D + H, 2 * H), "GRUCell/BasicGRUUnit_0.w_1": (D + H, H),
        "GRUCell/BasicGRUUnit_0.b_0": (2 * H,), "GRUCell/BasicGRUUnit_0.b_1": (H,),
        "GRUCell/BasicGRUUnit_1.w_0": (D + H, 2 * H), "GRUCell/BasicGRUUnit_1.w_1": (D + H, H),
        "GRUCell/BasicGRUUnit_1.b_0": (2 * H,), "GRUCell/BasicGRUUnit_1.b_1": (H,),
        "LSTMCell/BasicLSTMUnit_0.w_0": (D + H, 4 * H), "LSTMCell/BasicLSTMUnit_0.b_0": (4 * H,),
        "enc_w_gate": (D + H, 2 * H), "enc_w_candidate": (D + H, H), "enc_b_gate": (2 * H,), "enc_b_candidate": (H,),
        "dec_w": (D + H, 4 * H), "dec_b": (4 * H,)}
    # biases start at zero, weights are Xavier-initialised (Fluid's defaults)
    ops = {op.output("Out")[0]: op.type for op in startup.global_block().ops}
    assert ops["GRUCell/BasicGRUUnit_0.b_0"] == "fill_constant"
    assert ops["GRUCell/BasicGRUUnit_0.w_0"] == "uniform_random"


def test_saved_parameters_drive_the_cell():
    """Parameters put into the scope under Fluid's names are the ones the cell computes with."""
    main, startup, x, init, out, final = build_rnn(lstm, "float64", False, False, False, False)
    rng = np.random.RandomState(10)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    w = rng.uniform(-0.3, 0.3, (D + H, 4 * H))
    b = rng.uniform(-0.3, 0.3, (4 * H,))
    scope.find_var(LSTM_PARAMS[0]).get_tensor().set(w, fluid.CPUPlace())
    scope.find_var(LSTM_PARAMS[1]).get_tensor().set(b, fluid.CPUPlace())
    xb = rng.uniform(-1, 1, (B, T, D))
    got, = exe.run(main, feed={"x": xb}, fetch_list=[out], scope=scope)
    for n in range(B):
        want, _ = run_sequence(lambda xt, s: lstm_step((w, b), xt, s), xb[n], (np.zeros(H), np.zeros(H)), T, False)
        np.testing.assert_allclose(got[n], want, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ the cell API around rnn

def test_get_initial_states():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", shape=[None, 7, D], dtype="float32")
        tm = fluid.data("tm", shape=[7, None, D], dtype="float32")
        lstm_states = L.LSTMCell(H).get_initial_states(x)
        gru_state = L.GRUCell(H, dtype="float64").get_initial_states([tm], batch_dim_idx=1, init_value=0.5)
        custom = L.GRUCell(H).get_initial_states(x, shape={"a": [3], "b": ([-1, 2, 2], (4,))},
                                                 dtype={"a": "float64", "b": ("int64", "float32")}, init_value=2)
    assert isinstance(lstm_states, list) and [s.shape for s in lstm_states] == [(-1, H), (-1, H)]
    assert gru_state.shape == (-1, H)
    assert sorted(custom) == ["a", "b"] and custom["a"].shape == (-1, 3) and custom["b"][0].shape == (-1, 2, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    r = exe.run(main, feed={"x": np.zeros((2, 7, D), "float32"), "tm": np.zeros((7, 5, D), "float32")},
                fetch_list=lstm_states + [gru_state, custom["a"], custom["b"][0], custom["b"][1]])
    np.testing.assert_array_equal(r[0], np.zeros((2, H), "float32"))
    assert r[2].dtype == np.float64 and r[2].shape == (5, H) and (r[2] == 0.5).all()
    assert r[3].dtype == np.float64 and (r[3] == 2).all() and r[3].shape == (2, 3)
    assert r[4].dtype == np.int64 and r[4].shape == (2, 2, 2) and r[5].shape == (2, 4) and r[5].dtype == np.float32


class AddCell(L.RNNCell):
    """A cell over nested structures: inputs {"a": [B, 2], "b": [B, 2]}, states State(total [B, 2], count [B, 1]),
    outputs (a * scale + total, b - total); `scale` comes through rnn's kwargs."""
    State = collections.namedtuple("State", ["total", "count"])

    def call(self, inputs, states, scale=None):
        total = states.total + inputs["a"] * scale + inputs["b"]
        count = states.count + 1.0
        return (L.elementwise_add(inputs["a"] * scale, total), inputs["b"] - total), self.State(total, count)

    @property
    def state_shape(self):
        return self.State([2], [1])


def test_nested_structures_and_kwargs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", shape=[None, None, 2], dtype="float32")
        b = fluid.data("b", shape=[None, None, 2], dtype="float32")
        lengths = fluid.data("lengths", shape=[None], dtype="int32")
        scale = L.fill_constant([1], "float32", 3.0)
        cell = AddCell()
        (o1, o2), final = L.rnn(cell, {"b": b, "a": a}, sequence_length=lengths, is_reverse=True, scale=scale)
    assert isinstance(final, AddCell.State)
    rng = np.random.RandomState(11)
    av, bv = rng.rand(3, 4, 2).astype("float32"), rng.rand(3, 4, 2).astype("float32")
    lens = np.array([4, 1, 2], "int32")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    g1, g2, gt, gc = exe.run(main, feed={"a": av, "b": bv, "lengths": lens},
                             fetch_list=[o1, o2, final.total, final.count])
    for n in range(3):
        total, count = np.zeros(2), 0.0
        for t in reversed(range(4)):
            new_total = total + av[n, t] * 3 + bv[n, t]
            np.testing.assert_allclose(g1[n, t], av[n, t] * 3 + new_total, rtol=1e-6)
            np.testing.assert_allclose(g2[n, t], bv[n, t] - new_total, rtol=1e-6)
            if t < lens[n]:
                total, count = new_total, count + 1
        np.testing.assert_allclose(gt[n], total, rtol=1e-6)
        assert gc[n, 0] == lens[n]


def test_birnn_concatenates_both_directions():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 2
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, None, D], dtype="float64")
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        out, (fw, bw) = L.birnn(L.GRUCell(H, dtype="float64"), L.GRUCell(H, dtype="float64", name="bw"), x,
                                sequence_length=lengths)
    assert out.shape == (-1, -1, 2 * H)
    rng = np.random.RandomState(12)
    xb, lens = rng.uniform(-1, 1, (B, T, D)), [5, 3, 1, 4]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got, gfw, gbw = exe.run(main, feed={"x": xb, "lengths": np.array(lens)}, fetch_list=[out, fw, bw], scope=scope)
    pf = params_of(scope, GRU_PARAMS)
    pb = params_of(scope, [n.replace("GRUCell", "bw") for n in GRU_PARAMS])
    for n in range(B):
        of, sf = run_sequence(lambda xt, s: gru_step(pf, xt, s), xb[n], np.zeros(H), lens[n], False)
        ob, sb = run_sequence(lambda xt, s: gru_step(pb, xt, s), xb[n], np.zeros(H), lens[n], True)
        np.testing.assert_allclose(got[n], np.concatenate([of, ob], axis=1), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gfw[n], sf, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gbw[n], sb, rtol=1e-10, atol=1e-12)


def test_layers_rnn_is_the_function():
    assert callable(fluid.layers.rnn) and fluid.layers.rnn.__name__ == "rnn"
    assert sys.modules["fluidlite.layers.rnn"].rnn is fluid.layers.rnn
    for name in ("RNNCell", "GRUCell", "LSTMCell", "rnn", "birnn"):
        assert name in fluid.layers.__all__ and hasattr(fluid.layers, name)


# ------------------------------------------------------------------ build-time errors

def test_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape=[None, None, D], dtype="float32")
        ids = fluid.data("ids", shape=[None, None, D], dtype="int64")
        flat = fluid.data("flat", shape=[None], dtype="float32")
        lengths = fluid.data("lengths", shape=[None], dtype="float32")
        with pytest.raises(TypeError, match=r"rnn: 'inputs\[0\]' \(ids\) must be float32 or float64, got int64"):
            L.rnn(L.GRUCell(H), ids)
        with pytest.raises(ValueError, match=r"rnn: inputs\[0\] flat \[-1\] needs a batch and a time dim"):
            L.rnn(L.GRUCell(H), flat)
        with pytest.raises(TypeError, match=r"rnn: 'sequence_length' \(lengths\) must be int32 or int64, got float32"):
            L.rnn(L.GRUCell(H), x, sequence_length=lengths)
        with pytest.raises(TypeError, match=r"rnn: 'cell' must be an RNNCell \(or have a call method\), got int"):
            L.rnn(3, x)
        with pytest.raises(TypeError, match=r"rnn: 'inputs' must be a Variable or a nested structure of Variables"):
            L.rnn(L.GRUCell(H), "x")
        with pytest.raises(TypeError, match=r"GRUCell: hidden_size must be a positive int, got 0"):
            L.GRUCell(0)
        with pytest.raises(TypeError, match=r"LSTMCell: dtype must be float32 or float64, got 'int32'"):
            L.LSTMCell(4, dtype="int32")
        with pytest.raises(TypeError, match=r"LSTMCell: 'states' must be a list \[hidden, cell\] of two Variables"):
            L.rnn(L.LSTMCell(H), x, initial_states=(L.GRUCell(H).get_initial_states(x),) * 2)
        with pytest.raises(TypeError, match=r"a state shape must be a list or tuple of ints, got 'abc'"):
            L.GRUCell(H).get_initial_states(x, shape="abc")
        with pytest.raises(ValueError, match=r"batch_dim_idx 3 is not a dim of batch_ref x \[-1, -1, 3\]"):
            L.GRUCell(H).get_initial_states(x, batch_dim_idx=3)
        with pytest.raises(NotImplementedError, match="state_shape"):
            L.RNNCell().get_initial_states(x)
        unknown = fluid.data("unknown", shape=[None, None, None], dtype="float32")
        with pytest.raises(ValueError, match=r"GRUCell: the last dim of inputs .* must be known"):
            L.rnn(L.GRUCell(H), unknown, initial_states=L.GRUCell(H).get_initial_states(x))

        class Bad(L.RNNCell):
            def call(self, inputs, states):
                return inputs, [states, states]

        with pytest.raises(ValueError, match="don't have the same number of elements"):
            L.rnn(Bad(), x, initial_states=L.GRUCell(D).get_initial_states(x))


# ------------------------------------------------------------------ layers/utils.py

def test_structure_utils():
    P = collections.namedtuple("P", ["y", "x"])
    nest = {"b": [1, (2, 3)], "a": P(4, {"z": 5, "c": 6})}
    assert utils.flatten(nest) == [4, 6, 5, 1, 2, 3]          # dicts by sorted key, namedtuples by field
    assert utils.flatten("leaf") == ["leaf"] and utils.flatten([]) == []
    packed = utils.pack_sequence_as(nest, list("ABCDEF"))
    assert packed == {"b": ["D", ("E", "F")], "a": P("A", {"z": "C", "c": "B"})}
    assert list(packed) == ["b", "a"] and type(packed["a"]) is P
    doubled = utils.map_structure(lambda u, v: u + v, nest, nest)
    assert utils.flatten(doubled) == [8, 12, 10, 2, 4, 6]
    utils.assert_same_structure([1, (2,)], ["a", ("b",)])
    with pytest.raises(TypeError, match="don't have the same sequence type"):
        utils.assert_same_structure([1, 2], (1, 2))
    utils.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        utils.assert_same_structure([1, (2, 3)], [1, 4, 5])
    with pytest.raises(ValueError, match="don't have the same set of keys"):
        utils.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="the structure has 2 leaves but flat_sequence has 3 items"):
        utils.pack_sequence_as([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="single leaf but flat_sequence has 2 items"):
        utils.pack_sequence_as(1, [1, 2])


# ------------------------------------------------------------------ a tiny model learns

@pytest.mark.parametrize("cell_cls", [L.GRUCell, L.LSTMCell])
def test_tiny_model_learns(cell_cls):
    """label = whether the first feature sums to > 0 over a sequence's valid steps: needs the masked final state."""
    rng = np.random.RandomState(13)
    n, seq = 256, 6
    xs = rng.randn(n, seq, 3).astype("float32")
    lens = rng.randint(1, seq + 1, n).astype("int64")
    labels = np.array([[xs[i, :lens[i], 0].sum() > 0] for i in range(n)], "int64")
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, seq, 3], dtype="float32")
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        label = fluid.data("label", shape=[None, 1], dtype="int64")
        _, final = L.rnn(cell_cls(16), x, sequence_length=lengths)
        h = final[0] if isinstance(final, list) else final
        logits = L.fc(h, size=2)
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        acc = L.accuracy(L.softmax(logits), label)
        fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    full = {"x": xs, "lengths": lens, "label": labels}
    first = exe.run(main.clone(for_test=True), feed=full, fetch_list=[loss], scope=scope)[0][0]
    for _ in range(25):
        for i in range(0, n, 64):
            exe.run(main, feed={"x": xs[i:i + 64], "lengths": lens[i:i + 64], "label": labels[i:i + 64]}, scope=scope)
    last, accuracy = exe.run(main.clone(for_test=True), feed=full, fetch_list=[loss, acc], scope=scope)
    assert last[0] < 0.5 * first and accuracy[0] > 0.9, (first, last, accuracy)
