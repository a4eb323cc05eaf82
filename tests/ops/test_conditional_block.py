"""conditional_block and conditional_block_grad (kernels/conditional_block.cc): the block runs iff its scalar Cond is
true (or, without is_scalar_condition, iff every Input tensor is non-empty), in one scope kept across runs; forward
values and float64 gradients against numpy and central differences over several runs of one program with changing
conditions (the kept scope never leaks a previous run's values), zero gradients for a branch that did not run,
nesting, profiler events, GLOG lines, and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.layers.branches import ConditionalBlock
from op_test import record_checked

L = fluid.layers
N, D, H = 4, 3, 2


def _switch_program():
    """y = tanh(x @ w) if p else x * x (two conditional blocks on p and not p writing one outer y), the loss
    sum(y * v) and its gradients with respect to x and w."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[N, D], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        v = L.data(name="v", shape=[N, D], dtype="float64", append_batch_size=False)
        w = L.create_parameter(shape=[D, D], dtype="float64", name="w")
        y = main.global_block().create_var(name="y", dtype="float64", shape=[N, D])
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(L.tanh(L.matmul(x, w)), y)
        with ConditionalBlock([L.logical_not(p)], is_scalar_condition=True).block():
            L.assign(L.elementwise_mul(x, x), y)
        loss = L.reduce_sum(L.elementwise_mul(y, v))
        gx, gw = fluid.gradients([loss], [x, w])
    return main, startup, y, loss, gx, gw


def _ref(xv, wv, vv, p):
    y = np.tanh(xv @ wv) if p else xv * xv
    if p:
        gz = vv * (1 - y * y)
        return y, (y * vv).sum(), gz @ wv.T, xv.T @ gz
    return y, (y * vv).sum(), 2 * xv * vv, np.zeros_like(wv)


def _setup(program=_switch_program):
    main, startup, *fetch = program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return main, exe, scope, fetch


def test_the_block_runs_iff_cond_is_true_over_runs_of_one_program():
    rng = np.random.RandomState(0)
    main, exe, scope, (y, loss, gx, gw) = _setup()
    wv = np.array(scope.find_var("w").get_tensor())
    for p in [True, False, False, True, False, True, True]:
        xv, vv = rng.randn(N, D), rng.randn(N, D)
        got = exe.run(main, feed={"x": xv, "p": np.array([p]), "v": vv}, fetch_list=[y, loss, gx, gw], scope=scope)
        want = _ref(xv, wv, vv, p)
        for g, w_ in zip(got, want):
            np.testing.assert_allclose(g, np.reshape(w_, np.shape(g)), rtol=1e-12, atol=1e-12)
    record_checked("output", "conditional_block")


@pytest.mark.parametrize("p", [True, False], ids=["taken", "not_taken"])
def test_gradients_match_central_differences(p):
    rng = np.random.RandomState(1)
    main, exe, scope, (y, loss, gx, gw) = _setup()
    xv, vv = rng.randn(N, D), rng.randn(N, D)
    feed = {"x": xv, "p": np.array([p]), "v": vv}
    ax, aw = exe.run(main, feed=feed, fetch_list=[gx, gw], scope=scope)

    def f():
        return float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0])

    eps = 1e-6
    num_x = np.zeros_like(xv)
    for idx in np.ndindex(*xv.shape):
        orig = xv[idx]
        xv[idx] = orig + eps
        plus = f()
        xv[idx] = orig - eps
        minus = f()
        xv[idx] = orig
        num_x[idx] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(ax, num_x, rtol=1e-6, atol=1e-8)
    w = scope.find_var("w").get_tensor()
    wv = np.array(w)
    num_w = np.zeros_like(wv)
    for idx in np.ndindex(*wv.shape):
        orig = wv[idx]
        wv[idx] = orig + eps
        w.set(wv, fluid.CPUPlace())
        plus = f()
        wv[idx] = orig - eps
        w.set(wv, fluid.CPUPlace())
        minus = f()
        wv[idx] = orig
        w.set(wv, fluid.CPUPlace())
        num_w[idx] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(aw, num_w, rtol=1e-6, atol=1e-8)
    if not p:  # w is read only by the branch that did not run: its gradient is zeros (Fluid 1.8)
        assert aw.shape == (D, D) and not aw.any()
    record_checked("grad", "conditional_block")


