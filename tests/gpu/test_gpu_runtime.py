"""The CUDA runtime on a device: places, copies between every pair of places, the caching allocator, the data
transform of an op that runs its CPU kernel in a GPU program, device errors, profiler GPU events and the report's
GPU column, the GLOG copy lines, and DLPack with CuPy and torch."""
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import _core, core, profiler

def gpu():
    return fluid.CUDAPlace(0)


def _tensor(a, place):
    t = core.LoDTensor()
    t.set(a, place)
    return t


def test_places():
    p = gpu()
    assert isinstance(p, core.CUDAPlace) and not isinstance(p, core.CPUPlace)
    assert str(p) == "CUDAPlace(0)"
    pinned = fluid.CUDAPinnedPlace()
    assert isinstance(pinned, core.CUDAPinnedPlace) and str(pinned) == "CUDAPinnedPlace"
    with pytest.raises(RuntimeError, match=r"CUDAPlace\(%d\): only" % core.get_cuda_device_count()):
        fluid.CUDAPlace(core.get_cuda_device_count())


@pytest.mark.parametrize("src", ["cpu", "gpu", "pinned"])
@pytest.mark.parametrize("dst", ["cpu", "gpu", "pinned"])
def test_copies_between_every_pair_of_places(src, dst):
    places = {"cpu": fluid.CPUPlace(), "gpu": gpu(), "pinned": fluid.CUDAPinnedPlace()}
    a = np.random.RandomState(0).rand(257, 3).astype("float32")
    t = _tensor(a, places[src])
    u = core.LoDTensor()
    u.set(np.array(t), places[dst])  # np.array copies a GPU tensor to the host
    assert str(u._place()) == str(places[dst])
    np.testing.assert_array_equal(np.array(u), a)


def test_allocator_caches_and_counts():
    p = gpu()
    core.release_cached_memory(p)
    before = core.memory_stats(p)
    for _ in range(5):
        _tensor(np.ones((1024, 1024), "float32"), p)  # 4 MiB, freed at once
    after = core.memory_stats(p)
    assert after["num_allocs"] - before["num_allocs"] == 5
    assert after["num_system_allocs"] - before["num_system_allocs"] == 1  # the rest came from the cache
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["bytes_cached"] >= 4 << 20
    core.release_cached_memory(p)
    assert core.memory_stats(p)["bytes_cached"] == 0


def _train_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def test_profiler_records_gpu_kernels_and_copies():
    main, startup, loss = _train_program()
    exe = fluid.Executor(gpu())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.ones((8, 4), "float32")}
    with _profiling():
        for _ in range(3):
            exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    evs = profiler.events()
    kernels = [e for e in evs if e["category"] == "GPUKernel"]
    copies = [e for e in evs if e["category"] == "GPUMemcpy"]
    assert {"mul", "elementwise_add", "mean", "sgd"} <= {e["name"] for e in kernels}
    assert {"memcpy:CPU->GPU", "memcpy:GPU->CPU"} <= {e["name"] for e in copies}
    assert all(e["bytes"] > 0 for e in copies)
    text = profiler.report()
    row = next(line for line in text.splitlines() if line.startswith("thread0::mul ") or line.startswith("mul "))
    gpu_ms = float(re.findall(r"([0-9.]+) \(([0-9.]+)\)", row)[1][0])
    assert gpu_ms > 0, row
    assert "GPU Summary" in text and "CUDAPlace(0):" in text


class _profiling:
    """Records with GPU time ('All'), no report printed or written."""

    def __enter__(self):
        profiler.start_profiler("All")

    def __exit__(self, *exc):
        profiler.stop_profiler(profile_path=None, print_report=False)


