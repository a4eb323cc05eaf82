"""Fluid 1.x ``paddle.dataset``: public data sets as reader creators (see docs/data.md).

Each module downloads Paddle's files (same URLs and md5 sums) into ``$FLUIDLITE_DATA_HOME`` or
``~/.cache/fluidlite/dataset`` on first use. The modules are imported on first access
(``fluidlite.dataset.mnist``), so ``import fluidlite`` does not pay for them.
"""
import importlib

__all__ = ["mnist", "imikolov", "imdb", "cifar", "movielens", "conll05", "uci_housing", "wmt16", "common"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module %r has no attribute %r (it holds paddle.dataset's modules %s; Fluid's "
                         "fluid.dataset DatasetFactory API is not part of it)" % (__name__, name, ", ".join(__all__)))


def __dir__():
    return sorted(set(globals()) | set(__all__))
