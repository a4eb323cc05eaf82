"""The executor: the issue's example end to end, prepare caching, the reused kid scope, memory, scopes,
fetch ownership and feeding."""
import gc

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name


def _chain(n_scale=3, persistable_out=False):
    """x[-1, 4] -> scale x n ; plus a persistable fill_constant 'counter' [1] = 5."""
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = x
        for i in range(n_scale):
            y = fluid.layers.scale(y, scale=2.0, bias=float(i))
        c = main.global_block().create_var(name="counter", shape=[1], dtype="float32", persistable=True)
        fluid.layers.fill_constant(shape=[1], dtype="float32", value=5.0, out=c)
    return main, x, y, c


def _chain_ref(x, n_scale=3):
    for i in range(n_scale):
        x = x * 2 + i
    return x


def test_issue_example_end_to_end_matches_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        h = fluid.layers.fc(input=x, size=32, act="relu")
        y = fluid.layers.fc(input=h, size=1)
        out = fluid.layers.reduce_sum(fluid.layers.abs(y), dim=[1])
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    global_vars = set(fluid.global_scope().local_var_names())  # earlier tests may have left fc_0.w_0 there
    with fluid.scope_guard(scope):
        exe.run(startup)
        xv = np.random.RandomState(0).rand(20, 13).astype("float32")
        res, = exe.run(main, feed={"x": xv}, fetch_list=[out])
        params = {n: np.array(fluid.global_scope().find_var(n).get_tensor())
                  for n in ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]}
    assert params["fc_0.w_0"].shape == (13, 32) and params["fc_0.b_0"].shape == (32,)
    assert params["fc_1.w_0"].shape == (32, 1) and params["fc_1.b_0"].shape == (1,)
    assert np.abs(params["fc_0.w_0"]).max() > 0  # really initialised (Xavier uniform)
    hv = np.maximum(xv @ params["fc_0.w_0"] + params["fc_0.b_0"], 0)
    ref = np.abs(hv @ params["fc_1.w_0"] + params["fc_1.b_0"]).sum(axis=1)
    assert res.shape == (20,) and res.dtype == np.float32
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-5)
    # parameters live in the scope passed in, not in the global scope
    assert "fc_0.w_0" in scope.local_var_names()
    assert set(fluid.global_scope().local_var_names()) == global_vars
    assert "fc_0.w_0" in str(main)


def test_second_run_does_not_reprepare_and_edit_does():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    feed = {"x": np.ones((2, 4), "float32")}
    n0 = core.num_prepared()
    r1, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert core.num_prepared() == n0 + 1
    for _ in range(5):
        r2, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert core.num_prepared() == n0 + 1
    np.testing.assert_array_equal(r1, r2)
    # another batch size is the same prepared program
    exe.run(main, feed={"x": np.ones((7, 4), "float32")}, fetch_list=[y], scope=scope)
    assert core.num_prepared() == n0 + 1
    # other fetch list or scope: a separate cache entry
    exe.run(main, feed=feed, fetch_list=[y, c], scope=scope)
    assert core.num_prepared() == n0 + 2
    exe.run(main, feed=feed, fetch_list=[y, c], scope=scope)
    assert core.num_prepared() == n0 + 2
    # editing the program (append an op) re-prepares and the edit takes effect
    with fluid.program_guard(main):
        z = fluid.layers.scale(y, scale=10.0)
    r3, z3 = exe.run(main, feed=feed, fetch_list=[y, z], scope=scope)
    assert core.num_prepared() == n0 + 3
    np.testing.assert_array_equal(z3, r1 * 10)
    # an attribute edit is an edit too
    main.global_block().ops[0]._set_attr("scale", 3.0)
    r4, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert core.num_prepared() == n0 + 4
    np.testing.assert_array_equal(r4, ((np.ones((2, 4)) * 3 + 0) * 2 + 1) * 2 + 2)
    # a fresh executor shares the program's cache (keyed by place, feeds, fetches, scope)
    fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[y], scope=scope)
    assert core.num_prepared() == n0 + 4


