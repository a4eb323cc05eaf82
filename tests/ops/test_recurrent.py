"""recurrent and rnn_memory_helper (kernels/recurrent.cc). StaticRNN: forward against numpy, forward and
gradients equal the same network unrolled by hand, numeric gradients, memory init= vs shape=, misuse errors,
step-scope reuse, and training to high accuracy; rnn_memory_helper on its own: identity, gradient."""
import gc

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked

T, B, D, H = 4, 3, 5, 6


def _cell(x_t, h_prev, act="tanh"):
    return fluid.layers.fc(input=[x_t, h_prev], size=H, act=act,
                           param_attr=[fluid.ParamAttr(name="w_x"), fluid.ParamAttr(name="w_h")],
                           bias_attr=fluid.ParamAttr(name="b"))


def _rnn_program(init_from_var=False, with_grads=True):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[T, B, D], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        h0 = fluid.layers.data(name="h0", shape=[B, H], dtype="float64", append_batch_size=False)
        h0.stop_gradient = False
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(init=h0) if init_from_var else rnn.memory(shape=[-1, H], batch_ref=x_t)
            h = _cell(x_t, h_prev)
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        out = rnn()
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, out))
        grads = fluid.gradients([loss], [x, h0] if init_from_var else [x]) if with_grads else []
    return main, startup, out, loss, grads


def _unrolled_program():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xs = []
        for t in range(T):
            x = fluid.layers.data(name="x%d" % t, shape=[B, D], dtype="float64", append_batch_size=False)
            x.stop_gradient = False
            xs.append(x)
        h0 = fluid.layers.data(name="h0", shape=[B, H], dtype="float64", append_batch_size=False)
        h0.stop_gradient = False
        h, outs = h0, []
        for t in range(T):
            h = _cell(xs[t], h)
            outs.append(h)
        loss = fluid.layers.sums([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(o, o)) for o in outs])
        grads = fluid.gradients([loss], xs + [h0, main.global_block().var("w_x"), main.global_block().var("w_h"),
                                              main.global_block().var("b")])
    return main, startup, outs, loss, grads


def _params(scope):
    return {n: np.array(scope.find_var(n).get_tensor()) for n in ("w_x", "w_h", "b")}


@pytest.fixture
def programs_as_written(monkeypatch):
    """For tests that count the step block's ops or temporaries as written (its sums, its intermediates):
    elementwise fusion (on by default) would turn them into fused_elementwise ops."""
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")


def test_forward_and_gradients_equal_unrolled_network():
    rng = np.random.RandomState(0)
    xv, h0v = rng.randn(T, B, D), rng.randn(B, H) * 0.5
    main, startup, out, loss, (gx, gh0) = _rnn_program(init_from_var=True)
    with fluid.program_guard(main, startup):
        gparams = fluid.gradients([loss], [main.global_block().var(n) for n in ("w_x", "w_h", "b")])
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    r = exe.run(main, feed={"x": xv, "h0": h0v}, fetch_list=[out, loss, gx, gh0] + gparams, scope=scope)

    umain, ustartup, uouts, uloss, ugrads = _unrolled_program()
    uscope = fluid.Scope()
    exe.run(ustartup, scope=uscope)
    for n, v in _params(scope).items():  # same parameters
        uscope.var(n).get_tensor().set(v)
    feed = {"x%d" % t: xv[t] for t in range(T)}
    feed["h0"] = h0v
    u = exe.run(umain, feed=feed, fetch_list=uouts + [uloss] + ugrads, scope=uscope)
    np.testing.assert_allclose(r[0], np.stack(u[:T]), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(r[1], u[T], rtol=1e-6)
    np.testing.assert_allclose(r[2], np.stack(u[T + 1:2 * T + 1]), rtol=1e-6, atol=1e-12)  # x@GRAD per step
    np.testing.assert_allclose(r[3], u[2 * T + 1], rtol=1e-6, atol=1e-12)                 # h0@GRAD
    for got, want in zip(r[4:], u[2 * T + 2:]):                                           # parameter grads
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("init_from_var", [False, True], ids=["boot_zeros", "init_var"])
def test_forward_matches_numpy(init_from_var):
    """h_t = tanh(x_t w_x + h_{t-1} w_h + b) over T steps in numpy, with the parameters the startup drew."""
    rng = np.random.RandomState(6)
    xv, h0v = rng.randn(T, B, D), rng.randn(B, H) * 0.5
    main, startup, out, loss, _ = _rnn_program(init_from_var=init_from_var, with_grads=False)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": xv, "h0": h0v} if init_from_var else {"x": xv}
    got, got_loss = exe.run(main, feed=feed, fetch_list=[out, loss], scope=scope)
    p = _params(scope)
    h, want = (h0v if init_from_var else np.zeros((B, H))), []
    for t in range(T):
        h = np.tanh(xv[t] @ p["w_x"] + h @ p["w_h"] + p["b"])
        want.append(h)
    want = np.stack(want)
    assert got.shape == (T, B, H)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_loss, [(want * want).sum()], rtol=1e-12)
    record_checked("output", "recurrent")


