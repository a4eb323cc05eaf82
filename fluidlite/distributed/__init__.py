"""Data-parallel training over MPI (docs/distributed.md): the process group (comm), the program rewrite that adds
Fluid's collective ops (collective), each rank's share of the data (data: shard_reader), and the launcher
(``python -m fluidlite.distributed.launch``). Users reach it through Fluid's API:
``fluid.incubate.fleet.collective.fleet`` and ``fluid.transpiler.DistributeTranspiler``."""
from . import comm  # noqa: F401
from .comm import init, rank, size  # noqa: F401
from .data import shard_reader  # noqa: F401
