"""IMDB sentiment (Fluid 1.x ``paddle.dataset.imdb``): the aclImdb_v1 tarball of ai.stanford.edu.

Tokenising as Fluid: each review (tar members read in archive order) loses trailing newlines and ASCII
punctuation, is lower-cased (ASCII only) and split on whitespace. ``word_dict()`` keeps the words of all
train and test reviews seen **more than** 150 times, sorted by (descending count, word), numbered from 0,
with ``<unk>`` last. ``train(word_idx)``/``test(word_idx)`` read all their reviews when called and yield
``(list of word ids, label)`` with positive reviews first and **label 0 = positive, 1 = negative**.

Words are ``str``: the tokens are cut from the bytes as Fluid did, then decoded as UTF-8 (undecodable
bytes kept via ``surrogateescape``); Fluid 1.x on Python 3 kept them as ``bytes``. The ids are the same.
Cached in ``<data home>/imdb/``.
"""
import collections
import re
import string
import tarfile

from . import common

__all__ = ["build_dict", "word_dict", "train", "test", "fetch"]

URL = "http://ai.stanford.edu/%7Eamaas/data/sentiment/aclImdb_v1.tar.gz"
MIRROR_URL = "https://dataset.bj.bcebos.com/imdb%2FaclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"
_PUNCT = string.punctuation.encode("ascii")


def _path():
    return common.get_file("imdb", "aclImdb_v1.tar.gz", MD5, [MIRROR_URL, URL],
                           aliases=("imdb%2FaclImdb_v1.tar.gz",))


def tokenize(pattern):
    """Yield the token list of each member of the archive whose name matches ``pattern``."""
    with tarfile.open(_path()) as tarf:
        member = tarf.next()  # sequential access: the archive is gzip'd, random access re-reads it
        while member is not None:
            if pattern.match(member.name):
                text = tarf.extractfile(member).read().rstrip(b"\n\r").translate(None, _PUNCT).lower()
                yield [w.decode("utf-8", "surrogateescape") for w in text.split()]
            member = tarf.next()


def build_dict(pattern, cutoff):
    """Word -> id for the words of the matching reviews seen more than ``cutoff`` times; ``<unk>`` last."""
    word_freq = collections.defaultdict(int)
    for doc in tokenize(pattern):
        for word in doc:
            word_freq[word] += 1
    kept = sorted((x for x in word_freq.items() if x[1] > cutoff), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def reader_creator(pos_pattern, neg_pattern, word_idx):
    unk = word_idx["<unk>"]
    samples = []
    for pattern, label in ((pos_pattern, 0), (neg_pattern, 1)):
        for doc in tokenize(pattern):
            samples.append(([word_idx.get(w, unk) for w in doc], label))

    def reader():
        yield from samples

    return reader


def train(word_idx):
    """Reader creator of the 25,000 training reviews (positive first)."""
    return reader_creator(re.compile(r"aclImdb/train/pos/.*\.txt$"), re.compile(r"aclImdb/train/neg/.*\.txt$"),
                          word_idx)


def test(word_idx):
    """Reader creator of the 25,000 test reviews (positive first)."""
    return reader_creator(re.compile(r"aclImdb/test/pos/.*\.txt$"), re.compile(r"aclImdb/test/neg/.*\.txt$"),
                          word_idx)


def word_dict():
    """The dictionary of all train and test reviews with cutoff 150."""
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


def fetch():
    """Download aclImdb_v1.tar.gz."""
    _path()