def test_zero_gradient_of_a_skipped_branch_keeps_the_input_lod():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, D], dtype="float64", append_batch_size=False, lod_level=1)
        x.stop_gradient = False
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        y = main.global_block().create_var(name="y", dtype="float64")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(L.scale(x, 3.0), y)
        gx, = fluid.gradients([L.reduce_sum(y)], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    xv = fluid.create_lod_tensor(np.ones((5, D)), [[2, 3]], fluid.CPUPlace())
    g, = exe.run(main, feed={"x": xv, "p": np.array([True])}, fetch_list=[gx], return_numpy=False)
    np.testing.assert_array_equal(np.array(g), np.full((5, D), 3.0))
    assert g.recursive_sequence_lengths() == [[2, 3]]
    # Not taken: the gradient is zeros with x's dims and LoD, not the previous run's threes. (The loss then reads a
    # y the block did not write this run; only the gradient is looked at.)
    g, = exe.run(main, feed={"x": xv, "p": np.array([False])}, fetch_list=[gx], return_numpy=False)
    np.testing.assert_array_equal(np.array(g), np.zeros((5, D)))
    assert g.recursive_sequence_lengths() == [[2, 3]]


def test_an_output_nobody_differentiates_gets_zero_gradients_inside_the_branch():
    # The branch writes a and b; the loss reads only a. The grad block still reads b@GRAD (assign's gradient):
    # it gets zeros shaped like b, never a previous run's value.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[N, D], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        a = main.global_block().create_var(name="a", dtype="float64")
        b = main.global_block().create_var(name="b", dtype="float64")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            t = L.scale(x, 2.0)
            L.assign(t, a)
            L.assign(L.elementwise_mul(t, t), b)
        gx, = fluid.gradients([L.reduce_sum(a)], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(3):
        g, = exe.run(main, feed={"x": np.ones((N, D)), "p": np.array([True])}, fetch_list=[gx])
        np.testing.assert_array_equal(g, np.full((N, D), 2.0))


def _program_reading_x(scalar):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, D], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        y = main.global_block().create_var(name="y", dtype="float32")
        counter = L.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True, name="runs")
        with ConditionalBlock([c], is_scalar_condition=scalar).block():
            L.assign(L.scale(x, 2.0), y)
            L.increment(counter, 1.0)
    return main, startup, counter


def test_without_a_scalar_condition_the_block_runs_iff_every_input_is_non_empty():
    main, startup, counter = _program_reading_x(scalar=False)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    c = np.zeros((3, 1), bool)  # not read: an all-false, or an empty, Cond does not stop the block
    runs = []
    for rows in [2, 0, 3, 0, 0, 1]:
        exe.run(main, feed={"x": np.ones((rows, D), "float32"), "c": c}, scope=scope)
        runs.append(float(np.array(scope.find_var("runs").get_tensor())[0]))
    assert runs == [1, 1, 2, 2, 2, 3]
    record_checked("output", "conditional_block")


def test_the_scope_is_made_once_and_the_block_prepared_once():
    main, exe, scope, (y, loss, gx, gw) = _setup()
    feed = {"x": np.ones((N, D)), "v": np.ones((N, D))}
    for p in [True, False]:  # warm-up: each branch ran (and got its scope) once
        exe.run(main, feed=dict(feed, p=np.array([p])), fetch_list=[loss, gx, gw], scope=scope)
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        for p in [True, False, True, False]:
            exe.run(main, feed=dict(feed, p=np.array([p])), fetch_list=[loss, gx, gw], scope=scope)
    evs = fluid.profiler.events()
    names = [e["name"] for e in evs]
    assert fluid.profiler.scope_summary()["created"] == 0
    assert "conditional_block::prepare" not in names
    runs = [e for e in evs if e["name"] == "conditional_block::run"]
    grad_runs = [e for e in evs if e["name"] == "conditional_block_grad::run"]
    assert len(runs) == 4 and len(grad_runs) == 4  # one branch of two per run
    assert all(evs[e["parent"]]["name"] == "conditional_block" for e in runs)
    # the branch taken is visible: its block and condition are the event's args, alternating with p
    blocks = [e["args"] for e in runs]
    assert blocks[0] == blocks[2] != blocks[1] == blocks[3]
    assert blocks[0] == '"sub_block":"1","cond":"p"'
    assert blocks[1].startswith('"sub_block":"2","cond":"logical_not_')
    # steady state: no memory kept or taken per run beyond what a flat program takes (the fetched results)
    before = core.memory_stats()
    for p in [True, False] * 5:
        exe.run(main, feed=dict(feed, p=np.array([p])), fetch_list=[loss, gx, gw], scope=scope)
    after = core.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["num_system_allocs"] - before["num_system_allocs"] <= 10 * 3


