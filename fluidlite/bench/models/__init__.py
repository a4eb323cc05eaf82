"""Benchmark models for ``python -m fluidlite.bench``.

Every module in this package whose name does not start with ``_`` is a model; adding a model means
adding one module, nothing else lists them. A model module defines:

- ``DESCRIPTION``: one line shown in the summary and in ``--help``.
- ``DEFAULTS``: dict with ``batch_size``, ``iterations``, ``warmup``, ``repeat`` (used when the flag is not given).
- ``build(batch_size, seed) -> Built``: the programs and how to feed and fetch them.

Optional, for ``--compare``: ``reference_numpy(params, feed)``, ``reference_torch(params, feed)`` (and
``reference_paddle``) returning an object whose ``step()`` runs the same step in that framework from
fluidlite's initial weights and returns what fluidlite's first fetch returns; ``TOLERANCE`` for the
first-step agreement check. See ``fluidlite.bench.reference``. A model without a reference for a
framework is reported as skipped for it. ``python -m fluidlite.bench --model all`` runs every model here.

``Built.feed()`` returns the feed dict; the runner calls it once and reuses the batch for every step, so
what is timed is the executor, not data generation. ``Built.fetch_list`` is what each step fetches.
"""
import importlib
import pkgutil
from typing import Callable, Dict, List, NamedTuple


class Built(NamedTuple):
    main: object          # fluid.Program run once per step
    startup: object       # fluid.Program run once before the first step
    feed: Callable[[], Dict[str, object]]
    fetch_list: List[object]


def _discover():
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return {name: __name__ + "." + name for name in names}


MODELS = _discover()  # model name -> module path, imported on first use


def load(name):
    """Import and return the model module `name` (KeyError names the known models)."""
    if name not in MODELS:
        raise KeyError("unknown model '%s' (choose from %s)" % (name, ", ".join(MODELS)))
    return importlib.import_module(MODELS[name])