def test_memory_and_scopes_stable_over_runs():
    main, x, y, c = _chain(n_scale=5)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    feed = {"x": np.random.rand(64, 4).astype("float32")}
    for _ in range(3):  # warm-up
        exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    gc.collect()
    base = core.memory_stats()["bytes_in_use"]
    live = core.live_scopes()
    kids = scope.num_kids()
    assert kids == 1
    allocs = core.memory_stats()["num_allocs"]
    for _ in range(100):
        r, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    del r
    gc.collect()
    assert core.memory_stats()["bytes_in_use"] == base
    assert core.live_scopes() == live and scope.num_kids() == kids
    # temporaries keep their buffers: a steady-state run allocates only the fetched result
    assert core.memory_stats()["num_allocs"] - allocs == 100


def test_kid_scope_is_reused_and_recreated_after_drop_kids():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    feed = {"x": np.arange(8, dtype="float32").reshape(2, 4)}
    ref = _chain_ref(feed["x"])
    r, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r, ref)
    # temporaries are in the one kid scope, persistables in the scope itself
    assert scope.num_kids() == 1
    assert scope.find_local_var(y.name) is None and scope.find_local_var("x") is None
    assert scope.find_local_var("counter") is not None
    n = core.num_prepared()
    gc.collect()  # live_scopes is process-wide: finalise earlier tests' garbage first
    live = core.live_scopes()
    scope.drop_kids()
    assert scope.num_kids() == 0 and core.live_scopes() == live - 1
    r, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r, ref)
    assert scope.num_kids() == 1 and core.live_scopes() == live and core.num_prepared() == n
    # a kid the user creates after drop_kids is not taken over by the executor
    scope.drop_kids()
    mine = scope.new_scope()
    mine.var("mine")
    r, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r, ref)
    assert scope.num_kids() == 2 and mine.find_local_var(y.name) is None
    main._exec_cache.clear()  # destroying the prepared program deletes its kid only
    gc.collect()
    assert scope.num_kids() == 1 and mine.find_local_var("mine") is not None


def test_persistables_live_in_the_scope_passed_in():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    s1, s2 = fluid.Scope(), fluid.Scope()
    exe.run(main, feed={"x": np.ones((1, 4), "float32")}, scope=s1)
    assert np.array(s1.find_var("counter").get_tensor()).tolist() == [5.0]
    assert s2.find_var("counter") is None
    with fluid.scope_guard(s2):
        assert fluid.global_scope() is s2
        exe.run(main, feed={"x": np.ones((1, 4), "float32")})
    assert fluid.global_scope() is not s2
    assert np.array(s2.find_var("counter").get_tensor()).tolist() == [5.0]
    # a persistable already in a parent scope is used, not shadowed in the kid
    parent = fluid.Scope()
    parent.var("counter").get_tensor().set(np.array([1.0], "float32"))
    kid = parent.new_scope()
    main2 = fluid.Program()
    with fluid.program_guard(main2):
        cc = main2.global_block().create_var(name="counter", shape=[1], dtype="float32", persistable=True)
        out = fluid.layers.scale(cc, scale=3.0)
    r, = exe.run(main2, fetch_list=[out], scope=kid)
    assert r.tolist() == [3.0] and kid.find_local_var("counter") is None
    with pytest.raises(TypeError, match="scope_guard expects a fluidlite Scope"):
        with fluid.scope_guard("nope"):
            pass


def test_fetched_arrays_own_their_memory():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    a = np.ones((3, 4), "float32")
    r1, = exe.run(main, feed={"x": a}, fetch_list=[y], scope=scope)
    keep = r1.copy()
    r2, = exe.run(main, feed={"x": a * 5}, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r1, keep)
    np.testing.assert_array_equal(r2, _chain_ref(a * 5))
    assert not np.shares_memory(r1, r2)
    # writing into a fetched array changes nothing in the scope or the next run
    r1[:] = -1
    r3, = exe.run(main, feed={"x": a}, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r3, keep)
    # the fed array is copied, not aliased
    a[:] = 0
    np.testing.assert_array_equal(r3, keep)
    # fetched arrays survive the scope and the program
    del main, scope, exe
    gc.collect()
    np.testing.assert_array_equal(r3, keep)


