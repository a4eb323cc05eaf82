"""while / while_grad (layers.While, layers.while_loop) against Python-unrolled loops: forward values, numeric
gradients in float64, data-dependent trip counts, nested loops, step scopes kept across runs, errors, profiler
events and GLOG lines."""
import contextlib
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import layers

import op_test

RNG = np.random.RandomState(7)


def _run(main, startup, feed, fetch, scope=None):
    scope = scope or fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        return exe.run(main, feed=feed, fetch_list=fetch), exe, scope


def _numeric_grad(exe, main, feed, name, loss, scope, delta=1e-6):
    base = feed[name]
    grad = np.zeros_like(base)
    flat = grad.reshape(-1)
    for k in range(base.size):
        vals = []
        for sign in (1, -1):
            f = dict(feed)
            p = base.copy().reshape(-1)
            p[k] += sign * delta
            f[name] = p.reshape(base.shape)
            with fluid.scope_guard(scope):
                vals.append(float(np.asarray(exe.run(main, feed=f, fetch_list=[loss])[0]).sum()))
        flat[k] = (vals[0] - vals[1]) / (2 * delta)
    return grad


@contextlib.contextmanager
def _counted_loop(n, is_test=False):
    """The body of a While over n iterations (n: an int64 [1] Variable); yields the counter, and appends
    increment(i) and the condition update when the body closes."""
    i = layers.fill_constant([1], "int64", 0)
    cond = layers.less_than(i, n)
    loop = layers.While(cond, is_test=is_test)
    with loop.block():
        yield i
        layers.increment(i, in_place=True)
        layers.less_than(i, n, cond=cond)


def _check_loss_and_gradients(main, startup, feed, loss, grads, names, reference):
    """The loss against reference(**feed), and each gradient against central differences."""
    outs, exe, scope = _run(main, startup, feed, [loss] + grads)
    np.testing.assert_allclose(outs[0], reference(**feed), rtol=1e-12)
    for name, analytic in zip(names, outs[1:]):
        np.testing.assert_allclose(analytic, _numeric_grad(exe, main, feed, name, loss, scope), rtol=1e-6, atol=1e-9,
                                   err_msg="gradient of " + name)