def test_trace_has_a_gpu_stream_track(tmp_path):
    import json
    main, startup, loss = _train_program()
    exe = fluid.Executor(gpu())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with _profiling():
        exe.run(main, feed={"x": np.ones((8, 4), "float32")}, fetch_list=[loss], scope=scope)
    path = profiler.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.load(open(path))["traceEvents"]
    names = {e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    assert "GPU stream (CUDAPlace(0))" in names


def test_copy_log_lines_name_the_stream_and_the_cause(capfd):
    main, startup, loss = _train_program()
    exe = fluid.Executor(gpu())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    fluid.set_vlog_level(4)
    try:
        exe.run(main, feed={"x": np.ones((8, 4), "float32")}, fetch_list=[loss], scope=scope)
    finally:
        fluid.set_vlog_level(0)
    err = capfd.readouterr().err
    assert re.search(r"memory::Copy 128 Bytes from CPUPlace to CUDAPlace\(0\) by stream\(0x[0-9a-f]+\) for feed", err)
    assert re.search(r"memory::Copy 4 Bytes from CUDAPlace\(0\) to CPUPlace by stream\(0x[0-9a-f]+\) for fetch", err)


def test_cpu_kernel_in_a_gpu_program_copies_its_inputs_with_the_cause():
    """The notes' @LR_DECAY_COUNTER@ case: increment on a CPU kernel (force_cpu) in a GPU program."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        counter = fluid.layers.fill_constant([1], "float32", 0.0, force_cpu=True)
        y = fluid.layers.elementwise_add(x, counter)
    exe = fluid.Executor(gpu())
    with _profiling():
        out, = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[y])
    np.testing.assert_array_equal(out, np.ones((2, 4)))
    evs = profiler.events()
    moved = [e for e in evs if e["category"] == "Memcpy" and "place_transform" in (e["args"] or "")]
    assert moved, "the CPU tensor read by a GPU kernel was not copied as a place transform"
    assert counter.name in moved[0]["args"] and "elementwise_add" in moved[0]["args"]


def test_lookup_table_id_out_of_range_raises_naming_the_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", [1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[10, 4])
    exe = fluid.Executor(gpu())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(core.EnforceNotMet, match=r"op lookup_table: an id of Ids \(input Ids 'ids'\) is out of range: "
                                                 r"element 1 is 12, expected \[0, 10\)"):
        exe.run(main, feed={"ids": np.array([[1], [12]], "int64")}, fetch_list=[emb], scope=scope)
    out, = exe.run(main, feed={"ids": np.array([[1], [2]], "int64")}, fetch_list=[emb], scope=scope)  # recovers
    assert out.shape == (2, 4)


def test_dlpack_with_cupy_shares_memory():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    t = fluid.dlpack.from_dlpack(a)
    assert str(t._place()) == "CUDAPlace(0)"
    b = cupy.from_dlpack(t)
    assert b.data.ptr == a.data.ptr  # no copy either way
    x = fluid.layers.data("x", [4])
    y = fluid.layers.scale(x, 2.0)
    exe = fluid.Executor(gpu())
    out, = exe.run(feed={"x": a}, fetch_list=[y], fetch_on_device=True)
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(out)), 2 * np.arange(12).reshape(3, 4))


def test_dlpack_with_torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    a = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    t = fluid.dlpack.from_dlpack(a)
    b = torch.from_dlpack(t)
    assert b.data_ptr() == a.data_ptr()
    np.testing.assert_array_equal(np.array(t), a.cpu().numpy())


def test_cublas_is_found():
    assert "libcublas" in _core.cublas_library()


@pytest.mark.parametrize("model", ["lstm", "lstm_primitive"])
def test_every_host_device_copy_of_the_gpu_lstm_has_its_cause(model):
    """The tuning notes' copy analysis on the GPU LSTM: each copy between the host and the device is recorded with
    the op, the variables and why it was made (feed, fetch, a place transform, a step's memory...)."""
    from fluidlite.bench import models
    from fluidlite.profiler.report import event_args
    mod = models.load(model)
    built = mod.build(8, 0)
    exe = fluid.Executor(gpu())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed = built.feed()
    exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    with _profiling():
        exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    copies = [e for e in profiler.events() if e["category"] == "Memcpy" and "GPU" in e["name"]]
    assert copies
    for e in copies:
        a = event_args(e)
        assert a.get("cause") not in (None, "other", "unattributed") and a.get("op"), (e["name"], a)
    advice = profiler.advise(print_report=False)
    causes = {f.evidence["cause"] for f in advice if f.kind == "copies"}
    assert causes <= {event_args(e)["cause"] for e in copies}
