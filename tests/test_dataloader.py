"""fluid.io.DataLoader.from_generator: what iterable loaders yield, non-iterable start()/EOFException/reset()
cycles through Executor.run, numpy-checked training, Fluid's argument errors, the background thread
(exceptions, cleanup, the profiler range) and the queue bound."""
import gc
import json
import threading
import time
import traceback

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name

JOIN_S = 10  # every wait below is bounded: a hang fails the test instead of stalling the run


def _net(iterable=True, capacity=2, return_list=False, use_double_buffer=True, drop_last=True):
    """x[-1, 3] float32, y[-1, 1] int64 -> out = x * 2 (fetched to see each batch), plus the loader."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        out = fluid.layers.scale(x, scale=2.0)
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=capacity, iterable=iterable,
                                                    return_list=return_list, use_double_buffer=use_double_buffer,
                                                    drop_last=drop_last)
    return main, startup, x, y, out, loader


def _samples(n):
    def reader():
        for i in range(n):
            yield np.full([3], i, "float64"), np.array([i])
    return reader


def _loader_threads(loader):
    return [t for t in threading.enumerate() if t.name == loader._name]


def _wait_no_threads(loader):
    deadline = time.time() + JOIN_S
    while _loader_threads(loader) and time.time() < deadline:
        time.sleep(0.01)
    assert not _loader_threads(loader), "the loader's worker thread is still alive"


# ------------------------------------------------------------------------------------- iterable use

def test_iterable_yields_one_dict_of_lodtensors_per_place():
    main, startup, x, y, out, loader = _net()
    loader.set_sample_generator(_samples(10), batch_size=4, drop_last=False, places=fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    seen = []
    for data in loader():
        assert isinstance(data, list) and len(data) == 1
        assert sorted(data[0]) == ["x", "y"]
        assert all(isinstance(t, core.LoDTensor) for t in data[0].values())
        xv, yv = np.array(data[0]["x"]), np.array(data[0]["y"])
        assert xv.dtype == np.float32 and yv.dtype == np.int64 and xv.shape[1:] == (3,) and yv.shape[1:] == (1,)
        got, = exe.run(main, feed=data, fetch_list=[out])
        np.testing.assert_array_equal(got, xv * 2)
        seen.extend(yv[:, 0].tolist())
    assert seen == list(range(10))  # in order, every sample once, the last partial batch (2) kept
    _wait_no_threads(loader)


def test_iterable_return_list_and_drop_last():
    main, startup, x, y, out, loader = _net(return_list=True)
    loader.set_sample_generator(_samples(10), batch_size=4, places=[fluid.CPUPlace()])  # drop_last=True
    batches = list(loader())
    assert [len(b) for b in batches] == [1, 1]
    assert all(isinstance(b[0], list) and len(b[0]) == 2 for b in batches)
    assert [np.array(b[0][1])[:, 0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_batch_generator_casts_same_kind_and_keeps_data_across_kinds():
    main, startup, x, y, out, loader = _net()

    def batches():
        yield np.arange(6, dtype="float64").reshape(2, 3), np.array([[1], [2]], dtype="int32")
        yield [[1.0, 2.0, 3.0]], np.array([7])  # a nested list; a rank-1 label reshaped to [-1, 1]
    loader.set_batch_generator(batches, places=[fluid.CPUPlace()])
    got = [{k: np.array(v) for k, v in d[0].items()} for d in loader()]
    assert got[0]["x"].dtype == np.float32 and got[0]["y"].dtype == np.int64
    np.testing.assert_array_equal(got[0]["x"], np.arange(6).reshape(2, 3))
    assert got[1]["y"].shape == (1, 1) and got[1]["y"][0, 0] == 7 and got[1]["x"].shape == (1, 3)


def test_sample_list_generator_and_several_epochs():
    main, startup, x, y, out, loader = _net()

    def sample_lists():
        for start in range(0, 9, 3):
            yield [(np.full([3], i, "float32"), [i]) for i in range(start, start + 3)]
    assert loader.set_sample_list_generator(sample_lists, places=[fluid.CPUPlace()]) is loader
    for _ in range(3):  # re-iterating starts a new epoch each time
        ys = [np.array(d[0]["y"])[:, 0].tolist() for d in loader()]
        assert ys == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    _wait_no_threads(loader)


def test_two_places_yield_two_dicts_and_drop_last_applies_to_the_group():
    for drop_last, expected in ((True, [[0, 1], [2, 3]]), (False, [[0, 1], [2, 3], [4]])):
        main, startup, x, y, out, loader = _net(drop_last=drop_last)
        loader.set_sample_generator(_samples(10), batch_size=2, places=fluid.cpu_places(2))
        got = [[int(np.array(d["y"])[0, 0]) // 2 for d in group] for group in loader()]
        assert got == expected


# --------------------------------------------------------------------------------- non-iterable use

def test_non_iterable_epochs_with_eof_and_reset():
    main, startup, x, y, out, loader = _net(iterable=False)
    loader.set_sample_generator(_samples(10), batch_size=4, drop_last=False)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(core.EOFException, match="not started"):
        exe.run(main, fetch_list=[out])
    for _ in range(3):
        loader.start()
        rows = []
        try:
            while True:
                rows.append(exe.run(main, fetch_list=[out])[0])
        except core.EOFException as e:
            assert "There is no next data" in str(e)
            with pytest.raises(core.EOFException):  # still at the end until reset()
                exe.run(main, fetch_list=[out])
            loader.reset()
        assert [r.shape[0] for r in rows] == [4, 4, 2]
        np.testing.assert_array_equal(np.concatenate(rows)[:, 0], np.arange(10) * 2.0)
    _wait_no_threads(loader)


def test_non_iterable_reader_survives_clone_for_test_and_not_pruning():
    main, startup, x, y, out, loader = _net(iterable=False)
    loader.set_sample_generator(_samples(4), batch_size=2)
    test_prog = main.clone(for_test=True)
    assert test_prog._readers == (loader,)
    exe = fluid.Executor(fluid.CPUPlace())
    loader.start()
    a = exe.run(main, fetch_list=[out])[0]
    b = exe.run(test_prog, fetch_list=[out.name])[0]  # the clone reads the same reader: the next batch
    np.testing.assert_array_equal(np.concatenate([a, b])[:, 0], [0, 2, 4, 6])
    loader.reset()
    from fluidlite.io import _prune_program
    pruned = _prune_program(main, [out])
    assert pruned._readers == ()
    np.testing.assert_array_equal(exe.run(pruned, feed={"x": np.ones([1, 3], "float32")}, fetch_list=[out.name])[0],
                                  [[2, 2, 2]])


def test_non_iterable_loader_binds_to_its_feed_variables_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        out = fluid.layers.scale(x, scale=2.0)
    default_before = fluid.default_main_program()._readers
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2, iterable=False)  # outside the guard
    assert main._readers == (loader,) and fluid.default_main_program()._readers == default_before
    loader.set_batch_generator(lambda: iter([(np.ones([1, 3]),)]))
    loader.start()
    np.testing.assert_array_equal(fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])[0], [[2, 2, 2]])
    loader.reset()
    other = fluid.Program().global_block().create_var(name="z", shape=[-1, 1], dtype="float32", is_data=True)
    with pytest.raises(ValueError, match=r"DataLoader: the feed variables belong to 2 different programs \(x, z\)"):
        fluid.io.DataLoader.from_generator(feed_list=[x, other], capacity=2, iterable=False)


def test_a_second_non_iterable_reader_of_the_same_variables_is_an_error():
    main, startup, x, y, out, loader = _net(iterable=False)
    with pytest.raises(ValueError, match="PyReader: variable 'x' is already filled by DataLoader, bound to this "
                                         "program"):
        fluid.io.PyReader(feed_list=[x], capacity=2, iterable=False)
    assert main._readers == (loader,)


def test_feeding_a_variable_the_reader_fills_is_an_error():
    main, startup, x, y, out, loader = _net(iterable=False)
    loader.set_sample_generator(_samples(4), batch_size=2)
    loader.start()
    try:
        with pytest.raises(ValueError, match="variable 'x' is read by DataLoader"):
            fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones([2, 3], "float32")}, fetch_list=[out])
    finally:
        loader.reset()


def test_start_twice_and_iterable_misuse():
    main, startup, x, y, out, loader = _net(iterable=False)
    loader.set_sample_generator(_samples(4), batch_size=2)
    loader.start()
    with pytest.raises(RuntimeError, match="already started; call reset"):
        loader.start()
    loader.reset()
    loader.reset()  # a second reset is harmless
    with pytest.raises(RuntimeError, match="not iterable"):
        iter(loader)
    it = _net()[-1]
    with pytest.raises(RuntimeError, match="start\\(\\) cannot be called when DataLoader is iterable"):
        it.start()
    with pytest.raises(RuntimeError, match="reset\\(\\) cannot be called when DataLoader is iterable"):
        it.reset()
    with pytest.raises(RuntimeError, match="no data source"):
        iter(it)


# -------------------------------------------------------------------------------- training, numpy-checked

def _regression(iterable):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        t = fluid.layers.data(name="t", shape=[1], dtype="float32")
        pred = fluid.layers.fc(input=x, size=1, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.Constant(0.1)), bias_attr=fluid.ParamAttr(
            name="b", initializer=fluid.initializer.Constant(0.0)))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, t))
        fluid.optimizer.SGD(learning_rate=0.05).minimize(loss)
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, t], capacity=3, iterable=iterable)
    return main, startup, loss, loader


@pytest.mark.parametrize("iterable", [True, False])
def test_training_loop_matches_numpy_sgd(iterable):
    rng = np.random.RandomState(0)
    xs = rng.rand(22, 4).astype("float32")
    ts = (xs @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.3).astype("float32")
    main, startup, loss, loader = _regression(iterable)
    samples = lambda: iter(zip(xs, ts))  # noqa: E731
    loader.set_sample_generator(samples, batch_size=5, drop_last=False,
                                places=[fluid.CPUPlace()] if iterable else None)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    w, b = np.full([4, 1], 0.1), 0.0
    losses, ref_losses = [], []
    for _ in range(3):
        if iterable:
            for data in loader():
                losses.append(float(exe.run(main, feed=data, fetch_list=[loss], scope=scope)[0][0]))
        else:
            loader.start()
            try:
                while True:
                    losses.append(float(exe.run(main, fetch_list=[loss], scope=scope)[0][0]))
            except fluid.core.EOFException:
                loader.reset()
        for s in range(0, 22, 5):  # numpy SGD over the same batches, the last one of 2
            bx, bt = xs[s:s + 5].astype("float64"), ts[s:s + 5].astype("float64")
            err = bx @ w + b - bt
            ref_losses.append(float(np.mean(err ** 2)))
            w -= 0.05 * 2 * bx.T @ err / len(bx)
            b -= 0.05 * 2 * float(np.mean(err))
    assert len(losses) == 15
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), w, rtol=1e-4)
    assert losses[-1] < losses[0]


# ------------------------------------------------------------------------------------------ errors

def test_argument_errors_are_fluids():
    x = fluid.Program().global_block().create_var(name="x", shape=[-1, 3], dtype="float32", is_data=True)
    with pytest.raises(ValueError, match="Please give value to capacity."):
        fluid.io.DataLoader.from_generator(feed_list=[x])
    with pytest.raises(Exception, match="Feed list must be given under static mode."):
        fluid.io.DataLoader.from_generator(capacity=2)
    with pytest.raises(TypeError, match="feed_list items must be Variables"):
        fluid.io.DataLoader.from_generator(feed_list=["x"], capacity=2)
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
    with pytest.raises(ValueError, match="Places cannot be None when DataLoader is iterable"):
        loader.set_batch_generator(lambda: iter([]))
    with pytest.raises(ValueError, match="batch_size must be larger than 0, got 0"):
        loader.set_sample_generator(lambda: iter([]), batch_size=0, places=[fluid.CPUPlace()])
    with pytest.raises(TypeError, match="reader must be a callable"):
        loader.set_batch_generator([1, 2], places=[fluid.CPUPlace()])
    with pytest.raises(NotImplementedError, match="from_dataset.*docs/compat.md"):
        fluid.io.DataLoader.from_dataset(None, [fluid.CPUPlace()])


@pytest.mark.parametrize("batch, error, match", [
    ([np.ones([2, 4], "float32"), np.ones([2, 1], "int64")], ValueError,
     r"variable 'x' expects shape \[-1, 3\] \(-1: any\), got data of shape \[2, 4\]"),
    ([np.ones([2, 3], "float32")], ValueError, r"a batch has 1 items but there are 2 feed variables \(x, y\)"),
    ([np.array([[1.0, 2.0], [1.0]], dtype=object), np.ones([2, 1], "int64")], TypeError,
     "the data for variable 'x' is not a regular array"),
])
def test_batch_errors_name_the_variable_and_reach_the_consumer(batch, error, match):
    main, startup, x, y, out, loader = _net()
    loader.set_batch_generator(lambda: iter([batch]), places=[fluid.CPUPlace()])
    with pytest.raises(error, match=match):
        next(iter(loader()))
    _wait_no_threads(loader)


def test_sample_errors():
    main, startup, x, y, out, loader = _net()
    loader.set_sample_list_generator(lambda: iter([[(np.ones(3), [0.5])]]), places=[fluid.CPUPlace()])
    with pytest.raises(TypeError, match="variable 'y' is int64 but its samples are float64"):
        list(loader())
    loader.set_sample_list_generator(lambda: iter([[(np.ones(4), [1])]]), places=[fluid.CPUPlace()])
    with pytest.raises(ValueError, match=r"variable 'x' expects samples of shape \[3\], got \[4\]"):
        list(loader())
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        seq = fluid.layers.data(name="seq", shape=[1], dtype="int64", lod_level=1)
        lod_loader = fluid.io.DataLoader.from_generator(feed_list=[seq], capacity=2)
    lod_loader.set_sample_generator(lambda: iter([(3,)]), batch_size=1, places=[fluid.CPUPlace()])
    with pytest.raises(TypeError, match=r"DataLoader: variable 'seq' has lod_level 1, but sample 0's field 3 is not a "
                                        r"sequence nested that deep"):
        list(lod_loader())


# ------------------------------------------------------------------------------------- the thread

def test_reader_exception_is_reraised_with_its_traceback():
    main, startup, x, y, out, loader = _net()

    def broken_reader():
        yield np.ones([1, 3]), np.ones([1, 1], "int64")
        raise KeyError("bad record 17")
    loader.set_batch_generator(broken_reader, places=[fluid.CPUPlace()])
    it = iter(loader())
    next(it)
    with pytest.raises(KeyError, match="bad record 17") as info:
        next(it)
    assert any(frame.name == "broken_reader" for frame in traceback.extract_tb(info.value.__traceback__))
    _wait_no_threads(loader)
    it = iter(loader())  # the loader is usable again: a new epoch reads the generator from its start
    assert np.array(next(it)[0]["x"]).shape == (1, 3)
    with pytest.raises(KeyError):
        next(it)


def test_non_iterable_reader_exception_reaches_executor_run():
    main, startup, x, y, out, loader = _net(iterable=False)

    def broken_reader():
        raise OSError("disk gone")
        yield
    loader.set_batch_generator(broken_reader)
    loader.start()
    with pytest.raises(OSError, match="disk gone"):
        fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    loader.reset()
    _wait_no_threads(loader)


def _endless():
    i = 0
    while True:
        yield np.full([2, 3], i, "float32"), np.zeros([2, 1], "int64")
        i += 1


def test_break_reiterate_reset_and_abandon_never_leave_threads():
    main, startup, x, y, out, loader = _net()
    loader.set_batch_generator(_endless, places=[fluid.CPUPlace()])
    for _ in range(3):
        for i, data in enumerate(loader()):  # noqa: B007  (data is read after the loop)
            if i == 2:
                break
        assert np.array(data[0]["x"])[0, 0] == 2  # a new epoch starts at the generator's beginning
    assert len(_loader_threads(loader)) <= 1
    nl = _net(iterable=False)[-1]
    nl.set_batch_generator(_endless)
    nl.start()
    nl.reset()  # mid-epoch, with the worker blocked on the full queue
    _wait_no_threads(nl)
    name = loader._name
    del loader, data
    gc.collect()
    deadline = time.time() + JOIN_S
    while any(t.name == name for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.01)
    assert not any(t.name == name for t in threading.enumerate()), "an abandoned loader leaked its thread"


def test_capacity_bounds_the_queue():
    produced = []

    def counting():
        for i in range(100):
            produced.append(i)
            yield np.zeros([1, 3], "float32"), np.zeros([1, 1], "int64")
    main, startup, x, y, out, loader = _net(capacity=3)
    loader.set_batch_generator(counting, places=[fluid.CPUPlace()])
    it = iter(loader())
    next(it)
    deadline = time.time() + JOIN_S
    while loader.queue.size() < 3 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    # one consumed, three queued, one made and waiting for room
    assert len(produced) == 5 and loader.queue.size() == 3
    it._stop_epoch()
    _wait_no_threads(loader)


@pytest.mark.parametrize("double_buffer", [True, False])
def test_prepare_batch_is_a_profiler_range_on_its_thread(tmp_path, double_buffer):
    main, startup, x, y, out, loader = _net(use_double_buffer=double_buffer)
    loader.set_sample_generator(_samples(8), batch_size=2, places=[fluid.CPUPlace()])
    exe = fluid.Executor(fluid.CPUPlace())
    trace = str(tmp_path / "trace.json")
    with fluid.profiler.profiler("CPU", profile_path=trace, print_report=False):
        # the main thread records first, so it keeps the profiler's thread index 0 that other tests expect
        with fluid.profiler.RecordEvent("consumer"):
            pass
        for data in loader():
            exe.run(main, feed=data, fetch_list=[out])
    evs = fluid.profiler.events()
    prep = [e for e in evs if e["name"] == "DataLoader::prepare_batch"]
    runs = [e for e in evs if e["name"] == "Executor::run"]
    assert len(prep) == 4 and len(runs) == 4
    # with double buffering the batches are prepared on the loader's thread, else on the consumer's
    assert ({e["thread"] for e in prep} & {e["thread"] for e in runs}) == (set() if double_buffer
                                                                           else {runs[0]["thread"]})
    rows = fluid.profiler.summary()
    assert any(r["event"] == "DataLoader::prepare_batch" and r["calls"] == 4 for r in rows)
    with open(trace) as f:
        names = [e["name"] for e in json.load(f)["traceEvents"]]
    assert names.count("DataLoader::prepare_batch") == 4


def test_cpu_places_and_cuda_places(monkeypatch):
    monkeypatch.delenv("CPU_NUM", raising=False)
    assert len(fluid.cpu_places()) == 1
    monkeypatch.setenv("CPU_NUM", "3")
    assert len(fluid.cpu_places()) == 3 and len(fluid.cpu_places(2)) == 2
    with pytest.raises(ValueError, match="device_count must be >= 1"):
        fluid.cpu_places(0)
    monkeypatch.setenv("CPU_NUM", "two")
    with pytest.raises(ValueError, match="CPU_NUM environment variable must be a positive integer, got 'two'"):
        fluid.cpu_places()
    if not core.is_compiled_with_cuda():
        with pytest.raises(RuntimeError, match="cuda_places: fluidlite was built without CUDA"):
            fluid.cuda_places()


def test_overlap_benchmark_runs_tiny_and_prints_its_figures(capsys):
    import importlib.util
    import os
    import re
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                        "dataloader_overlap.py")
    spec = importlib.util.spec_from_file_location("benchmark_dataloader_overlap", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--steps", "2", "--repeat", "1", "--batch_size", "4", "--kind", "io,python", "--work", "0.1"])
    out = capsys.readouterr().out
    for kind in ("io", "python"):
        assert "== generator kind: %s" % kind in out
        assert re.search(r"goal        DataLoader >= 1\.6x sync steps/s \(%s generator\): [0-9.]+x  (PASS|MISS)" % kind,
                         out)
    assert len(re.findall(r"^dataloader  [0-9.]+ \([0-9.]+-[0-9.]+\) steps/s   CPU use", out, re.M)) == 2
    assert len(re.findall(r"^ratio       [0-9.]+ \([0-9.]+-[0-9.]+\)$", out, re.M)) == 2
    with pytest.raises(SystemExit):
        mod.main(["--kind", "disk"])


def test_collecting_a_loader_whose_generator_blocks_does_not_wait_for_it():
    release, inside = threading.Event(), threading.Event()

    def blocking():
        yield np.zeros([1, 3], "float32"), np.zeros([1, 1], "int64")
        inside.set()
        release.wait()  # a generator stuck on a socket, say
        yield np.zeros([1, 3], "float32"), np.zeros([1, 1], "int64")
    main, startup, x, y, out, loader = _net()
    loader.set_batch_generator(blocking, places=[fluid.CPUPlace()])
    it = iter(loader())
    next(it)
    assert inside.wait(JOIN_S)
    name = loader._name
    del it, loader
    collector = threading.Thread(target=gc.collect)
    collector.start()
    collector.join(JOIN_S)
    assert not collector.is_alive(), "garbage collection waited on the blocked generator"
    release.set()  # the worker's next push meets the closed queue and it ends
    deadline = time.time() + JOIN_S
    while any(t.name == name for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.01)
    assert not any(t.name == name for t in threading.enumerate())


@pytest.mark.parametrize("iterable", [True, False])
def test_compiled_program_reads_from_the_loader(iterable):
    # Fluid's from_generator example: exe.run(CompiledProgram(main).with_data_parallel(loss_name=...), ...)
    main, startup, x, y, out, loader = _net(iterable=iterable)
    with fluid.program_guard(main, startup):
        total = fluid.layers.reduce_sum(out)
    loader.set_sample_generator(_samples(6), batch_size=2, places=fluid.cpu_places(1) if iterable else None)
    prog = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(1))
    exe = fluid.Executor(fluid.CPUPlace())
    sums = []
    if iterable:
        for data in loader():
            sums.append(float(exe.run(prog, feed=data, fetch_list=[total])[0][0]))
    else:
        loader.start()
        try:
            while True:
                sums.append(float(exe.run(prog, fetch_list=[total])[0][0]))
        except fluid.core.EOFException:
            loader.reset()
    assert sums == [(0 + 1) * 6.0, (2 + 3) * 6.0, (4 + 5) * 6.0]