def _tanh_loop(steps_from_data=False, is_test=False):
    """h <- tanh(h @ w + b) for n iterations; loss = mean(h * h)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float64")
        w = fluid.data("w", [4, 4], "float64")
        b = fluid.data("b", [4], "float64")
        for v in (x, w, b):
            v.stop_gradient = False
        if steps_from_data:
            n = fluid.data("n", [1], "int64")
        else:
            n = layers.fill_constant([1], "int64", 4)
        h = layers.assign(x)
        with _counted_loop(n, is_test=is_test):
            z = layers.elementwise_add(layers.matmul(h, w), b)
            layers.assign(layers.tanh(z), h)
        loss = layers.reduce_mean(layers.elementwise_mul(h, h))
    return main, startup, loss, (x, w, b)


def _tanh_loop_numpy(x, w, b, n):
    h = x
    for _ in range(n):
        h = np.tanh(h @ w + b)
    return np.mean(h * h)


def _feed(n=None):
    f = {"x": RNG.randn(3, 4), "w": RNG.randn(4, 4) * 0.5, "b": RNG.randn(4) * 0.1}
    if n is not None:
        f["n"] = np.array([n], dtype="int64")
    return f


def test_forward_matches_the_unrolled_loop():
    main, startup, loss, _ = _tanh_loop()
    feed = _feed()
    (out,), _, _ = _run(main, startup, feed, [loss])
    np.testing.assert_allclose(out, _tanh_loop_numpy(feed["x"], feed["w"], feed["b"], 4), rtol=1e-12)
    op_test.record_checked("output", "while")


def test_is_test_loop_gives_the_same_values():
    main, startup, loss, _ = _tanh_loop(is_test=True)
    feed = _feed()
    (out,), _, _ = _run(main, startup, feed, [loss])
    np.testing.assert_allclose(out, _tanh_loop_numpy(feed["x"], feed["w"], feed["b"], 4), rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_gradients_match_central_differences_for_data_dependent_trip_counts(n):
    main, startup, loss, inputs = _tanh_loop(steps_from_data=True)
    with fluid.program_guard(main, startup):
        grads = fluid.gradients([loss], list(inputs))
    feed = _feed(n)
    outs, exe, scope = _run(main, startup, feed, [loss] + grads)
    np.testing.assert_allclose(outs[0], _tanh_loop_numpy(feed["x"], feed["w"], feed["b"], n), rtol=1e-12)
    for name, analytic in zip(["x", "w", "b"], outs[1:]):
        numeric = _numeric_grad(exe, main, feed, name, loss, scope)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9, err_msg="gradient of " + name)
    op_test.record_checked("grad", "while")
    op_test.record_checked("output", "while_grad")  # its values are the gradients just compared


def test_step_scopes_are_reused_across_runs_of_changing_length():
    main, startup, loss, inputs = _tanh_loop(steps_from_data=True)
    with fluid.program_guard(main, startup):
        grads = fluid.gradients([loss], list(inputs))
    feed = _feed(3)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for n in (3, 5, 2, 5):
            feed["n"] = np.array([n], dtype="int64")
            outs = exe.run(main, feed=feed, fetch_list=[loss] + grads)
            np.testing.assert_allclose(outs[0], _tanh_loop_numpy(feed["x"], feed["w"], feed["b"], n), rtol=1e-12)
            numeric = _numeric_grad(exe, main, feed, "w", loss, scope)
            np.testing.assert_allclose(outs[2], numeric, rtol=1e-6, atol=1e-9)
        before = fluid.core.live_scopes()
        with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
            exe.run(main, feed=feed, fetch_list=[loss] + grads)
        summary = fluid.profiler.scope_summary()
        assert summary["created"] == 0, summary  # steady state: every step scope and grad scope is reused
        assert fluid.core.live_scopes() == before


def test_nested_while_matches_python():
    """for a in range(m): for c in range(k): h = tanh(h @ w) + x; then the same with the gradients."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        w = fluid.data("w", [3, 3], "float64")
        x.stop_gradient = w.stop_gradient = False
        m = layers.fill_constant([1], "int64", 3)
        k = layers.fill_constant([1], "int64", 2)
        a = layers.fill_constant([1], "int64", 0)
        h = layers.assign(x)
        outer_cond = layers.less_than(a, m)
        outer = layers.While(outer_cond)
        with outer.block():
            c = layers.fill_constant([1], "int64", 0)
            inner_cond = layers.less_than(c, k)
            inner = layers.While(inner_cond)
            with inner.block():
                layers.assign(layers.elementwise_add(layers.tanh(layers.matmul(h, w)), x), h)
                layers.increment(c, in_place=True)
                layers.less_than(c, k, cond=inner_cond)
            layers.increment(a, in_place=True)
            layers.less_than(a, m, cond=outer_cond)
        loss = layers.reduce_sum(layers.elementwise_mul(h, h))
        grads = fluid.gradients([loss], [x, w])
    feed = {"x": RNG.randn(2, 3) * 0.5, "w": RNG.randn(3, 3) * 0.5}

    def reference(x, w):
        h = x
        for _ in range(3):
            for _ in range(2):
                h = np.tanh(h @ w) + x
        return np.sum(h * h)

    _check_loss_and_gradients(main, startup, feed, loss, grads, ["x", "w"], reference)


def test_while_loop_functional_form():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = layers.fill_constant([1], "int64", 0)
        ten = layers.fill_constant([1], "int64", 10)
        s = layers.fill_constant([1], "float64", 1.0)

        def cond(i, s):
            return layers.less_than(i, ten)

        def body(i, s):
            return [layers.increment(i, in_place=False), layers.scale(s, scale=2.0)]

        i_out, s_out = layers.while_loop(cond, body, [i, s])
    (iv, sv), _, _ = _run(main, startup, {}, [i_out, s_out])
    assert int(iv[0]) == 10 and float(sv[0]) == 1024.0


def test_glog_level_3_logs_loop_entry_and_exit(capfd):
    main, startup, loss, _ = _tanh_loop()
    feed = _feed()
    with fluid.log.vlog_guard(level=3):
        _run(main, startup, feed, [loss])
    err = capfd.readouterr().err
    assert re.search(r"while\.cc:\d+\] while: enter the loop of block 1\n", err), err[-2000:]
    assert re.search(r"while\.cc:\d+\] while: exit the loop of block 1 after 4 iterations\n", err), err[-2000:]


