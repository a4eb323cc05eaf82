"""Concurrent use of the executor (docs/architecture.md, "Concurrency"): one program from several threads on
one or several scopes with different fetch lists, training and inference on one scope tree, drop_kids() and
erase_vars() from another thread during runs, and the bounded executor cache."""
import gc
import threading

import numpy as np

import fluidlite as fluid
from fluidlite import core, executor, unique_name


def _mlp():
    """x[-1, 8] -> fc(16, relu) -> fc(4); returns (main, startup, x, h, y)."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        h = fluid.layers.fc(input=x, size=16, act="relu")
        y = fluid.layers.fc(input=h, size=4)
    return main, startup, x, h, y


def _reference(scope, x):
    names = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")
    w0, b0, w1, b1 = (np.array(scope.find_var(n).get_tensor()) for n in names)
    h = np.maximum(x @ w0 + b0, 0)
    return h, h @ w1 + b1


def _in_threads(work, n):
    errors = []

    def guarded(i):
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_one_program_several_threads_different_fetch_lists_one_scope():
    # The holders of feeds and fetches belong to each prepared program: before, they were variables of
    # the user's scope shared by all, and this corrupted the heap.
    main, startup, x, h, y = _mlp()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    fetch_lists = [[y], [h], [h, y], [y, h]]

    def work(i):
        rng = np.random.RandomState(i)
        for _ in range(200):
            xv = rng.rand(1 + i, 8).astype("float32")
            got = exe.run(main, feed={"x": xv}, fetch_list=fetch_lists[i], scope=scope)
            ref = dict(zip(("h", "y"), _reference(scope, xv)))
            for var, g in zip(fetch_lists[i], got):
                np.testing.assert_allclose(g, ref["h" if var is h else "y"], rtol=1e-5, atol=1e-6)

    _in_threads(work, 4)
    assert scope.find_var("feed") is None and scope.find_var("fetch") is None  # not in the user's scope


def test_one_program_several_threads_own_scopes():
    main, startup, x, h, y = _mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    scopes = [fluid.Scope() for _ in range(3)]
    for s in scopes:
        exe.run(startup, scope=s)

    def work(i):
        xv = np.full((2, 8), i, "float32")
        for _ in range(100):
            (got,) = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scopes[i])
            np.testing.assert_allclose(got, _reference(scopes[i], xv)[1], rtol=1e-5, atol=1e-6)

    _in_threads(work, 3)


def _big_chain(n_ops=60, size=1 << 18):
    """A long run: n_ops scale ops on a [size] tensor."""
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[size], dtype="float32", append_batch_size=False)
        y = x
        for _ in range(n_ops):
            y = fluid.layers.scale(y, scale=1.0, bias=1.0)
    return main, y


def test_drop_kids_and_erase_vars_from_another_thread_during_runs_raise_not_crash():
    main, y = _big_chain()
    scope = fluid.Scope()
    scope.var("mine").get_tensor().set(np.ones(1, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.zeros(1 << 18, "float32")
    done = threading.Event()
    results = []

    def work(_):
        try:
            for _ in range(30):
                (got,) = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
                results.append(bool((got == 60).all()))
        finally:
            done.set()

    t = threading.Thread(target=work, args=(0,))
    t.start()
    refused = dropped = 0
    while not done.is_set():
        try:
            scope.drop_kids()  # deletes the prepared program's kid scope when no run is in it
            dropped += 1
        except core.EnforceNotMet as e:
            assert "drop_kids: cannot delete the kid scopes of this scope while a program runs in it" in str(e)
            refused += 1
        try:
            scope.erase_vars(["not-there"])
        except core.EnforceNotMet as e:
            assert "erase_vars: cannot erase variables of this scope while a program runs in it" in str(e)
            refused += 1
    t.join()
    assert results == [True] * 30
    assert refused > 0  # a run lasts milliseconds: the loop above met some
    assert scope.find_var("mine") is not None
    scope.drop_kids()  # no run now: allowed
    assert scope.num_kids() == 0


def test_kid_scope_runs_pin_their_ancestors():
    # A run in a kid scope pins the parent too: its drop_kids() would free the scope the run is in.
    main, y = _big_chain(n_ops=80)
    root = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.zeros(1 << 18, "float32")
    done = threading.Event()
    out, gone = [], []

    def work():
        kid = root.new_scope()
        try:
            for _ in range(20):
                try:
                    out.append(float(exe.run(main, feed={"x": xv}, fetch_list=[y], scope=kid)[0][0]))
                except core.EnforceNotMet as e:  # the parent dropped the kid between two runs
                    gone.append(str(e))
                    kid = root.new_scope()
        finally:
            done.set()

    t = threading.Thread(target=work)
    t.start()
    refused = 0
    while not done.is_set():
        try:
            root.drop_kids()
        except core.EnforceNotMet as e:
            assert "drop_kids: cannot delete the kid scopes of this scope while a program runs in it" in str(e)
            refused += 1
    t.join()
    assert refused > 0
    assert out == [80.0] * len(out) and len(out) + len(gone) == 20
    assert all(("this scope was deleted" in g or "the scope this program was prepared for was deleted" in g)
               for g in gone)


def test_training_and_inference_on_one_scope_do_not_interleave():
    # A program that writes persistables runs alone on its scope tree: a reader never sees half an update.
    n = 1 << 16
    train, infer = fluid.Program(), fluid.Program()
    for prog in (train, infer):
        b = prog.global_block()
        b.create_var(name="w", shape=[n], dtype="float32", persistable=True)
    train.global_block().append_op(type="scale", inputs={"X": ["w"]}, outputs={"Out": ["w"]},
                                   attrs={"scale": 1.0, "bias": 1.0})
    b = infer.global_block()
    b.create_var(name="r", shape=[n], dtype="float32")
    b.append_op(type="scale", inputs={"X": ["w"]}, outputs={"Out": ["r"]}, attrs={"scale": 1.0, "bias": 0.0})
    scope = fluid.Scope()
    scope.var("w").get_tensor().set(np.zeros(n, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    torn = []

    def work(i):
        for _ in range(300):
            if i == 0:
                exe.run(train, scope=scope)
            else:
                (r,) = exe.run(infer, fetch_list=["r"], scope=scope)
                if r.min() != r.max():
                    torn.append((r.min(), r.max()))

    _in_threads(work, 3)
    assert torn == []
    assert (np.array(scope.find_var("w").get_tensor()) == 300).all()


def test_fresh_scope_per_run_keeps_cache_and_kid_scopes_bounded():
    # Before: program._exec_cache kept every scope alive (1,000 runs: 2,002 live kid scopes).
    main, startup, x, h, y = _mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    gc.collect()
    live = core.live_scopes()
    xv = np.ones((2, 8), "float32")
    for _ in range(1000):
        s = fluid.Scope()
        exe.run(startup, scope=s)
        (got,) = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=s)
    np.testing.assert_allclose(got, _reference(s, xv)[1], rtol=1e-5, atol=1e-6)
    assert len(main._exec_cache) == 1 and len(startup._exec_cache) == 1  # only the live scope's entries
    assert core.live_scopes() - live == 2  # the kid scopes of the last scope's two prepared programs
    del s, got
    assert len(main._exec_cache) == 0 and core.live_scopes() == live


def test_exec_cache_has_a_per_program_limit():
    main, startup, x, h, y = _mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    gc.collect()
    live = core.live_scopes()
    scopes = [fluid.Scope() for _ in range(3 * executor.EXEC_CACHE_LIMIT)]  # all kept alive
    xv = np.ones((1, 8), "float32")
    for s in scopes:
        exe.run(startup, scope=s)
        exe.run(main, feed={"x": xv}, fetch_list=[y], scope=s)
    assert len(main._exec_cache) == len(startup._exec_cache) == executor.EXEC_CACHE_LIMIT
    # an evicted entry deletes its kid scope: only the cached programs' kids are alive
    assert core.live_scopes() - live == 2 * executor.EXEC_CACHE_LIMIT
    # an evicted scope still runs (prepared again)
    (got,) = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scopes[0])
    np.testing.assert_allclose(got, _reference(scopes[0], xv)[1], rtol=1e-5, atol=1e-6)
    del main, startup, x, h, y  # the Variables hold their program
    gc.collect()
    assert core.live_scopes() == live  # the entries died with their programs
