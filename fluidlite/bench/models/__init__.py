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


def uniform_images(rng, shape):
    return rng.rand(*shape)


def normal_images(rng, shape):
    return rng.standard_normal(shape)


def build_image_classifier(network, image_shape, num_classes, make_optimizer, batch_size, seed,
                           sample_images):
    """One training step of `network(img, label) -> (logits, loss)` on a fixed random batch: the build()
    shared by the convnet models. `sample_images(rng, shape)` draws the images (float32)."""
    import numpy as np

    import fluidlite as fluid

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=list(image_shape), dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        _, loss = network(img, label)
        make_optimizer().minimize(loss)
    rng = np.random.RandomState(seed)
    images = sample_images(rng, (batch_size,) + tuple(image_shape)).astype("float32")
    labels = rng.randint(0, num_classes, size=(batch_size, 1)).astype("int64")
    return Built(main, startup, lambda: {"img": images, "label": labels}, [loss])


def text_batch(batch_size, seed, vocab, num_classes, min_len, max_len):
    """The text models' fixed batch, (ids [T, 1] int64, lengths, labels [N, 1] int64): `batch_size` sequences of
    `min_len` to `max_len` word ids below `vocab` (the lengths drawn first, then the ids, then the labels)."""
    import numpy as np

    rng = np.random.RandomState(seed)
    lengths = [int(n) for n in rng.randint(min_len, max_len + 1, size=batch_size)]
    ids = rng.randint(0, vocab, size=(sum(lengths), 1)).astype("int64")
    labels = rng.randint(0, num_classes, size=(batch_size, 1)).astype("int64")
    return ids, lengths, labels


def padded_ids(ids, lengths, pad_id=0):
    """The sequences of `lengths` in ids [T, 1] as one [N, max length] array, `pad_id` after each one's end (what
    the PyTorch references and the padded variants feed)."""
    import numpy as np

    out = np.full((len(lengths), max(lengths)), pad_id, dtype=np.int64)
    begin = 0
    for s, n in enumerate(lengths):
        out[s, :n] = ids[begin:begin + n, 0]
        begin += n
    return out


def _discover():
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return {name: __name__ + "." + name for name in names}


MODELS = _discover()  # model name -> module path, imported on first use


def load(name):
    """Import and return the model module `name` (KeyError names the known models)."""
    if name not in MODELS:
        raise KeyError("unknown model '%s' (choose from %s)" % (name, ", ".join(MODELS)))
    return importlib.import_module(MODELS[name])