def test_recurrent_numeric_gradient():
    rng = np.random.RandomState(1)
    xv = rng.randn(T, B, D)
    main, startup, out, loss, (gx,) = _rnn_program()
    with fluid.program_guard(main, startup):
        gw, = fluid.gradients([loss], [main.global_block().var("w_h")])
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    analytic_x, analytic_w = exe.run(main, feed={"x": xv}, fetch_list=[gx, gw], scope=scope)

    def f():
        return float(exe.run(main, feed={"x": xv}, fetch_list=[loss], scope=scope)[0][0])

    eps = 1e-6
    for idx in [(0, 0, 0), (2, 1, 3), (3, 2, 4)]:
        orig = xv[idx]
        xv[idx] = orig + eps
        plus = f()
        xv[idx] = orig - eps
        minus = f()
        xv[idx] = orig
        assert abs((plus - minus) / (2 * eps) - analytic_x[idx]) < 1e-6 * max(1, abs(analytic_x[idx]))
    w = scope.find_var("w_h").get_tensor()
    wv = np.array(w)
    for idx in [(0, 0), (3, 5), (5, 1)]:
        orig = wv[idx]
        wv[idx] = orig + eps
        w.set(wv)
        plus = f()
        wv[idx] = orig - eps
        w.set(wv)
        minus = f()
        wv[idx] = orig
        w.set(wv)
        assert abs((plus - minus) / (2 * eps) - analytic_w[idx]) < 1e-6 * max(1, abs(analytic_w[idx]))
    record_checked("grad", "recurrent")


def test_memory_init_var_equals_shape_boot_with_zeros():
    xv = np.random.RandomState(2).randn(T, B, D)
    exe = fluid.Executor(fluid.CPUPlace())
    results = []
    for init_from_var in (False, True):
        main, startup, out, loss, _ = _rnn_program(init_from_var=init_from_var)
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        feed = {"x": xv}
        if init_from_var:
            feed["h0"] = np.zeros((B, H))
        results.append(exe.run(main, feed=feed, fetch_list=[out], scope=scope)[0])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_step_scopes_are_reused_across_runs():
    xv = np.random.RandomState(3).randn(T, B, D)
    main, startup, out, loss, (gx,) = _rnn_program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(5):
        exe.run(main, feed={"x": xv}, fetch_list=[loss, gx], scope=scope)
    gc.collect()  # the counters are process-wide: let earlier tests' garbage go first
    scopes = fluid.core.live_scopes()
    mem = fluid.core.memory_stats()["bytes_in_use"]
    for _ in range(100):
        exe.run(main, feed={"x": xv}, fetch_list=[loss, gx], scope=scope)
    gc.collect()
    assert fluid.core.live_scopes() == scopes
    assert fluid.core.memory_stats()["bytes_in_use"] == mem


def _param_grads_of(losses_of_out, xv, h0v):
    """For each f in losses_of_out (a function of the StaticRNN's output), the gradients of f(out) w.r.t. w_x, w_h
    and b, all from one program: a fluid.gradients call per loss (the second one's grad block names its
    gradients '@GRAD_0')."""
    main, startup, out, _, _ = _rnn_program(init_from_var=True, with_grads=False)
    with fluid.program_guard(main, startup), fluid.unique_name.guard("loss_"):  # names apart from the program's
        params = [main.global_block().var(n) for n in ("w_x", "w_h", "b")]
        grads = [fluid.gradients([f(out)], params) for f in losses_of_out]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    fetched = exe.run(main, feed={"x": xv, "h0": h0v}, fetch_list=[g for gs in grads for g in gs], scope=scope)
    return [fetched[3 * i:3 * i + 3] for i in range(len(losses_of_out))]


