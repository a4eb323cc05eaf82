"""PTB language-model data (Fluid 1.x ``paddle.dataset.imikolov``): Mikolov's simple-examples.tgz.

``build_dict(min_word_freq=50)`` counts the words of ``ptb.train.txt`` and ``ptb.valid.txt`` plus one
``<s>`` and one ``<e>`` per line, drops ``<unk>``, keeps words seen **more than** ``min_word_freq``
times, sorts them by (descending count, word) and numbers them from 0; ``<unk>`` gets the last id.
``train(word_idx, n, data_type)`` reads ptb.train.txt and ``test(...)`` reads **ptb.valid.txt**, as in
Fluid. NGRAM yields every length-``n`` window of ``<s> words <e>`` as a tuple of ids (lines shorter than
``n`` are skipped); SEQ yields ``([<s>] + ids, ids + [<e>])``, skipping lines whose source is longer than
``n`` when ``n > 0``.

Words are ``str`` (Fluid 1.x on Python 3 kept the file's words as ``bytes`` while ``<s>``, ``<e>`` and
``<unk>`` were ``str``, so its dictionaries mixed both; fluidlite decodes the files as UTF-8, so
``word_idx['the']`` works). Cached in ``<data home>/imikolov/``.
"""
import collections
import tarfile

from . import common

__all__ = ["build_dict", "train", "test", "fetch", "DataType"]

URL = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
MIRROR_URL = "https://dataset.bj.bcebos.com/imikolov%2Fsimple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
TRAIN_FILE = "./simple-examples/data/ptb.train.txt"
TEST_FILE = "./simple-examples/data/ptb.valid.txt"


class DataType:
    NGRAM = 1
    SEQ = 2


def _path():
    return common.get_file("imikolov", "simple-examples.tgz", MD5, [MIRROR_URL, URL],
                           aliases=("imikolov%2Fsimple-examples.tgz",))


def _lines(tf, name):
    try:
        f = tf.extractfile(name)
    except KeyError:
        try:  # a re-packed archive may lack the leading "./"
            f = tf.extractfile(name[2:])
        except KeyError:
            raise ValueError("imikolov: %s has no member %s" % (tf.name, name)) from None
    for line in f:
        yield line.decode("utf-8")


def word_count(f, word_freq=None):
    """Add the words of the lines of ``f`` (plus one ``<s>`` and ``<e>`` per line) to ``word_freq``."""
    if word_freq is None:
        word_freq = collections.defaultdict(int)
    for line in f:
        for w in line.strip().split():
            word_freq[w] += 1
        word_freq["<s>"] += 1
        word_freq["<e>"] += 1
    return word_freq


def build_dict(min_word_freq=50):
    """Word -> id for the words of the train and valid files seen more than ``min_word_freq`` times."""
    with tarfile.open(_path()) as tf:
        word_freq = word_count(_lines(tf, TEST_FILE), word_count(_lines(tf, TRAIN_FILE)))
    word_freq.pop("<unk>", None)
    kept = sorted((x for x in word_freq.items() if x[1] > min_word_freq), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def reader_creator(filename, word_idx, n, data_type):
    if data_type not in (DataType.NGRAM, DataType.SEQ):
        raise ValueError("imikolov: data_type must be DataType.NGRAM (1) or DataType.SEQ (2), got %r" % (data_type,))
    if data_type == DataType.NGRAM and n < 0:
        raise ValueError("imikolov: the n-gram length n must be >= 0, got %r" % (n,))

    def reader():
        unk = word_idx["<unk>"]
        with tarfile.open(_path()) as tf:
            for line in _lines(tf, filename):
                if data_type == DataType.NGRAM:
                    words = ["<s>"] + line.strip().split() + ["<e>"]
                    if len(words) >= n:
                        ids = [word_idx.get(w, unk) for w in words]
                        for i in range(n, len(ids) + 1):
                            yield tuple(ids[i - n:i])
                else:
                    ids = [word_idx.get(w, unk) for w in line.strip().split()]
                    src = [word_idx["<s>"]] + ids
                    trg = ids + [word_idx["<e>"]]
                    if n > 0 and len(src) > n:
                        continue
                    yield src, trg

    return reader


def train(word_idx, n, data_type=DataType.NGRAM):
    """Reader creator over ptb.train.txt."""
    return reader_creator(TRAIN_FILE, word_idx, n, data_type)


def test(word_idx, n, data_type=DataType.NGRAM):
    """Reader creator over ptb.valid.txt (Fluid's choice for the test set)."""
    return reader_creator(TEST_FILE, word_idx, n, data_type)


def fetch():
    """Download simple-examples.tgz."""
    _path()
