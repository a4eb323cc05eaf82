"""LoDTensor <-> numpy for every dtype, shape/lod, the allocator's accounting, scopes and variables."""
import gc

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.framework import VarType

DTYPES = ["float32", "float64", "int32", "int64", "bool", "float16", "int8", "uint8", "int16"]


def _sample(dtype, shape):
    rng = np.random.RandomState(7)
    if dtype == "bool":
        return np.asarray(rng.rand(*shape) > 0.5)
    if dtype.startswith("float"):
        return np.asarray(rng.randn(*shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.randint(info.min, info.max, size=shape, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (3, 4), (2, 1, 3), (0, 5)])
def test_set_and_back_round_trip(dtype, shape):
    a = _sample(dtype, shape)
    t = core.LoDTensor()
    assert not t._is_initialized()
    t.set(a, fluid.CPUPlace())
    assert t._is_initialized()
    assert t.shape() == list(shape)
    assert VarType(t._dtype()).name == {"float32": "FP32", "float64": "FP64", "int32": "INT32", "int64": "INT64",
                                        "bool": "BOOL", "float16": "FP16", "int8": "INT8", "uint8": "UINT8",
                                        "int16": "INT16"}[dtype]
    b = np.array(t)
    assert b.dtype == np.dtype(dtype) and b.shape == shape
    np.testing.assert_array_equal(b, a)
    assert not np.shares_memory(a, b)
    # np.array copies: editing the result or the source changes nothing in the tensor
    if a.size:
        a.flat[0] = a.flat[-1] if dtype != "bool" else not a.flat[0]
        b.flat[0] = b.flat[-1] if dtype != "bool" else not b.flat[0]
    np.testing.assert_array_equal(np.array(t), _sample(dtype, shape))
    # buffer protocol (memoryview) shares the tensor's memory
    m = np.asarray(memoryview(t))
    assert m.dtype == np.dtype(dtype) and m.shape == shape
    np.testing.assert_array_equal(m, _sample(dtype, shape))


def test_array_dtype_argument_and_share_numpy():
    t = core.LoDTensor()
    t.set(np.arange(6, dtype="int64").reshape(2, 3))
    f = np.array(t, dtype="float32")
    assert f.dtype == np.float32 and f.tolist() == [[0, 1, 2], [3, 4, 5]]
    v = t._share_numpy()
    assert v.tolist() == [[0, 1, 2], [3, 4, 5]]
    del t
    gc.collect()
    assert v.tolist() == [[0, 1, 2], [3, 4, 5]]  # the view keeps the buffer alive


def test_set_non_contiguous_and_other_inputs():
    base = np.arange(200000, dtype="float64").reshape(1000, 200)
    for a in [base[:, ::3], base.T, np.asfortranarray(base[:10]), base[::-2, 5:9]]:
        t = core.LoDTensor()
        t.set(a)
        np.testing.assert_array_equal(np.array(t), a)
    t = core.LoDTensor()
    t.set([[1.5, 2.5]])
    assert np.array(t).dtype == np.float64 and np.array(t).tolist() == [[1.5, 2.5]]
    with pytest.raises(TypeError, match="not supported"):
        t.set(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="not supported"):
        t.set(np.ones(2, "complex64"))
    assert np.array(t).tolist() == [[1.5, 2.5]]  # a failed set leaves the tensor as it was


def test_reset_with_other_shape_and_dtype():
    t = core.LoDTensor()
    t.set(np.ones((4, 4), "float32"))
    t.set(np.arange(3, dtype="int64"))
    assert t.shape() == [3] and np.array(t).dtype == np.int64 and np.array(t).tolist() == [0, 1, 2]
    t.set(np.zeros((2, 50), "float64"))
    assert t.shape() == [2, 50] and np.array(t).sum() == 0


def test_uninitialized_tensor_errors():
    t = core.LoDTensor()
    assert t.shape() == []
    with pytest.raises(core.EnforceNotMet, match="tensor holds no memory"):
        np.array(t)
    with pytest.raises(core.EnforceNotMet, match="tensor holds no memory"):
        t._share_numpy()
    with pytest.raises(BufferError) as ei:  # the buffer protocol wraps the EnforceNotMet
        memoryview(t)
    assert "tensor holds no memory" in str(ei.value.__cause__)
    assert "LoDTensor(" in repr(t)


def test_dims_ahead_of_buffer_raise_instead_of_reading_past_it():
    t = core.LoDTensor()
    t.set(np.ones(2, "float32"))
    if core.get_cuda_device_count() > 0:
        pytest.skip("a CUDA device is visible: the set would succeed")
    with pytest.raises(core.EnforceNotMet, match=r"without CUDA|CUDAPlace\(0\) does not exist: 0 CUDA device"):
        t.set(np.zeros(1000, "float32"), core.cuda_place(0))
    for read in (np.array, lambda x: x._share_numpy(), lambda x: memoryview(x).__cause__):
        with pytest.raises((core.EnforceNotMet, BufferError)) as ei:
            read(t)
        err = ei.value.__cause__ if isinstance(ei.value, BufferError) else ei.value
        assert "tensor dims [1000] (float32) do not fit its buffer of 8 bytes" in str(err)
    t.set(np.arange(3, dtype="float32"))  # a good set repairs it
    assert np.array(t).tolist() == [0, 1, 2]


def test_lod_round_trip():
    t = core.LoDTensor()
    t.set(np.arange(10, dtype="float32").reshape(5, 2))
    assert t.lod() == []
    t.set_lod([[0, 2, 5]])
    assert t.lod() == [[0, 2, 5]]
    t.set_lod([[0, 1, 2], [0, 3, 5]])
    assert t.lod() == [[0, 1, 2], [0, 3, 5]]
    np.testing.assert_array_equal(np.array(t), np.arange(10, dtype="float32").reshape(5, 2))
    t.set_lod([])
    assert t.lod() == []


def test_memory_stats_in_use_and_peak():
    gc.collect()
    core.release_cached_memory()
    s0 = core.memory_stats()
    assert set(s0) == {"bytes_in_use", "peak_bytes", "num_allocs", "num_frees", "bytes_cached",
                       "num_system_allocs"}
    assert s0["bytes_cached"] == 0
    assert s0["peak_bytes"] >= s0["bytes_in_use"] >= 0
    core.reset_peak_memory()
    assert core.memory_stats()["peak_bytes"] == s0["bytes_in_use"]
    t = core.LoDTensor()
    t.set(np.zeros((1000, 250), "float32"))  # 1,000,000 bytes
    s1 = core.memory_stats()
    assert s1["bytes_in_use"] - s0["bytes_in_use"] == 1000000
    assert s1["num_allocs"] == s0["num_allocs"] + 1
    assert s1["peak_bytes"] >= s0["bytes_in_use"] + 1000000
    u = core.LoDTensor()
    u.set(np.zeros(3000, "float64"))  # 24,000 bytes
    del t
    s2 = core.memory_stats()
    assert s2["bytes_in_use"] == s0["bytes_in_use"] + 24000
    assert s2["num_frees"] == s1["num_frees"] + 1
    assert s2["peak_bytes"] == s0["bytes_in_use"] + 1024000  # both were alive at once
    # the freed 1 MB block (>= 64 KiB) is kept for reuse: the next tensor of that size takes it
    assert s2["bytes_cached"] == 1000000
    w = core.LoDTensor()
    w.set(np.zeros((250, 1000), "float32"))
    s_w = core.memory_stats()
    assert s_w["num_system_allocs"] == s2["num_system_allocs"] and s_w["bytes_cached"] == 0
    del w
    assert core.memory_stats()["bytes_cached"] == 1000000
    core.release_cached_memory()
    assert core.memory_stats()["bytes_cached"] == 0
    # resetting to a size that fits reuses the buffer: no new allocation
    allocs = core.memory_stats()["num_allocs"]
    u.set(np.ones(1000, "float64"))
    assert core.memory_stats()["num_allocs"] == allocs
    v = u._share_numpy()
    del u
    assert core.memory_stats()["bytes_in_use"] == s0["bytes_in_use"] + 24000  # the view holds it
    del v
    gc.collect()
    s3 = core.memory_stats()
    assert s3["bytes_in_use"] == s0["bytes_in_use"]
    core.reset_peak_memory()
    assert core.memory_stats()["peak_bytes"] == s3["bytes_in_use"]


def _scale_chain():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1000], dtype="float64")
        y = fluid.layers.scale(fluid.layers.scale(x, scale=2.0), scale=3.0)
    return main, y