def test_a_second_gradients_call_gets_its_own_step_gradients():
    # The second recurrent_grad runs in the same step scopes as the first; its step gradients are the ones its own
    # grad block computes ('w_x@GRAD_0', ...), not what the first left under 'w_x@GRAD'.
    rng = np.random.RandomState(9)
    xv, h0v = rng.randn(T, B, D), rng.randn(B, H) * 0.5
    square = lambda out: fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, out))  # noqa: E731
    cube = lambda out: fluid.layers.reduce_sum(fluid.layers.pow(out, 3.0))  # noqa: E731
    both = _param_grads_of([square, cube], xv, h0v)
    alone = [_param_grads_of([f], xv, h0v)[0] for f in (square, cube)]
    for got, want in zip(both, alone):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert np.abs(both[0][0] - both[1][0]).max() > 1e-3  # two different gradients


def _step_memory(monkeypatch, eager, train=True, steps=8, batch=64, hidden=256):
    """(peak tensor bytes of a steady-state run, its results) of a StaticRNN tanh cell whose step tensors are
    [batch, hidden] float64, training or forward only, with eager deletion on or off
    (FLAGS_eager_delete_tensor_gb=-1)."""
    if eager:
        monkeypatch.delenv("FLAGS_eager_delete_tensor_gb", raising=False)
    else:
        monkeypatch.setenv("FLAGS_eager_delete_tensor_gb", "-1")
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[steps, batch, hidden], dtype="float64", append_batch_size=False)
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
            h = fluid.layers.fc(input=[x_t, h_prev], size=hidden, act="tanh")
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        loss = fluid.layers.mean(rnn())
        params_grads = fluid.backward.append_backward(loss) if train else []
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(1).randn(steps, batch, hidden)}
    fetch = [loss] + [g for _, g in params_grads]
    exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    fluid.core.reset_peak_memory(fluid.CPUPlace())
    results = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    return fluid.core.memory_stats()["peak_bytes"], results


def test_backward_releases_each_steps_gradients(monkeypatch):
    # With eager deletion (the default) the grad block's variables are released after their last use in each step,
    # so the steps reuse one step's gradient buffers; FLAGS_eager_delete_tensor_gb=-1 keeps every step's. Same results.
    steps, step_tensor = 8, 64 * 256 * 8
    on, on_results = _step_memory(monkeypatch, True, steps=steps)
    off, off_results = _step_memory(monkeypatch, False, steps=steps)
    for a, b in zip(on_results, off_results):
        np.testing.assert_array_equal(a, b)
    # each step's grad block makes at least 4 [64, 256] gradients (tanh's, the sum of the fc's two products, the
    # two products' and the memory's): kept by all 8 steps without eager deletion, by one or two steps with it
    assert off - on >= (steps - 2) * 4 * step_tensor, (on, off)


@pytest.mark.usefixtures("programs_as_written")
def test_forward_releases_what_no_gradient_reads(monkeypatch):
    # Forward only: the fc's two products, their sum and the biased sum are released after their last use in each
    # step (nothing reads them later); the new memory (tanh) is kept, the next step reads it.
    steps, step_tensor = 8, 64 * 256 * 8
    on, on_results = _step_memory(monkeypatch, True, train=False, steps=steps)
    off, off_results = _step_memory(monkeypatch, False, train=False, steps=steps)
    np.testing.assert_array_equal(on_results[0], off_results[0])
    assert off - on >= (steps - 2) * 4 * step_tensor, (on, off)


def test_misuse_is_reported_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="x", shape=[T, B, D], dtype="float32", append_batch_size=False)
        rnn = fluid.layers.StaticRNN()
        with pytest.raises(ValueError, match="inside `with rnn.step\\(\\):`"):
            rnn.step_input(x)
        with pytest.raises(ValueError, match="never updated"):
            with rnn.step():
                x_t = rnn.step_input(x)
                rnn.memory(shape=[-1, H], batch_ref=x_t)
                rnn.step_output(x_t)
        rnn2 = fluid.layers.StaticRNN()
        with pytest.raises(ValueError, match="shape and batch_ref"):
            with rnn2.step():
                rnn2.step_input(x)
                rnn2.memory(shape=[-1, H])
        rnn3 = fluid.layers.StaticRNN()
        y = fluid.layers.data(name="y", shape=[T + 1, B, D], dtype="float32", append_batch_size=False)
        with pytest.raises(ValueError, match="same length"):
            with rnn3.step():
                rnn3.step_input(x)
                rnn3.step_input(y)


