"""fluid.transpiler: Fluid 1.x's program rewriters. Of its names fluidlite has the two memory passes, accepted
as no-ops (memory_optimization.py: eager deletion already frees every temporary), and DistributeTranspiler in
its collective modes (distributed/transpiler.py); docs/compat.md lists the rest."""
from .distributed.transpiler import DistributeTranspiler, DistributeTranspilerConfig  # noqa: F401
from .memory_optimization import memory_optimize, release_memory  # noqa: F401

__all__ = ["memory_optimize", "release_memory", "DistributeTranspiler", "DistributeTranspilerConfig"]
