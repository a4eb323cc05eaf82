"""Fluid 1.x ``paddle.dataset``: public data sets as reader creators (see docs/data.md).

Each module downloads Paddle's files (same URLs and md5 sums) into ``$FLUIDLITE_DATA_HOME`` or
``~/.cache/fluidlite/dataset`` on first use; nothing is read or downloaded at import.
"""
from . import cifar, common, conll05, imdb, imikolov, mnist, movielens, uci_housing, wmt16  # noqa: F401

__all__ = ["mnist", "imikolov", "imdb", "cifar", "movielens", "conll05", "uci_housing", "wmt16", "common"]