def test_fetch_by_name_and_variable_and_return_numpy_false():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    feed = {"x": np.full((2, 4), 2.0, "float32")}
    by_var = exe.run(main, feed=feed, fetch_list=[y, c], scope=scope)
    by_name = exe.run(main, feed=feed, fetch_list=[y.name, "counter"], scope=scope)
    mixed = exe.run(main, feed=feed, fetch_list=[y, "counter", y], scope=scope)
    for a, b in zip(by_var, by_name):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mixed[0], mixed[2])
    assert by_var[1].tolist() == [5.0]
    ts = exe.run(main, feed=feed, fetch_list=[y, c], scope=scope, return_numpy=False)
    assert all(isinstance(t, core.LoDTensor) for t in ts)
    assert ts[0].shape() == [2, 4] and ts[1].shape() == [1]
    np.testing.assert_array_equal(np.array(ts[0]), by_var[0])
    assert np.array(ts[0]).dtype == np.float32
    # empty fetch list: nothing returned
    assert exe.run(main, feed=feed, scope=scope) == []
    with pytest.raises(TypeError, match="fetch_list items must be Variables or variable names"):
        exe.run(main, feed=feed, fetch_list=[3], scope=scope)


@pytest.mark.parametrize("make", [
    lambda a: a[:, ::2],                     # strided
    lambda a: np.asfortranarray(a[:, :4]),   # Fortran order
    lambda a: a[::-1, ::2],                  # negative strides
    lambda a: a.reshape(8, 65536).T[:, 2:6],  # transposed view
    lambda a: a[1:, 1:5],                    # offset view
])
def test_feeding_non_contiguous_arrays(make):
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    # large enough that numpy's contiguous copy is mmapped: reading it after it was freed (the old
    # BorrowArray bug) segfaulted instead of silently reading stale data
    base = np.arange(65536 * 8, dtype="float32").reshape(65536, 8)
    for _ in range(3):
        fed = make(base)
        assert not fed.flags.c_contiguous
        want = _chain_ref(np.asarray(fed, dtype="float32"))
        r, = exe.run(main, feed={"x": fed}, fetch_list=[y], scope=scope)
        np.testing.assert_array_equal(r, want)


def test_scope_api():
    s = fluid.Scope()
    v = s.var("a")
    assert s.var("a").is_initialized() is False and v.kind() == "nothing"
    v.get_tensor().set(np.array([1, 2, 3], "int64"))
    assert v.is_initialized() and v.kind() == "LoDTensor"
    assert s.find_var("a") is not None and s.find_var("b") is None
    kid = s.new_scope()
    grandkid = kid.new_scope()
    assert s.num_kids() == 1 and kid.num_kids() == 1
    assert grandkid.find_var("a") is not None and grandkid.find_local_var("a") is None
    np.testing.assert_array_equal(np.array(grandkid.find_var("a").get_tensor()), [1, 2, 3])
    kid.var("a").get_tensor().set(np.array([9], "int64"))  # shadows the parent's
    assert np.array(grandkid.find_var("a").get_tensor()).tolist() == [9]
    assert np.array(s.find_var("a").get_tensor()).tolist() == [1, 2, 3]
    assert kid.local_var_names() == ["a"]
    s.var("b")
    assert s.local_var_names() == ["a", "b"]
    s.erase_vars(["b"])
    assert s.find_var("b") is None
    gc.collect()
    live = core.live_scopes()
    s.drop_kids()
    assert s.num_kids() == 0 and core.live_scopes() == live - 2
    # the dropped kid's handle raises instead of touching freed memory
    with pytest.raises(core.EnforceNotMet, match="this scope was deleted"):
        kid.var("x")
    with pytest.raises(core.EnforceNotMet, match="this scope was deleted"):
        grandkid.find_var("a")
    assert isinstance(fluid.global_scope(), core.Scope)


