"""fluid.cpu_places / cuda_places / cuda_pinned_places: the place lists that CompiledProgram and
DataLoader take."""
import os

from . import core

__all__ = ["cpu_places", "cuda_places", "cuda_pinned_places"]


def cpu_num():
    """Fluid's CPU device count: env CPU_NUM, else 1 (Fluid also prints a hint to set CPU_NUM; not here).
    The one reader of CPU_NUM: cpu_places, CompiledProgram, ParallelExecutor and DataFeeder use it."""
    value = os.environ.get("CPU_NUM")
    if value is None:
        return 1
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError("the CPU_NUM environment variable must be a positive integer, got %r" % value)
    return n


def cpu_places(device_count=None):
    """`device_count` CPUPlaces (default: env CPU_NUM, else 1)."""
    device_count = cpu_num() if device_count is None else int(device_count)
    if device_count < 1:
        raise ValueError("cpu_places: device_count must be >= 1, got %d" % device_count)
    return [core.CPUPlace() for _ in range(device_count)]


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
    """`device_count` CUDAPinnedPlaces (default: env CPU_NUM, else 1), as Fluid: page-locked host memory."""
    _require_cuda("cuda_pinned_places")
    return [core.CUDAPinnedPlace() for _ in range(int(device_count if device_count is not None else cpu_num()))]