def test_profiler_records_each_iteration_with_its_index():
    main, startup, loss, inputs = _tanh_loop()
    with fluid.program_guard(main, startup):
        grads = fluid.gradients([loss], list(inputs))
    feed = _feed()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
            exe.run(main, feed=feed, fetch_list=[loss] + grads)
    events = fluid.profiler.events()
    steps = [e for e in events if e["name"] == "while::step"]
    grad_steps = [e for e in events if e["name"] == "while_grad::step"]
    assert [e["args"] for e in steps] == ['"iteration":%d' % k for k in range(4)]
    assert [e["args"] for e in grad_steps] == ['"iteration":%d' % k for k in (3, 2, 1, 0)]
    # the body's ops run inside the step events
    ids = {events.index(e) for e in steps}
    assert sum(1 for e in events if e["name"] == "matmul" and e["parent"] in ids) == 4


def test_build_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = layers.fill_constant([1], "int64", 0)
        with pytest.raises(TypeError, match="While: 'cond' .* must be bool, got int64"):
            layers.While(i)
        two = layers.fill_constant([2], "bool", True)
        with pytest.raises(TypeError, match=r"condition expected shape as \[1\], but given shape as \[2\]"):
            layers.While(two)
        cond = layers.less_than(i, layers.fill_constant([1], "int64", 3))
        loop = layers.While(cond)
        with pytest.raises(ValueError, match="never writes the condition"):
            with loop.block():
                layers.increment(i, in_place=True)
        with pytest.raises(ValueError, match="only once"):
            with loop.block():
                pass
        with pytest.raises(TypeError, match="cond in while_loop should be callable"):
            layers.while_loop(None, lambda i: i, [i])
        with pytest.raises(ValueError, match="should not be empty"):
            layers.while_loop(lambda: cond, lambda: [], [])


def test_gradient_of_an_is_test_loop_is_an_error():
    main, startup, loss, inputs = _tanh_loop(is_test=True)
    with fluid.program_guard(main, startup):
        grads = fluid.gradients([loss], [inputs[1]])
    with pytest.raises(fluid.core.EnforceNotMet, match="while_grad: the While loop was built with is_test=True"):
        _run(main, startup, _feed(), [grads[0]])


def test_scope_summary_counts_loop_step_scopes():
    main, startup, loss, inputs = _tanh_loop()
    with fluid.program_guard(main, startup):
        grads = fluid.gradients([loss], list(inputs))
    feed = _feed()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
            exe.run(main, feed=feed, fetch_list=[loss] + grads)  # first run: 4 step scopes + their grad scopes
            exe.run(main, feed=feed, fetch_list=[loss] + grads)  # reused
        summary = fluid.profiler.scope_summary()
    assert summary["loop_iterations"] == 16 and summary["loop_scopes_created"] == 8, summary
    assert ("Loop step scopes: 16 iterations (While and StaticRNN steps, forward and backward), 8 step scopes "
            "created for them, the rest reused") in fluid.profiler.report()


def test_loop_over_tensor_arrays_matches_python_with_gradients():
    """h_t = tanh(x_t w + h_{t-1} u), x_t read from an array, h_t written to one; loss = sum of h_t^2 over t."""
    T = 4
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [T, 2, 3], "float64")
        w = fluid.data("w", [3, 3], "float64")
        u = fluid.data("u", [3, 3], "float64")
        for v in (x, w, u):
            v.stop_gradient = False
        steps = layers.create_array("float64")
        for t in range(T):
            xt = layers.reshape(layers.slice(x, axes=[0], starts=[t], ends=[t + 1]), [2, 3])
            layers.array_write(xt, layers.fill_constant([1], "int64", t), array=steps)
        outs = layers.create_array("float64")
        h = layers.fill_constant([2, 3], "float64", 0.0)
        h.stop_gradient = False  # as in Fluid, a constant's output is stop_gradient until told otherwise
        with _counted_loop(layers.fill_constant([1], "int64", T)) as i:
            xt = layers.array_read(steps, i)
            layers.assign(layers.tanh(layers.elementwise_add(layers.matmul(xt, w), layers.matmul(h, u))), h)
            layers.array_write(h, i, array=outs)
        hs = [layers.array_read(outs, layers.fill_constant([1], "int64", t)) for t in range(T)]
        loss = layers.reduce_sum(layers.elementwise_mul(layers.concat(hs, axis=0), layers.concat(hs, axis=0)))
        grads = fluid.gradients([loss], [x, w, u])
    feed = {"x": RNG.randn(T, 2, 3), "w": RNG.randn(3, 3) * 0.5, "u": RNG.randn(3, 3) * 0.5}

    def reference(x, w, u):
        h, total = np.zeros((2, 3)), 0.0
        for t in range(T):
            h = np.tanh(x[t] @ w + h @ u)
            total += np.sum(h * h)
        return total

    _check_loss_and_gradients(main, startup, feed, loss, grads, ["x", "w", "u"], reference)


