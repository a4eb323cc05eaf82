"""fluid.cpu_places / cuda_places / cuda_pinned_places: the place lists that CompiledProgram and
DataLoader take."""
import os

from . import core

__all__ = ["cpu_places", "cuda_places", "cuda_pinned_places"]


def _cpu_num():
    """Fluid's CPU device count: env CPU_NUM, else 1 (Fluid also prints a hint to set CPU_NUM; not here)."""
    value = os.environ.get("CPU_NUM")
    if value is None:
        return 1
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError("the environment variable CPU_NUM must be a positive integer, got %r" % value)
    return n


def cpu_places(device_count=None):
    """`device_count` CPUPlaces (default: env CPU_NUM, else 1)."""
    if device_count is None:
        device_count = _cpu_num()
    return [core.CPUPlace() for _ in range(int(device_count))]


def _require_cuda(what):
    if not core.is_compiled_with_cuda():
        raise RuntimeError("%s: fluidlite was built without CUDA (nvcc was not found at build time); "
                           "use fluid.cpu_places()" % what)


def cuda_places(device_ids=None):
    """CUDAPlaces for `device_ids` (default: env FLAGS_selected_gpus, else every visible device)."""
    _require_cuda("cuda_places")
    if device_ids is None:
        selected = os.environ.get("FLAGS_selected_gpus")
        if selected:
            device_ids = [int(s) for s in selected.split(",")]
        else:
            device_ids = range(core.get_cuda_device_count())
    elif not isinstance(device_ids, (list, tuple)):
        device_ids = [device_ids]
    return [core.CUDAPlace(int(i)) for i in device_ids]


def cuda_pinned_places(device_count=None):
    """Fluid's pinned host places: not supported (core.CUDAPinnedPlace raises after the CUDA check)."""
    _require_cuda("cuda_pinned_places")
    return [core.CUDAPinnedPlace() for _ in range(int(device_count if device_count is not None else _cpu_num()))]
