"""layers.DynamicRNN against a per-sequence Python RNN: forward values in the input's order and LoD, numeric
gradients in float64, memories from an initial state (need_reorder) or a constant, static inputs, build errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import layers

RNG = np.random.RandomState(3)
D, H = 3, 4


def _rnn_numpy(x, lens, w, u, b, h0=None, static=None, v=None):
    """h_t = tanh(x_t w + h_{t-1} u + b [+ static v]) per sequence; returns the stacked h rows (input order)."""
    out, start = [], 0
    for s, n in enumerate(lens):
        h = np.zeros(H) if h0 is None else h0[s]
        for t in range(n):
            z = x[start + t] @ w + h @ u + b
            if static is not None:
                z = z + static[s] @ v
            h = np.tanh(z)
            out.append(h)
        start += n
    return np.array(out).reshape(-1, H)


def _build(with_init=False, with_static=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, D], "float64", lod_level=1)
        w = fluid.data("w", [D, H], "float64")
        u = fluid.data("u", [H, H], "float64")
        b = fluid.data("b", [H], "float64")
        feeds = [x, w, u, b]
        if with_init:
            h0 = fluid.data("h0", [None, H], "float64")
            feeds.append(h0)
        if with_static:
            st = fluid.data("st", [None, D], "float64")
            v = fluid.data("v", [D, H], "float64")
            feeds += [st, v]
        for f in feeds:
            f.stop_gradient = False
        drnn = layers.DynamicRNN()
        with drnn.block():
            xt = drnn.step_input(x)
            prev = drnn.memory(init=h0, need_reorder=True) if with_init else drnn.memory(shape=[H], dtype="float64")
            z = layers.elementwise_add(layers.elementwise_add(layers.matmul(xt, w), layers.matmul(prev, u)), b)
            if with_static:
                z = layers.elementwise_add(z, layers.matmul(drnn.static_input(st), v))
            h = layers.tanh(z)
            drnn.update_memory(prev, h)
            drnn.output(h)
        out = drnn()
        loss = layers.reduce_sum(layers.elementwise_mul(out, out))
        grads = fluid.gradients([loss], feeds)
    return main, startup, out, loss, grads, [f.name for f in feeds]


def _feed(lens, with_init=False, with_static=False):
    total = sum(lens)
    feed = {"x": fluid.create_lod_tensor(RNG.randn(total, D), [lens], fluid.CPUPlace()),
            "w": RNG.randn(D, H) * 0.5, "u": RNG.randn(H, H) * 0.5, "b": RNG.randn(H) * 0.1}
    if with_init:
        feed["h0"] = RNG.randn(len(lens), H) * 0.5
    if with_static:
        feed["st"] = RNG.randn(len(lens), D)
        feed["v"] = RNG.randn(D, H) * 0.5
    return feed


def _reference(feed, lens):
    x = np.array(feed["x"])
    return _rnn_numpy(x, lens, feed["w"], feed["u"], feed["b"], feed.get("h0"), feed.get("st"), feed.get("v"))


def _numeric(exe, main, feed, name, loss, lens, delta=1e-6):
    base = np.array(feed[name], dtype="float64")
    grad = np.zeros_like(base).reshape(-1)
    for k in range(base.size):
        vals = []
        for sign in (1, -1):
            p = base.copy().reshape(-1)
            p[k] += sign * delta
            f = dict(feed)
            p = p.reshape(base.shape)
            f[name] = fluid.create_lod_tensor(p, [lens], fluid.CPUPlace()) if name == "x" else p
            vals.append(float(exe.run(main, feed=f, fetch_list=[loss])[0][0]))
        grad[k] = (vals[0] - vals[1]) / (2 * delta)
    return grad.reshape(base.shape)


@pytest.mark.parametrize("lens", [[3, 1, 4], [2, 2], [5], [1, 3, 3, 2]])
@pytest.mark.parametrize("with_init,with_static", [(False, False), (True, False), (False, True), (True, True)])
def test_dynamic_rnn_matches_per_sequence_rnn(lens, with_init, with_static):
    main, startup, out, loss, grads, names = _build(with_init, with_static)
    feed = _feed(lens, with_init, with_static)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        res = exe.run(main, feed=feed, fetch_list=[out, loss] + grads, return_numpy=False)
        np.testing.assert_allclose(np.array(res[0]), _reference(feed, lens), rtol=1e-10, atol=1e-12)
        assert res[0].recursive_sequence_lengths() == [lens]  # outputs back in the input's order and LoD
        for name, g in zip(names, res[2:]):
            np.testing.assert_allclose(np.array(g), _numeric(exe, main, feed, name, loss, lens), rtol=1e-6, atol=1e-8,
                                       err_msg="gradient of " + name)


def test_dynamic_rnn_runs_again_with_other_lengths():
    main, startup, out, loss, grads, names = _build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for lens in ([2, 5, 1], [1], [3, 3, 3, 3], [6, 1]):
            feed = _feed(lens)
            got = exe.run(main, feed=feed, fetch_list=[out], return_numpy=False)[0]
            np.testing.assert_allclose(np.array(got), _reference(feed, lens), rtol=1e-10, atol=1e-12)


def test_dynamic_rnn_build_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, D], "float32", lod_level=1)
        drnn = layers.DynamicRNN()
        with pytest.raises(ValueError, match="step_input can only be invoked inside rnn block"):
            drnn.step_input(x)
        with pytest.raises(ValueError, match="can only be visited outside the rnn block"):
            drnn()
        with drnn.block():
            with pytest.raises(ValueError, match="step_input should be invoked before memory"):
                drnn.memory(shape=[H])
            with pytest.raises(RuntimeError, match="static_input\\(\\) must be called after step_input"):
                drnn.static_input(x)
            xt = drnn.step_input(x)
            with pytest.raises(ValueError, match="Please invoke memory before update_memory"):
                drnn.update_memory(xt, xt)
            drnn.output(xt)
        with pytest.raises(ValueError, match="can only be invoke once"):
            with drnn.block():
                pass
