"""MNIST (Fluid 1.x ``paddle.dataset.mnist``): the gzip'd IDX files of yann.lecun.com, from Paddle's mirror.

``train()``/``test()`` return readers of ``(image, label)``: ``image`` float32 of shape (784,) scaled as
``x / 255 * 2 - 1`` into [-1, 1], ``label`` a Python int in 0..9. Cached in ``<data home>/mnist/``.
"""
import gzip
import struct

import numpy as np

from . import common

__all__ = ["train", "test", "fetch"]

URL_PREFIX = "https://dataset.bj.bcebos.com/mnist/"
_ORIGINAL_PREFIX = "http://yann.lecun.com/exdb/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_IMAGE_MD5 = "9fb629c4189551a2d022fa330f9573f3"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TEST_LABEL_MD5 = "ec29112dd5afa0611ce80d1b7f02629c"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_IMAGE_MD5 = "f68b3c2dcbeaaa9fbdd348bbdeb94873"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"
TRAIN_LABEL_MD5 = "d53e105ee54ea40749a09fcbcd1e9432"

_IMAGE_MAGIC = 2051
_LABEL_MAGIC = 2049


def _get(url, md5):
    name = common._basename(url)
    return common.get_file("mnist", name, md5, [url, _ORIGINAL_PREFIX + name])


def _read_idx(path, magic, header):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    fields = struct.unpack_from(header, buf, 0)
    if fields[0] != magic:
        raise ValueError("mnist: %s is not an IDX file of this kind: magic number %d, expected %d"
                         % (path, fields[0], magic))
    return fields, buf[struct.calcsize(header):]


def _load(image_path, label_path):
    (_, n, rows, cols), pixels = _read_idx(image_path, _IMAGE_MAGIC, ">IIII")
    (_, n_labels), labels = _read_idx(label_path, _LABEL_MAGIC, ">II")
    if n != n_labels or len(pixels) < n * rows * cols or len(labels) < n:
        raise ValueError("mnist: %s has %d images of %dx%d (%d bytes of pixels) but %s has %d labels (%d bytes)"
                         % (image_path, n, rows, cols, len(pixels), label_path, n_labels, len(labels)))
    images = np.frombuffer(pixels, dtype=np.uint8, count=n * rows * cols).reshape(n, rows * cols)
    return images, np.frombuffer(labels, dtype=np.uint8, count=n)


def reader_creator(image_filename, label_filename, buffer_size=100):
    """A reader over one pair of IDX files. ``buffer_size`` images are converted at a time."""

    def reader():
        images, labels = _load(image_filename, label_filename)
        for start in range(0, len(labels), buffer_size):
            block = images[start:start + buffer_size].astype(np.float32) / 255.0 * 2.0 - 1.0
            for i in range(block.shape[0]):
                yield block[i, :], int(labels[start + i])

    return reader


def train():
    """Reader creator of the 60,000 training images."""
    return reader_creator(_get(TRAIN_IMAGE_URL, TRAIN_IMAGE_MD5), _get(TRAIN_LABEL_URL, TRAIN_LABEL_MD5), 100)


def test():
    """Reader creator of the 10,000 test images."""
    return reader_creator(_get(TEST_IMAGE_URL, TEST_IMAGE_MD5), _get(TEST_LABEL_URL, TEST_LABEL_MD5), 100)


def fetch():
    """Download all four files."""
    for url, md5 in ((TRAIN_IMAGE_URL, TRAIN_IMAGE_MD5), (TRAIN_LABEL_URL, TRAIN_LABEL_MD5),
                     (TEST_IMAGE_URL, TEST_IMAGE_MD5), (TEST_LABEL_URL, TEST_LABEL_MD5)):
        _get(url, md5)
