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

from ._core import *  # noqa: F401,F403
from ._core import EnforceNotMet, LoDTensor, Scope, cpu_place, cuda_place, is_compiled_with_cuda  # noqa: F401


class VarDesc:
    """Namespace mirroring Fluid's ``core.VarDesc.VarType``."""

    class VarType(enum.IntEnum):
        BOOL = 0
        INT16 = 1
        INT32 = 2
        INT64 = 3
        FP16 = 4
        FP32 = 5
        FP64 = 6
        LOD_TENSOR = 7
        SELECTED_ROWS = 8
        FEED_MINIBATCH = 9
        FETCH_LIST = 10
        STEP_SCOPES = 11
        LOD_RANK_TABLE = 12
        LOD_TENSOR_ARRAY = 13
        RAW = 17
        UINT8 = 20
        INT8 = 21

        def __str__(self):
            return "VarType." + self.name


def get_cuda_device_count():
    """Number of visible CUDA devices (0 for a CPU-only build)."""
    if not is_compiled_with_cuda():
        return 0
    from ._core import cuda_device_count
    return cuda_device_count()