def test_a_new_scope_gets_its_block_prepared_again():
    main, startup, *_ = _switch_program()
    exe = fluid.Executor(fluid.CPUPlace())
    scopes = [fluid.Scope(), fluid.Scope()]
    for s in scopes:
        exe.run(startup, scope=s)
    feed = {"x": np.ones((N, D)), "v": np.ones((N, D)), "p": np.array([True])}
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        for s in [scopes[0], scopes[0], scopes[1], scopes[1]]:
            exe.run(main, feed=feed, fetch_list=["y"], scope=s)
    names = [e["name"] for e in fluid.profiler.events()]
    # per scope: the block and its grad block once, on the first run in it
    assert names.count("conditional_block::prepare") == 4
    assert names.count("conditional_block::run") == names.count("conditional_block_grad::run") == 4


def test_glog_level_3_says_whether_the_block_ran(capfd):
    main, exe, scope, (y, loss, gx, gw) = _setup()
    feed = {"x": np.ones((N, D)), "v": np.ones((N, D)), "p": np.array([True])}
    exe.run(main, feed=feed, fetch_list=[gx], scope=scope)
    capfd.readouterr()
    with fluid.vlog_guard(0, vmodule="conditional_block=3"):
        exe.run(main, feed=feed, fetch_list=[gx], scope=scope)
    err = capfd.readouterr().err
    assert "Conditional block.idx = 1, scope = 0x" in err and "runs: Cond 'p' is true" in err
    assert "Conditional block.idx = 2 does not run: Cond 'logical_not_" in err and "is false" in err
    assert "Conditional Grad block.idx = " in err and "the input gradients are zeros" in err


def test_nested_conditional_blocks():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[D], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        q = L.data(name="q", shape=[1], dtype="bool", append_batch_size=False)
        y1 = main.global_block().create_var(name="y1", dtype="float64")
        y2 = main.global_block().create_var(name="y2", dtype="float64")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(L.scale(x, 2.0), y1)
            with ConditionalBlock([q], is_scalar_condition=True).block():
                L.assign(L.elementwise_mul(x, x), y2)
        gx, = fluid.gradients([L.elementwise_add(L.reduce_sum(y1), L.reduce_sum(y2))], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([1.0, -2.0, 3.0])
    exe.run(main, feed={"x": xv, "p": np.array([True]), "q": np.array([True])})  # y1, y2 written once
    for p, q in [(True, True), (True, False), (False, True), (True, True), (False, False), (True, False)]:
        a, b, g = exe.run(main, feed={"x": xv, "p": np.array([p]), "q": np.array([q])}, fetch_list=[y1, y2, gx])
        if p:
            np.testing.assert_allclose(a, 2 * xv)
        if p and q:
            np.testing.assert_allclose(b, xv * xv)
        want = (2.0 + (2 * xv if q else 0.0)) if p else np.zeros(D)
        np.testing.assert_allclose(g, np.broadcast_to(want, (D,)))


def test_a_saved_program_runs_the_same():
    main, exe, scope, (y, loss, gx, gw) = _setup()
    parsed = fluid.Program.parse_from_string(main.serialize_to_string())
    feed = {"x": np.arange(N * D, dtype="float64").reshape(N, D) / 10, "v": np.ones((N, D))}
    for p in [True, False]:
        f = dict(feed, p=np.array([p]))
        a = exe.run(main, feed=f, fetch_list=[loss.name, gx.name, gw.name], scope=scope)
        b = exe.run(parsed, feed=f, fetch_list=[loss.name, gx.name, gw.name], scope=scope)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


# ------------------------------------------------------------------ errors

def test_a_scalar_condition_must_be_one_bool_at_build_time():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        f = L.data(name="f", shape=[1], dtype="float32", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"conditional_block: Cond 'f' .* must be bool "
                                                     r"\(is_scalar_condition\), got float32"):
            with ConditionalBlock([f], is_scalar_condition=True).block():
                L.scale(f, 2.0)
        b = L.data(name="b", shape=[2], dtype="bool", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"conditional_block: Cond 'b' \[2\] must hold one element"):
            with ConditionalBlock([b], is_scalar_condition=True).block():
                L.scale(f, 2.0)


def test_a_scalar_condition_of_another_size_at_run_time_is_an_error():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[D], dtype="float32", append_batch_size=False)
        p = L.data(name="p", shape=[-1], dtype="bool", append_batch_size=False)
        y = main.global_block().create_var(name="y", dtype="float32")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(x, y)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(core.EnforceNotMet, match=r"conditional_block: Cond 'p' must be a bool tensor of one element "
                                                 r"\(is_scalar_condition\), got bool \[2\]"):
        exe.run(main, feed={"x": np.ones(D, "float32"), "p": np.array([True, False])})
    # the executor stays usable
    exe.run(main, feed={"x": np.ones(D, "float32"), "p": np.array([True])})