def test_branch_inside_a_loop_matches_python_with_gradients():
    """for t in range(4): h = tanh(h w) if t is even else h * 0.5 + x; loss = sum(h^2) (layers.cond in a While)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        w = fluid.data("w", [3, 3], "float64")
        x.stop_gradient = w.stop_gradient = False
        two = layers.fill_constant([1], "int64", 2)
        zero = layers.fill_constant([1], "int64", 0)
        h = layers.assign(x)
        with _counted_loop(layers.fill_constant([1], "int64", 4)) as i:
            even = layers.logical_or(layers.equal(i, zero), layers.equal(i, two))
            new_h = layers.cond(even, lambda: layers.tanh(layers.matmul(h, w)),
                                lambda: layers.elementwise_add(layers.scale(h, 0.5), x))
            layers.assign(new_h, h)
        loss = layers.reduce_sum(layers.elementwise_mul(h, h))
        grads = fluid.gradients([loss], [x, w])
    feed = {"x": RNG.randn(2, 3), "w": RNG.randn(3, 3) * 0.5}

    def reference(x, w):
        h = x
        for t in range(4):
            h = np.tanh(h @ w) if t % 2 == 0 else h * 0.5 + x
        return np.sum(h * h)

    _check_loss_and_gradients(main, startup, feed, loss, grads, ["x", "w"], reference)


def test_inner_loop_reads_the_outer_iterations_value():
    """for a in range(3): s = 0; (for c in range(2): s = s + tanh(h w)); h = 0.5 s + x -- the inner loop only reads
    h, which the outer body overwrites after it: its gradient must see each outer iteration's h."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        w = fluid.data("w", [3, 3], "float64")
        x.stop_gradient = w.stop_gradient = False
        m = layers.fill_constant([1], "int64", 3)
        k = layers.fill_constant([1], "int64", 2)
        h = layers.assign(x)
        with _counted_loop(m):
            s = layers.fill_constant([2, 3], "float64", 0.0)
            s.stop_gradient = False
            with _counted_loop(k):
                layers.assign(layers.elementwise_add(s, layers.tanh(layers.matmul(h, w))), s)
            layers.assign(layers.elementwise_add(layers.scale(s, 0.5), x), h)
        loss = layers.reduce_sum(layers.elementwise_mul(h, h))
        grads = fluid.gradients([loss], [x, w])
    feed = {"x": RNG.randn(2, 3), "w": RNG.randn(3, 3) * 0.5}

    def reference(x, w):
        h = x
        for _ in range(3):
            s = np.zeros((2, 3))
            for _ in range(2):
                s = s + np.tanh(h @ w)
            h = 0.5 * s + x
        return np.sum(h * h)

    _check_loss_and_gradients(main, startup, feed, loss, grads, ["x", "w"], reference)


def test_a_crafted_body_that_never_writes_the_condition_is_refused_at_run_time():
    """layers.While refuses such a body when it is built; a program edited afterwards must not hang the executor."""
    main, startup, loss, _ = _tanh_loop()
    body = main.block(1)
    for idx in reversed(range(len(body.ops))):
        if body.ops[idx].type == "less_than":
            body._remove_op(idx)
    cond = next(op for op in main.global_block().ops if op.type == "while").input("Condition")[0]
    with pytest.raises(fluid.core.EnforceNotMet, match="while: the body \\(block 1\\) never writes the condition "
                                                       "'%s', so the loop would never end" % re.escape(cond)):
        _run(main, startup, _feed(), [loss])
