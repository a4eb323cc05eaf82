"""What of the GPU path can be checked without a GPU: that a machine with nvcc builds the CUDA runtime and kernels
into the module (CI's build check), what the places say when no device is visible, and DLPack with numpy and torch
on the CPU (the same code shares CUDA memory with CuPy on a GPU: tests/gpu/)."""
import os
import shutil

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import _core, core


def _nvcc_found():
    return bool(shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"))


@pytest.mark.skipif(not _nvcc_found() or os.environ.get("FLUIDLITE_CUDA", os.environ.get("FLUIDLITE_WITH_CUDA")) == "0",
                    reason="no nvcc on this machine, or FLUIDLITE_CUDA=0: the build is CPU-only by design")
def test_a_machine_with_nvcc_builds_the_cuda_runtime_in():
    assert core.is_compiled_with_cuda(), "nvcc is here but the module has no CUDA runtime: setup.py skipped the .cu"


@pytest.mark.skipif(not core.is_compiled_with_cuda(), reason="CPU-only build")
def test_cuda_build_without_a_device():
    if core.get_cuda_device_count() > 0:
        pytest.skip("a CUDA device is visible: tests/gpu covers it")
    with pytest.raises(RuntimeError, match=r"CUDAPlace\(0\): only 0 CUDA device\(s\) are visible"):
        fluid.CUDAPlace(0)
    with pytest.raises(RuntimeError, match="CUDAPinnedPlace: no CUDA device is visible"):
        fluid.CUDAPinnedPlace()
    with pytest.raises(core.EnforceNotMet, match=r"cuda_synchronize: CUDAPlace\(0\) does not exist: 0 CUDA device"):
        _core.cuda_synchronize(0)
    assert _core._device_events() == []


def test_cuda_place_without_cuda_build_or_device_names_why():
    if core.get_cuda_device_count() > 0:
        pytest.skip("a CUDA device is visible")
    with pytest.raises(RuntimeError, match=r"CUDAPlace\(0\): "):
        fluid.CUDAPlace(0)


def test_cpu_place_is_not_pinned_or_gpu():
    p = fluid.CPUPlace()
    assert isinstance(p, core.CPUPlace)
    assert not isinstance(p, core.CUDAPlace) and not isinstance(p, core.CUDAPinnedPlace)


# ---------------------------------------------------------------- DLPack on the CPU

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_shares_memory(dtype):
    a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    t = fluid.dlpack.from_dlpack(a)
    assert t.shape() == [3, 4] and str(t._place()) == "CPUPlace"
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    a[0, 0] = 1
    assert b[0, 0] == 1  # the same memory, both ways


def test_tensor_dlpack_device_and_capsule():
    t = core.LoDTensor()
    t.set(np.ones((2, 2), "float32"), fluid.CPUPlace())
    assert t.__dlpack_device__() == (1, 0)
    cap = fluid.dlpack.to_dlpack(t)
    u = fluid.dlpack.from_dlpack(cap)
    np.testing.assert_array_equal(np.array(u), np.ones((2, 2)))
    with pytest.raises(core.EnforceNotMet, match=r"expected an unused DLPack capsule.*named \"used_dltensor\""):
        fluid.dlpack.from_dlpack(cap)  # a capsule is consumed once
    with pytest.raises(BufferError, match=r"is on DLPack device \(1, 0\), not \(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))


def test_versioned_capsule_for_dlpack_1_consumers():
    t = core.LoDTensor()
    t.set(np.arange(3, dtype="int64"), fluid.CPUPlace())
    cap = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    np.testing.assert_array_equal(np.array(fluid.dlpack.from_dlpack(cap)), [0, 1, 2])


def test_a_shared_tensor_keeps_the_producer_alive():
    t = fluid.dlpack.from_dlpack(np.arange(1000, dtype="float64"))  # the only reference to the array is t's
    import gc
    gc.collect()
    assert np.array(t)[999] == 999


def test_non_contiguous_and_unsupported_inputs_raise():
    a = np.arange(6.0).reshape(2, 3).T
    with pytest.raises(core.EnforceNotMet, match=r"not contiguous \(strides \[1, 3\] elements\)"):
        fluid.dlpack.from_dlpack(a)
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        fluid.dlpack.from_dlpack([1, 2, 3])
    with pytest.raises(core.EnforceNotMet, match="has no fluidlite dtype"):
        fluid.dlpack.from_dlpack(np.arange(3, dtype="complex64"))


def _scale_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        y = fluid.layers.scale(x, 2.0)
    return main, y


def test_feed_torch_tensor_and_fetch_on_device():
    torch = pytest.importorskip("torch")
    main, y = _scale_program()
    exe = fluid.Executor(fluid.CPUPlace())
    out, = exe.run(main, feed={"x": torch.ones(2, 3)}, fetch_list=[y])
    np.testing.assert_array_equal(out, 2 * np.ones((2, 3)))
    t, = exe.run(main, feed={"x": torch.ones(2, 3)}, fetch_list=[y], fetch_on_device=True)
    assert isinstance(t, core.LoDTensor)
    np.testing.assert_array_equal(torch.from_dlpack(t).numpy(), 2 * np.ones((2, 3)))


def test_fetch_on_device_returns_tensors_that_own_their_memory():
    main, y = _scale_program()
    exe = fluid.Executor(fluid.CPUPlace())
    a, = exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y], fetch_on_device=True)
    b, = exe.run(main, feed={"x": 3 * np.ones((1, 3), "float32")}, fetch_list=[y], fetch_on_device=True)
    np.testing.assert_array_equal(np.array(a), [[2, 2, 2]])  # the second run did not overwrite the first result
    np.testing.assert_array_equal(np.array(b), [[6, 6, 6]])