def test_an_error_inside_the_block_names_the_inner_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, -1], dtype="float32", append_batch_size=False)
        z = L.data(name="z", shape=[-1, -1], dtype="float32", append_batch_size=False)
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        y = main.global_block().create_var(name="y", dtype="float32")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(L.elementwise_add(x, z), y)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.ones((2, 3), "float32"), "z": np.ones((2, 4), "float32")}
    exe.run(main, feed=dict(feed, p=np.array([False])))  # not run: nothing to fail
    with pytest.raises(core.EnforceNotMet, match=r"op conditional_block: .*elementwise_add"):
        exe.run(main, feed=dict(feed, p=np.array([True])))


def test_a_block_reading_an_unknown_variable_is_an_error():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        with pytest.raises(ValueError, match="ConditionalBlock: the block reads ghost, which is neither computed in "
                                             "the block before nor a variable of an enclosing block"):
            with ConditionalBlock([p], is_scalar_condition=True).block():
                ghost = main.current_block().create_var(name="ghost", dtype="float32", shape=[1])
                L.scale(ghost, 2.0)
    assert main.current_block().idx == 0  # the guard rolled back


def test_conditional_block_inputs_must_be_variables():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="ConditionalBlock: 'inputs' must be a Variable, got int"):
            ConditionalBlock([1])


def test_a_second_gradients_pass_gets_its_own_gradients_through_the_branch():
    # gradients() twice over one program: the second pass renames the gradients that exist (x@GRAD -> x@GRAD_0),
    # inside the grad blocks too, and the branch's output gradient under its new name comes from outside
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[D], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        y = main.global_block().create_var(name="y", dtype="float64")
        with ConditionalBlock([p], is_scalar_condition=True).block():
            L.assign(L.scale(x, 2.0), y)
        with ConditionalBlock([L.logical_not(p)], is_scalar_condition=True).block():
            L.assign(L.elementwise_mul(x, x), y)
        loss = L.reduce_sum(y)
        g1, = fluid.gradients([loss], [x])
        g2, = fluid.gradients([loss], [x])
    assert g1.name != g2.name
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([1.0, 2.0, 3.0])
    for p_ in [True, False]:
        a, b = exe.run(main, feed={"x": xv, "p": np.array([p_])}, fetch_list=[g1, g2])
        np.testing.assert_array_equal(a, np.full(D, 2.0) if p_ else 2 * xv)
        np.testing.assert_array_equal(b, a)


def test_a_sparse_gradient_inside_the_branch_comes_out_dense():
    def grads(is_sparse):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = 2
        with fluid.program_guard(main, startup):
            ids = L.data(name="ids", shape=[-1, 1], dtype="int64", append_batch_size=False)
            p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
            y = main.global_block().create_var(name="y", dtype="float32")
            with ConditionalBlock([p], is_scalar_condition=True).block():
                emb = L.embedding(ids, size=[10, 4], is_sparse=is_sparse, param_attr=fluid.ParamAttr(name="E"))
                L.assign(L.scale(emb, 2.0), y)
            g, = fluid.gradients([L.reduce_sum(L.square(y))], [main.global_block().var("E")])
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        feed = {"ids": np.array([[1], [3], [1]], "int64")}
        return [exe.run(main, feed=dict(feed, p=np.array([p_])), fetch_list=[g], scope=scope)[0]
                for p_ in (True, False)], np.array(scope.find_var("E").get_tensor())
    (dense_taken, dense_skipped), e = grads(False)
    (sparse_taken, sparse_skipped), _ = grads(True)
    want = np.zeros((10, 4), "float32")
    for i in (1, 3, 1):
        want[i] += 8 * e[i]  # d sum((2 e)^2) / d e
    np.testing.assert_allclose(dense_taken, want, rtol=1e-6)
    np.testing.assert_array_equal(sparse_taken, dense_taken)
    assert sparse_skipped.shape == (10, 4) and not sparse_skipped.any() and not dense_skipped.any()


def test_dropping_the_scopes_kids_between_runs_gives_the_block_a_new_scope():
    rng = np.random.RandomState(5)
    main, exe, scope, (y, loss, gx, gw) = _setup()
    wv = np.array(scope.find_var("w").get_tensor())
    for p in [True, False, True]:
        xv, vv = rng.randn(N, D), rng.randn(N, D)
        feed = {"x": xv, "p": np.array([p]), "v": vv}
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        scope.drop_kids()  # the program's temporaries and the blocks' scopes go; the next run makes them again
        with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
            got = exe.run(main, feed=feed, fetch_list=[y, loss, gx, gw], scope=scope)
        for g, w_ in zip(got, _ref(xv, wv, vv, p)):
            np.testing.assert_allclose(g, np.reshape(w_, np.shape(g)), rtol=1e-12, atol=1e-12)
        assert [e["name"] for e in fluid.profiler.events()].count("conditional_block::prepare") == 2
