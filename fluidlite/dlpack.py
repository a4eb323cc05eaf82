"""DLPack: share tensors with CuPy, torch, JAX and numpy without copying them (and without a trip through the host
for GPU memory).

    t = fluid.dlpack.from_dlpack(cupy_array)    # a LoDTensor on the array's memory (kept alive by it)
    x = cupy.from_dlpack(t)                     # LoDTensor implements __dlpack__ / __dlpack_device__
    exe.run(feed={"x": cupy_array})             # fed as is (the feed op copies it on the device)
    out, = exe.run(fetch_list=[y], fetch_on_device=True); cupy.from_dlpack(out)

Streams follow the protocol: fluidlite passes its stream to a CUDA producer's ``__dlpack__(stream=...)``, so the
producer orders its pending writes before fluidlite's work; as a producer it waits for its own stream unless the
consumer passes ``stream=-1``. Paddle's spelling, ``fluid.dlpack.to_dlpack(t)`` (a capsule), works too.
"""
import numpy as np

from . import core
from ._core import _dlpack_device, _from_dlpack, _to_dlpack

__all__ = ["from_dlpack", "to_dlpack", "is_dlpack_array"]

_KDL_CUDA = 2


def is_dlpack_array(value):
    """Whether `value` is another library's array that speaks DLPack (numpy arrays take the buffer path)."""
    return hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__") and \
        not isinstance(value, (np.ndarray, core.LoDTensor))


def from_dlpack(obj):
    """A LoDTensor sharing the memory of `obj` (an object with ``__dlpack__``, or a DLPack capsule)."""
    if type(obj).__name__ == "PyCapsule":
        return _from_dlpack(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("from_dlpack: expected an object with __dlpack__ (CuPy, torch, JAX, numpy) or a DLPack "
                        "capsule, got %s" % type(obj).__name__)
    kwargs = {}
    device_type, device_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    if device_type == _KDL_CUDA:
        if not core.is_compiled_with_cuda() or device_id >= core.get_cuda_device_count():
            raise RuntimeError("from_dlpack: the array is on CUDA device %d, which this fluidlite cannot use (%s)"
                               % (device_id, "no CUDA build" if not core.is_compiled_with_cuda()
                                  else "%d device(s) visible" % core.get_cuda_device_count()))
        from ._core import _cuda_stream
        kwargs["stream"] = _cuda_stream(device_id)  # the producer orders its writes before our stream
    try:
        capsule = obj.__dlpack__(max_version=(1, 1), **kwargs)
    except TypeError:  # a producer from before DLPack 1.0 takes no max_version
        capsule = obj.__dlpack__(**kwargs)
    return _from_dlpack(capsule)


def to_dlpack(tensor):
    """A DLPack capsule sharing `tensor`'s memory (Paddle's paddle.utils.dlpack.to_dlpack)."""
    _wait_for(tensor, None)
    return _to_dlpack(tensor, False)


def _wait_for(tensor, stream):
    """Before a consumer reads a GPU tensor: fluidlite's stream has finished writing it (stream -1: the consumer
    takes care of ordering itself)."""
    place = tensor._place()
    if place.is_gpu_place() and stream != -1:
        core.cuda_synchronize(place.gpu_device_id())


def _tensor_dlpack(self, stream=None, max_version=None, dl_device=None, copy=None):
    if copy:
        raise BufferError("LoDTensor.__dlpack__: copy=True is not supported (share, then copy in the consumer)")
    if dl_device is not None and tuple(dl_device) != tuple(_dlpack_device(self)):
        raise BufferError("LoDTensor.__dlpack__: the tensor is on DLPack device %s, not %s"
                          % (tuple(_dlpack_device(self)), tuple(dl_device)))
    _wait_for(self, stream)
    return _to_dlpack(self, bool(max_version and max_version[0] >= 1))


core.LoDTensor.__dlpack__ = _tensor_dlpack
core.LoDTensor.__dlpack_device__ = lambda self: tuple(_dlpack_device(self))
