"""fluidlite: a small, fast runtime for PaddlePaddle Fluid 1.x static-graph programs.

``import fluidlite as fluid`` is meant to be enough to port a Fluid 1.x script.
"""
from . import core  # noqa: F401  (first: loads BLAS and the C++ core)
from . import backward, framework, initializer, layers, unique_name  # noqa: F401
from . import clip, compiler, io, optimizer, profiler, regularizer, transpiler  # noqa: F401
from . import nets  # noqa: F401
from . import average, metrics  # noqa: F401
from . import dataset, reader  # noqa: F401  (paddle.reader, paddle.dataset)
from . import incubate  # noqa: F401  (fluid.incubate.fleet: collective training)
from . import dlpack  # noqa: F401  (fluid.dlpack: CuPy, torch and JAX arrays without copies)
from .batch import batch  # noqa: F401  (paddle.batch)
from .backward import append_backward, gradients  # noqa: F401
from .compiler import BuildStrategy, CompiledProgram, ExecutionStrategy  # noqa: F401
from .parallel_executor import ParallelExecutor  # noqa: F401
from .memory_optimization import memory_optimize, release_memory  # noqa: F401
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig  # noqa: F401
from .io import load, save  # noqa: F401
from .dataloader import DataLoader, PyReader  # noqa: F401
from .data import data  # noqa: F401
from .data_feeder import DataFeeder  # noqa: F401
from .lod_tensor import create_lod_tensor, create_random_int_lodtensor  # noqa: F401
from .places import cpu_places, cuda_pinned_places, cuda_places  # noqa: F401
from .core import is_compiled_with_cuda  # noqa: F401
from .input import embedding, one_hot  # noqa: F401
from .flags import get_flags, set_flags  # noqa: F401
from .executor import CPUPlace, CUDAPinnedPlace, CUDAPlace, Executor, Scope, global_scope, scope_guard  # noqa: F401
from .framework import (  # noqa: F401
    Operator, Parameter, Program, Variable, default_main_program, default_startup_program, in_dygraph_mode,
    name_scope, program_guard,
)
from .log import get_vlog_level, set_vlog_level, set_vmodule, vlog_guard  # noqa: F401
from .param_attr import ParamAttr, WeightNormParamAttr  # noqa: F401

Tensor = LoDTensor = core.LoDTensor
LoDTensorArray = core.LoDTensorArray

__version__ = "0.1.0"

# Last: Fluid 1.x names fluidlite lacks raise an AttributeError that says so and points at docs/compat.md.
from . import _compat  # noqa: E402
_compat.install_all()
