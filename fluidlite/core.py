"""fluidlite.core: the C++ runtime (``_core``) plus the few Python names Fluid scripts expect there.

Import order matters: scipy_openblas32 loads the BLAS library globally before ``_core`` needs it.
"""
import enum

import scipy_openblas32  # noqa: F401  (loads libscipy_openblas.so with RTLD_GLOBAL)

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