def test_run_in_a_dropped_kid_scope_raises_not_crashes():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    root = fluid.Scope()
    kid = root.new_scope()
    feed = {"x": np.ones((1, 4), "float32")}
    exe.run(main, feed=feed, fetch_list=[y], scope=kid)
    root.drop_kids()
    with pytest.raises(core.EnforceNotMet, match="deleted"):
        exe.run(main, feed=feed, fetch_list=[y], scope=kid)
    main._exec_cache.clear()
    gc.collect()
    r, = exe.run(main, feed=feed, fetch_list=[y], scope=root)
    np.testing.assert_array_equal(r, _chain_ref(feed["x"]))


def test_default_program_and_run_arguments():
    main, x, y, c = _chain()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.program_guard(main):
        r, = exe.run(feed={"x": np.ones((1, 4), "float32")}, fetch_list=[y], scope=fluid.Scope())
    np.testing.assert_array_equal(r, _chain_ref(np.ones((1, 4), "float32")))
    with pytest.raises(TypeError, match="feed must be a dict"):
        exe.run(main, feed=[np.ones((1, 4))])
    with pytest.raises(TypeError, match="program must be a fluidlite Program"):
        exe.run("main")
    exe.close()
    with pytest.raises(RuntimeError, match="after close"):
        exe.run(main)


def test_prepared_program_handle():
    main, x, y, c = _chain()
    scope = fluid.Scope()
    p = core.PreparedProgram(main.desc, 0, scope, core.cpu_place(), ["x"], [y.name])
    r, = p.run([np.ones((2, 4), "float32")])
    np.testing.assert_array_equal(r, _chain_ref(np.ones((2, 4), "float32")))
    assert p.num_runs() == 1 and p.local_scope() is not None
    # the prepared copy has feed/fetch ops; the user's program does not
    block = p.program().block(0)
    assert [block.op(i).type() for i in range(block.op_size())][0] == "feed"
    assert all(op.type not in ("feed", "fetch") for op in main.global_block().ops)
    scope.drop_kids()
    assert p.local_scope() is None
    p.run([np.ones((2, 4), "float32")])
    assert p.local_scope() is not None
    with pytest.raises(core.EnforceNotMet, match="no scope to run in"):
        core.PreparedProgram(main.desc, 0, None, core.cpu_place(), [], [])
    with pytest.raises(core.EnforceNotMet, match="block index 3 out of range"):
        core.PreparedProgram(main.desc, 3, scope, core.cpu_place(), [], [])


def test_concurrent_runs_of_one_program_from_threads():
    """Run releases the GIL; runs of one prepared program share its kid scope and must not interleave."""
    import threading
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[64], dtype="float32")
        y = x
        for _ in range(20):
            y = fluid.layers.scale(y, scale=1.0, bias=1.0)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(main, feed={"x": np.zeros((1, 64), "float32")}, fetch_list=[y], scope=scope)
    bad = []

    def work(seed):
        rng = np.random.RandomState(seed)
        for _ in range(3000):
            n = rng.randint(1, 400)
            r, = exe.run(main, feed={"x": np.full((n, 64), seed, "float32")}, fetch_list=[y], scope=scope)
            if r.shape != (n, 64) or not (r == seed + 20).all():
                bad.append((seed, n, r.shape))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_fetched_rows_of_one_element_convert_to_python_scalars():
    # the book's fit_a_line prints each row of its [N, 1] prediction with "%.2f", which numpy 2.4 refuses on a
    # plain ndarray of rank 1: every fetched array of rank >= 1 is a ScalarArray, one-element parts convert
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    pred, = exe.run(main, feed={"x": np.array([[1.0], [2.5], [-3.0]], "float32")}, fetch_list=[y],
                    scope=fluid.Scope())
    assert isinstance(pred, np.ndarray) and pred.shape == (3, 1)
    assert ["%d: %.2f" % (i, v) for i, v in enumerate(pred)] == ["0: 2.00", "1: 5.00", "2: -6.00"]
    assert float(pred[1]) == 5.0 and int(pred[2]) == -6 and float(pred[1:2]) == 5.0
    assert repr(pred) == repr(np.array([[2.0], [5.0], [-6.0]], "float32"))
    with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted"):
        float(pred)  # three elements: numpy's own error
