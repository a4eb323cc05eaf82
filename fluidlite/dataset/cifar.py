"""CIFAR-10 and CIFAR-100 (Fluid 1.x ``paddle.dataset.cifar``): the python-pickle tarballs of cs.toronto.edu.

Readers yield ``(image float32 (3072,), label int)``: ``image`` is the uint8 row divided by 255 (1024 red,
then 1024 green, then 1024 blue values: CHW order). Tar members are picked by substring of their name, in
archive order: ``data_batch``/``test_batch`` (CIFAR-10), ``train``/``test`` (CIFAR-100); labels come from
``labels`` or ``fine_labels``. Cached in ``<data home>/cifar/``.

``cycle=True`` repeats the data for ever. (Fluid 1.x's cycle re-iterated an exhausted generator, so its
second pass yielded nothing and never ended; fluidlite really cycles.)
"""
import pickle
import tarfile

import numpy as np

from . import common

__all__ = ["train10", "test10", "train100", "test100", "fetch"]

URL_PREFIX = "https://www.cs.toronto.edu/~kriz/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"


def _read_batch(batch, member, filename):
    data = batch.get(b"data")
    labels = batch.get(b"labels", batch.get(b"fine_labels"))
    if data is None or labels is None:
        raise ValueError("cifar: member %s of %s has no b'data' or no b'labels'/b'fine_labels' entry (keys: %s)"
                         % (member, filename, sorted(batch)))
    for sample, label in zip(data, labels):
        yield (sample / 255.0).astype(np.float32), int(label)


def reader_creator(filename, sub_name, cycle=False):
    """A reader over the members of ``filename`` whose name contains ``sub_name``."""

    def one_pass():
        with tarfile.open(filename, mode="r") as f:
            names = [m.name for m in f if sub_name in m.name]
            for name in names:
                batch = pickle.load(f.extractfile(name), encoding="bytes")
                yield from _read_batch(batch, name, filename)

    def reader():
        while True:
            n = 0
            for item in one_pass():
                n += 1
                yield item
            if not cycle or n == 0:  # an empty selection must not spin for ever
                return

    return reader


def _cifar10():
    return common.get_file("cifar", "cifar-10-python.tar.gz", CIFAR10_MD5, [CIFAR10_URL])


def _cifar100():
    return common.get_file("cifar", "cifar-100-python.tar.gz", CIFAR100_MD5, [CIFAR100_URL])


def train100():
    """Reader creator of CIFAR-100's 50,000 training images (fine labels 0..99)."""
    return reader_creator(_cifar100(), "train")


def test100():
    """Reader creator of CIFAR-100's 10,000 test images."""
    return reader_creator(_cifar100(), "test")


def train10(cycle=False):
    """Reader creator of CIFAR-10's 50,000 training images (labels 0..9)."""
    return reader_creator(_cifar10(), "data_batch", cycle=cycle)


def test10(cycle=False):
    """Reader creator of CIFAR-10's 10,000 test images."""
    return reader_creator(_cifar10(), "test_batch", cycle=cycle)


def fetch():
    """Download both archives."""
    _cifar10()
    _cifar100()