@pytest.mark.usefixtures("programs_as_written")
def test_profiler_shows_step_events_and_a_sum_per_parameter_per_step():
    xv = np.random.RandomState(4).randn(T, B, D)
    main, startup, out, loss, _ = _rnn_program(with_grads=False)
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": xv}, scope=scope)
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed={"x": xv}, scope=scope)
    evs = fluid.profiler.events()
    steps = [e for e in evs if e["name"] == "recurrent::step"]
    assert len(steps) == T and all(evs[e["parent"]]["name"] == "recurrent" for e in steps)
    grad_steps = [e for e in evs if e["name"] == "recurrent_grad::step"]
    assert len(grad_steps) == T
    # parameter gradients: the bias's added into the outer gradient after each step, nested in the step's event; the
    # two weights' mul_grad adds into the outer gradient itself after the first step walked (grad_accumulate.h), so
    # they have a sum only then
    agg = [e for e in evs if e["name"] == "sum" and evs[e["parent"]]["name"] == "recurrent_grad::step"
           and evs[evs[e["parent"]]["parent"]]["name"] == "recurrent_grad"]
    assert len(agg) == T + 2 + T  # and the grad block's own sum op per step (h feeds two ops)
    assert fluid.profiler.scope_summary()["created"] == 0  # steady state: no scopes created


def test_tanh_rnn_learns_a_sequence_task():
    # label = sign of the sum over time of the first feature: needs memory across steps
    rng = np.random.RandomState(5)
    n, seq = 256, 6
    xs = rng.randn(seq, n, 4).astype("float32")
    labels = (xs[:, :, 0].sum(0) > 0).astype("int64").reshape(n, 1)
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[seq, -1, 4], dtype="float32", append_batch_size=False)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, 16], batch_ref=x_t)
            h = fluid.layers.fc(input=[x_t, h_prev], size=16, act="tanh")
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        hidden = rnn()
        last = fluid.layers.reshape(fluid.layers.split(hidden, num_or_sections=seq, dim=0)[-1], [-1, 16])
        logits = fluid.layers.fc(input=last, size=2)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for _epoch in range(60):
        for i in range(0, n, 64):
            exe.run(main, feed={"x": xs[:, i:i + 64], "label": labels[i:i + 64]}, scope=scope)
    a = exe.run(main, feed={"x": xs, "label": labels}, fetch_list=[acc], scope=scope)[0][0]
    assert a > 0.9


# ------------------------------------------------------------------ Fluid mode (a comparison switch)

@pytest.fixture
def set_fluid_mode():
    """core.set_recurrent_fluid_mode, switched off again after the test (the switch is process-wide)."""
    assert not fluid.core.get_recurrent_fluid_mode()  # off by default
    yield fluid.core.set_recurrent_fluid_mode
    fluid.core.set_recurrent_fluid_mode(False)


def _profiled_rnn_training():
    """A run function for the StaticRNN's forward + backward (every gradient fetched) in one scope. Each call
    runs once under the profiler and returns (results, counts, scopes): counts maps (enclosing recurrent op,
    event name) to the number of events; scopes is the profiler's scope summary."""
    main, startup, out, loss, _ = _rnn_program(init_from_var=True, with_grads=False)
    with fluid.program_guard(main, startup):
        params_grads = fluid.backward.append_backward(loss)
    assert sorted(p.name for p, _ in params_grads) == ["b", "w_h", "w_x"]
    fetch = [out, loss, "x@GRAD", "h0@GRAD"] + [g for _, g in params_grads]
    rng = np.random.RandomState(4)
    feed = {"x": rng.randn(T, B, D), "h0": rng.randn(B, H)}
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=fetch, scope=scope)  # the step scopes are made and prepared here

    def run():
        with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
            results = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        evs = fluid.profiler.events()
        counts = {}
        for e in evs:
            p = e["parent"]
            while p >= 0 and evs[p]["name"] not in ("recurrent", "recurrent_grad"):
                p = evs[p]["parent"]
            key = (evs[p]["name"] if p >= 0 else None, e["name"])
            counts[key] = counts.get(key, 0) + 1
        return results, counts, fluid.profiler.scope_summary()
    return run


