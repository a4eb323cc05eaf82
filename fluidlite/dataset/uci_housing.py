"""UCI Housing (Fluid 1.x ``paddle.dataset.uci_housing``): Boston house prices, 506 rows of 14 columns.

The file is a whitespace-separated table read as float64 and reshaped to (-1, 14). Columns 0..12 are
normalised as ``(x - mean) / (max - min)`` over the *whole* file (Fluid's choice: test rows take part in
the statistics); the first ``int(0.8 * rows)`` rows are the training set, the rest the test set.
Readers yield ``(features float64 (13,), price float64 (1,))``. The loaded data is kept per file path.
"""
import tarfile
import tempfile

import numpy as np

from . import common

__all__ = ["train", "test", "predict_reader", "fetch", "fluid_model", "feature_names"]

URL = "http://paddlemodels.bj.bcebos.com/uci_housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
FLUID_URL_MODEL = "https://github.com/PaddlePaddle/book/raw/develop/01.fit_a_line/fluid/fit_a_line.fluid.tar"
FLUID_MD5_MODEL = "6e6dd637ccd5993961f68bfbde46090b"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]

UCI_TRAIN_DATA = None
UCI_TEST_DATA = None
_loaded_from = None


def load_data(filename, feature_num=14, ratio=0.8):
    """Parse, normalise and split ``filename`` into UCI_TRAIN_DATA / UCI_TEST_DATA (once per file)."""
    global UCI_TRAIN_DATA, UCI_TEST_DATA, _loaded_from
    if _loaded_from == filename:
        return
    data = np.fromfile(filename, sep=" ")
    if data.size == 0 or data.size % feature_num:
        raise ValueError("uci_housing: %s holds %d numbers, expected a positive multiple of %d"
                         % (filename, data.size, feature_num))
    data = data.reshape(data.size // feature_num, feature_num)
    maximums, minimums, avgs = data.max(axis=0), data.min(axis=0), data.sum(axis=0) / data.shape[0]
    for i in range(feature_num - 1):
        data[:, i] = (data[:, i] - avgs[i]) / (maximums[i] - minimums[i])
    offset = int(data.shape[0] * ratio)
    UCI_TRAIN_DATA, UCI_TEST_DATA, _loaded_from = data[:offset], data[offset:], filename


def _path():
    return common.get_file("uci_housing", "housing.data", MD5, [URL])


def _creator(part):
    load_data(_path())
    rows = UCI_TRAIN_DATA if part == "train" else UCI_TEST_DATA

    def reader():
        for d in rows:
            yield d[:-1], d[-1:]

    return reader


def train():
    """Reader creator of the first 80 % of the rows."""
    return _creator("train")


def test():
    """Reader creator of the last 20 % of the rows."""
    return _creator("test")


def predict_reader():
    """The features of the first test row, as a 1-tuple (Fluid's)."""
    load_data(_path())
    return (UCI_TEST_DATA[0][:-1],)


def fluid_model():
    """Download the book's trained fit_a_line model and return the folder it was extracted to."""
    path = common.get_file("uci_housing", "fit_a_line.fluid.tar", FLUID_MD5_MODEL, [FLUID_URL_MODEL])
    dirpath = tempfile.mkdtemp()
    with tarfile.open(path, mode="r") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(path=dirpath, filter="data")
        else:  # Python without extraction filters: refuse paths that leave dirpath
            for member in tar.getmembers():
                if member.name.startswith("/") or ".." in member.name.split("/"):
                    raise ValueError("uci_housing.fluid_model: unsafe path %r in %s" % (member.name, path))
            tar.extractall(path=dirpath)
    return dirpath


def fetch():
    """Download housing.data."""
    _path()