def test_memory_of_a_program_run_is_accounted_and_released():
    # Eager deletion (Fluid's garbage collector): x's fed copy and the first scale's output are released
    # after their last reader, so only the fetched result outlives the run.
    main, y = _scale_chain()
    exe = fluid.Executor(fluid.CPUPlace())
    gc.collect()
    base = core.memory_stats()["bytes_in_use"]
    core.reset_peak_memory()
    scope = fluid.Scope()
    r, = exe.run(main, feed={"x": np.ones((10, 1000))}, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(r, np.full((10, 1000), 6.0))
    assert core.memory_stats()["bytes_in_use"] - base == 80000  # the fetched result
    # never more than three 80,000-byte tensors at once (input, output, and the fetch copy)
    assert 2 * 80000 <= core.memory_stats()["peak_bytes"] - base <= 3 * 80000
    del r
    assert core.memory_stats()["bytes_in_use"] == base
    # the next run takes the released blocks back from the allocator's cache, not from the system
    system = core.memory_stats()["num_system_allocs"]
    r, = exe.run(main, feed={"x": np.ones((10, 1000))}, fetch_list=[y], scope=scope)
    assert core.memory_stats()["num_system_allocs"] == system
    del r
    main._exec_cache.clear()
    gc.collect()
    assert core.memory_stats()["bytes_in_use"] == base
    assert scope.num_kids() == 0


def test_eager_deletion_off_keeps_temporaries(monkeypatch):
    # FLAGS_eager_delete_tensor_gb < 0 (read when the program is prepared), as in Fluid: temporaries keep
    # their buffers between runs.
    monkeypatch.setenv("FLAGS_eager_delete_tensor_gb", "-1")
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")  # the chain's temporaries as written
    main, y = _scale_chain()
    exe = fluid.Executor(fluid.CPUPlace())
    gc.collect()
    base = core.memory_stats()["bytes_in_use"]
    scope = fluid.Scope()
    r, = exe.run(main, feed={"x": np.ones((10, 1000))}, fetch_list=[y], scope=scope)
    # x (fed copy), two temporaries and the fetched result, 80,000 bytes each
    assert core.memory_stats()["bytes_in_use"] - base == 4 * 80000
    del r
    assert core.memory_stats()["bytes_in_use"] - base == 3 * 80000
    main._exec_cache.clear()  # the prepared program owns the kid scope with the temporaries
    gc.collect()
    assert core.memory_stats()["bytes_in_use"] == base


def test_scopes_variables_and_tensors():
    s = fluid.Scope()
    assert s.find_var("w") is None and s.local_var_names() == []
    w = s.var("w")
    assert s.var("w").kind() == w.kind() == "nothing" and not w.is_initialized()
    w.get_tensor().set(np.arange(4, dtype="float32"))
    assert w.kind() == "LoDTensor"
    # the handle from find_var is the same variable: writes through it are seen everywhere
    s.find_var("w").get_tensor().set(np.full(4, 9.0, "float32"))
    assert np.array(w.get_tensor()).tolist() == [9.0] * 4
    kid = s.new_scope()
    assert kid.find_var("w") is not None and kid.find_local_var("w") is None
    kid.var("k").get_tensor().set(np.zeros(1, "int32"))
    assert s.find_var("k") is None
    live = core.live_scopes()
    k2 = s.new_scope()
    assert core.live_scopes() == live + 1 and s.num_kids() == 2
    del k2  # a Python handle does not own a kid: it lives until the parent drops it
    gc.collect()
    assert core.live_scopes() == live + 1
    s.drop_kids()
    assert core.live_scopes() == live - 1 and s.num_kids() == 0
    with pytest.raises(core.EnforceNotMet, match="deleted"):
        kid.find_var("w")
    s.erase_vars(["w", "not-there"])
    assert s.find_var("w") is None
    # a scope owned by Python frees its kids when collected
    t = fluid.Scope()
    t.new_scope().new_scope()
    assert core.live_scopes() == live + 1
    del t
    gc.collect()
    assert core.live_scopes() == live - 1


def test_global_scope_and_scope_guard_nesting():
    g = fluid.global_scope()
    a, b = fluid.Scope(), fluid.Scope()
    with fluid.scope_guard(a):
        assert fluid.global_scope() is a
        with fluid.scope_guard(b):
            assert fluid.global_scope() is b
        assert fluid.global_scope() is a
    assert fluid.global_scope() is g
    with pytest.raises(RuntimeError):
        with fluid.scope_guard(a):
            raise RuntimeError("inside")
    assert fluid.global_scope() is g


def test_variable_handles_outlive_drop_kids_and_erase_vars():
    # Handles share ownership with the scope: after the scope lets go of a variable, a handle kept in
    # Python still reads and writes its own (now detached) variable instead of freed memory.
    parent = fluid.Scope()
    kid = parent.new_scope()
    v = kid.var("x")
    t = v.get_tensor()
    t.set(np.arange(3, dtype="float32"), fluid.CPUPlace())
    parent.drop_kids()
    assert v.is_initialized() and v.kind() == "LoDTensor"
    np.testing.assert_array_equal(np.array(t), [0, 1, 2])
    np.testing.assert_array_equal(np.array(v.get_tensor()), [0, 1, 2])
    with pytest.raises(core.EnforceNotMet, match="this scope was deleted"):
        kid.var("y")
    s = fluid.Scope()
    w = s.var("y")
    w.get_tensor().set(np.ones(4, "float64"), fluid.CPUPlace())
    s.erase_vars(["y"])
    assert s.find_var("y") is None
    np.testing.assert_array_equal(np.array(w.get_tensor()), np.ones(4))
    w.get_tensor().set(np.zeros(2, "float64"), fluid.CPUPlace())  # the detached variable, not the scope
    assert s.find_var("y") is None
    assert not s.var("y").is_initialized()  # a new variable of that name starts empty
    del v, t, w
    gc.collect()
