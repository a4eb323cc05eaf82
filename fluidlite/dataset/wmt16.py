"""WMT16 Multi30K English-German (Fluid 1.x ``paddle.dataset.wmt16``).

The archive ``wmt16.tar.gz`` holds ``wmt16/train``, ``wmt16/test`` and ``wmt16/val``, one pre-tokenised
pair ``english<TAB>german`` per line (other lines are skipped). Dictionary sizes are clipped to
``TOTAL_EN_WORDS``/``TOTAL_DE_WORDS``. A dictionary is built from the training set and saved as
``<data home>/wmt16/<lang>_<size>.dict``: ``<s>``, ``<e>``, ``<unk>`` (ids 0, 1, 2), then words by
descending count (ties in order of first appearance) until ``size`` lines; it is rebuilt when its line
count is not ``size``. Readers yield ``([<s>] + src ids + [<e>], [<s>] + trg ids, trg ids + [<e>])``.

``get_dict`` rebuilds a missing dictionary from the archive (Fluid asserted that it existed and looked
for the archive in the wrong folder); Fluid's ``fetch()`` referred to a ``paddle.v4`` module and failed,
fluidlite's downloads the archive.
"""
import collections
import os
import tarfile

from . import common

__all__ = ["train", "test", "validation", "fetch", "get_dict"]

DATA_URL = "http://cloud.dlnel.org/filepub/?uuid=46a0808e-ddd8-427c-bacd-0dbc6d045fed"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220
START_MARK = "<s>"
END_MARK = "<e>"
UNK_MARK = "<unk>"


def _tar_path():
    return common.get_file("wmt16", "wmt16.tar.gz", DATA_MD5, [DATA_URL])


def _pairs(tar_file, member):
    with tarfile.open(tar_file, mode="r") as f:
        for line in f.extractfile(member):
            parts = line.decode("utf-8").strip().split("\t")
            if len(parts) == 2:
                yield parts


def _build_dict(tar_file, dict_size, save_path, lang):
    counts = collections.defaultdict(int)
    for en, de in _pairs(tar_file, "wmt16/train"):
        for w in (en if lang == "en" else de).split():
            counts[w] += 1
    words = [w for w, _ in sorted(counts.items(), key=lambda x: x[1], reverse=True)][:max(dict_size - 3, 0)]
    tmp = save_path + ".tmp%d" % os.getpid()
    with open(tmp, "w", encoding="utf-8") as fout:
        fout.write("".join(w + "\n" for w in [START_MARK, END_MARK, UNK_MARK] + words))
    os.replace(tmp, save_path)


def _dict_path(lang, dict_size):
    return os.path.join(common.data_home(), "wmt16", "%s_%d.dict" % (lang, dict_size))


def _line_count(path):
    if not os.path.exists(path):
        return -1
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _load_dict(tar_file, dict_size, lang, reverse=False):
    path = _dict_path(lang, dict_size)
    if _line_count(path) != dict_size:
        _build_dict(tar_file, dict_size, path, lang)
    with open(path, "r", encoding="utf-8") as f:
        words = [line.strip() for line in f]
    return dict(enumerate(words)) if reverse else {w: i for i, w in enumerate(words)}


def _clip(size, lang):
    return min(size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)


def _check_lang(func, src_lang):
    if src_lang not in ("en", "de"):
        raise ValueError("wmt16.%s: src_lang must be 'en' (English) or 'de' (German), got %r" % (func, src_lang))


def reader_creator(tar_file, file_name, src_dict_size, trg_dict_size, src_lang):
    trg_lang = "de" if src_lang == "en" else "en"

    def reader():
        src_dict = _load_dict(tar_file, src_dict_size, src_lang)
        trg_dict = _load_dict(tar_file, trg_dict_size, trg_lang)
        start, end, unk = src_dict[START_MARK], src_dict[END_MARK], src_dict[UNK_MARK]
        src_col = 0 if src_lang == "en" else 1
        for parts in _pairs(tar_file, file_name):
            src_ids = [start] + [src_dict.get(w, unk) for w in parts[src_col].split()] + [end]
            trg_ids = [trg_dict.get(w, unk) for w in parts[1 - src_col].split()]
            yield src_ids, [start] + trg_ids, trg_ids + [end]

    return reader


def _creator(func, member, src_dict_size, trg_dict_size, src_lang):
    _check_lang(func, src_lang)
    trg_lang = "de" if src_lang == "en" else "en"
    return reader_creator(_tar_path(), member, _clip(src_dict_size, src_lang), _clip(trg_dict_size, trg_lang),
                          src_lang)


def train(src_dict_size, trg_dict_size, src_lang="en"):
    """Reader creator of the training pairs."""
    return _creator("train", "wmt16/train", src_dict_size, trg_dict_size, src_lang)


def test(src_dict_size, trg_dict_size, src_lang="en"):
    """Reader creator of the test pairs."""
    return _creator("test", "wmt16/test", src_dict_size, trg_dict_size, src_lang)


def validation(src_dict_size, trg_dict_size, src_lang="en"):
    """Reader creator of the validation pairs."""
    return _creator("validation", "wmt16/val", src_dict_size, trg_dict_size, src_lang)


def get_dict(lang, dict_size, reverse=False):
    """The ``lang`` dictionary of ``dict_size`` words: word -> id, or id -> word if ``reverse``."""
    _check_lang("get_dict", lang)
    dict_size = _clip(dict_size, lang)
    path = _dict_path(lang, dict_size)
    tar_file = None if _line_count(path) == dict_size else _tar_path()
    return _load_dict(tar_file, dict_size, lang, reverse)


def fetch():
    """Download wmt16.tar.gz."""
    _tar_path()