def test_fluid_mode_switch_reads_back(set_fluid_mode):
    set_fluid_mode(True)
    assert fluid.core.get_recurrent_fluid_mode()
    set_fluid_mode(False)
    assert not fluid.core.get_recurrent_fluid_mode()


@pytest.mark.usefixtures("programs_as_written")
def test_fluid_mode_shows_fluids_costs_in_the_profiler_with_the_same_results(set_fluid_mode):
    run = _profiled_rnn_training()
    params, memories = 3, 1
    helpers = 2  # rnn_memory_helper ops per step (the memory update and the step output), and as many grads
    default, default_counts, default_scopes = run()
    set_fluid_mode(True)
    fluid_res, fluid_counts, fluid_scopes = run()
    set_fluid_mode(False)
    back, back_counts, back_scopes = run()

    def fig(counts, op, name):
        return counts.get((op, name), 0)

    # Default (steady state): no scope made or deleted, no step block prepared; copies only into the
    # [T, ...] output (forward), the x@GRAD slices and h0@GRAD (backward: the first step's parameter gradient
    # becomes the outer one, no copy); the grad block's own sum op per step plus a sum per parameter per step.
    for counts, scopes in ((default_counts, default_scopes), (back_counts, back_scopes)):
        assert scopes["created"] == scopes["deleted"] == 0
        assert fig(counts, "recurrent", "recurrent::prepare_step") == 0
        assert fig(counts, "recurrent_grad", "recurrent::prepare_step") == 0
        assert fig(counts, "recurrent", "memcpy:CPU->CPU") == T
        assert fig(counts, "recurrent_grad", "memcpy:CPU->CPU") == T + 1
        assert fig(counts, "recurrent_grad", "sum") == T + T + 2  # the bias per step, the mul_grad weights once
    # Fluid mode: T new step scopes per run (the old ones deleted), each step block prepared again by both
    # ops; memories copied between steps and every rnn_memory_helper(_grad) a copy (but the grad of the
    # last step's memory, which is zeros); a sum per parameter per step (the first walked is a copy).
    assert fluid_scopes["created"] == fluid_scopes["deleted"] == T
    assert fig(fluid_counts, "recurrent", "recurrent::prepare_step") == T
    assert fig(fluid_counts, "recurrent_grad", "recurrent::prepare_step") == T
    assert fig(fluid_counts, "recurrent", "memcpy:CPU->CPU") == T + memories * (T - 1) + helpers * T
    assert fig(fluid_counts, "recurrent_grad", "memcpy:CPU->CPU") == T + 1 + (helpers * T - memories) + params
    assert fig(fluid_counts, "recurrent_grad", "sum") == T + params * T
    # Same ops otherwise.
    for op in ("mul", "tanh", "rnn_memory_helper", "recurrent::step"):
        assert fig(fluid_counts, "recurrent", op) == fig(default_counts, "recurrent", op) > 0
    for op in ("mul_grad", "tanh_grad", "rnn_memory_helper_grad", "recurrent_grad::step"):
        assert fig(fluid_counts, "recurrent_grad", op) == fig(default_counts, "recurrent_grad", op) > 0

    # The same results, to the bit: both add the steps' parameter gradients in the same order.
    for d, f, b in zip(default, fluid_res, back):
        np.testing.assert_array_equal(d, f)
        np.testing.assert_array_equal(d, b)


# ------------------------------------------------------------------ rnn_memory_helper

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("shape", [(3, 4), (1,), (2, 1, 3)])
def test_rnn_memory_helper_is_identity(dtype, shape):
    x = (np.random.RandomState(7).uniform(-5, 5, shape)).astype(dtype)
    OpTest("rnn_memory_helper", {"X": x}, {"Out": x}, {"dtype": int(fluid.framework.convert_np_dtype_to_dtype_(dtype))}
           ).check_output(atol=0, rtol=0)


def test_rnn_memory_helper_grad():
    x = np.random.RandomState(8).uniform(-1, 1, (3, 4))
    OpTest("rnn_memory_helper", {"X": x}, {"Out": x}).check_grad(["X"], "Out")
