"""fluidlite.core: the C++ runtime (``_core``) plus the few Python names Fluid scripts expect there.

Import order matters: scipy_openblas32 loads the BLAS library globally before ``_core`` needs it, and
it loads with OPENBLAS_NUM_THREADS=1 so that OpenBLAS starts no threads of its own: fluidlite's thread
pool splits GEMMs itself (csrc/thread_pool.h). numpy is imported first so its own OpenBLAS has
already read the variable, which is restored at once.
"""
import enum
import os

import numpy  # noqa: F401


def _load_single_threaded_blas():
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import scipy_openblas32  # noqa: F401  (loads libscipy_openblas.so with RTLD_GLOBAL)
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved


_load_single_threaded_blas()

# After the BLAS library is loaded (see above), hence not at the top.
from ._core import *  # noqa: E402,F401,F403
from ._core import (  # noqa: E402,F401
    EnforceNotMet, FeedError, LoDTensor, Place, Scope, _parallel_for_check, _pool_policy_simulate,
    _set_fetch_scalar_type, cpu_place, cuda_place, dtypes, is_compiled_with_cuda, var_kinds)


class VarDesc:
    """Namespace mirroring Fluid's ``core.VarDesc.VarType``: the dtypes and variable kinds, read from the C++
    tables (csrc/dtype.h, csrc/desc.h)."""

    VarType = enum.IntEnum("VarType", sorted([(d["enum"], d["value"]) for d in dtypes()] + list(var_kinds().items()),
                                             key=lambda kv: kv[1]), module=__name__, qualname="VarDesc.VarType")
    VarType.__str__ = lambda self: "VarType." + self.name


def get_cuda_device_count():
    """Number of visible CUDA devices (0 for a CPU-only build)."""
    if not is_compiled_with_cuda():
        return 0
    from ._core import cuda_device_count
    return cuda_device_count()


# ---------------------------------------------------------------- places
# Fluid's core.CPUPlace / CUDAPlace / CUDAPinnedPlace are classes: scripts call them (``core.CPUPlace()``)
# and test places with isinstance (``isinstance(place, core.CUDAPlace)``). Here one C++ Place type stands
# for all of them; these classes construct it and answer isinstance by the place's kind.

class _PlaceKind(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Place) and cls._is_kind(obj)


class CPUPlace(metaclass=_PlaceKind):
    """``CPUPlace()``: the host."""

    def __new__(cls):
        return cpu_place()

    @staticmethod
    def _is_kind(place):
        return place.is_cpu_place()


class CUDAPlace(metaclass=_PlaceKind):
    """``CUDAPlace(device_id)``: a GPU (needs a CUDA build and the device)."""

    def __new__(cls, device_id=0):
        if not is_compiled_with_cuda():
            raise RuntimeError("CUDAPlace(%d): fluidlite was built without CUDA (nvcc was not found at build time)"
                               % device_id)
        if device_id >= get_cuda_device_count():
            raise RuntimeError("CUDAPlace(%d): only %d CUDA device(s) are visible"
                               % (device_id, get_cuda_device_count()))
        return cuda_place(device_id)

    @staticmethod
    def _is_kind(place):
        return place.is_gpu_place()


class CUDAPinnedPlace(metaclass=_PlaceKind):
    """``CUDAPinnedPlace()``: page-locked host memory (needs a CUDA build and a device). Host code reads it as CPU
    memory; copies from it to a GPU are asynchronous. ``LoDTensor.set(array, CUDAPinnedPlace())`` stages a batch."""

    def __new__(cls):
        if not is_compiled_with_cuda():
            raise RuntimeError("CUDAPinnedPlace: fluidlite was built without CUDA (nvcc was not found at build time)")
        if get_cuda_device_count() == 0:
            raise RuntimeError("CUDAPinnedPlace: no CUDA device is visible (pinned memory needs the CUDA driver)")
        from ._core import cuda_pinned_place
        return cuda_pinned_place()

    @staticmethod
    def _is_kind(place):
        return place.is_cuda_pinned_place()


def _register_cuda_library_dirs():
    """cuBLAS is opened at first use (csrc/cuda/blas.cu): tell it where the nvidia-cublas wheel put it, without
    importing anything (the wheels' lib folders: nvidia/cu13/lib, nvidia/cublas/lib)."""
    import importlib.util
    for mod in ("nvidia.cu13", "nvidia.cublas"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            lib = os.path.join(root, "lib")
            if os.path.isdir(lib):
                from ._core import _add_cuda_library_dir
                _add_cuda_library_dir(lib)


if is_compiled_with_cuda():
    _register_cuda_library_dirs()


class EOFException(Exception):
    """Raised by Executor.run when a non-iterable DataLoader/PyReader or a py_reader of the program has no
    more data in this epoch; call the reader's reset() (then start() for the next epoch)."""
