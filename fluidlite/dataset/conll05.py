"""CoNLL-2005 semantic role labelling (Fluid 1.x ``paddle.dataset.conll05``).

Only the public test set (``test.wsj``) is available; as in Fluid it serves as the training data. The word
and verb dictionaries number the lines of wordDict.txt/verbDict.txt from 0 (``UNK_IDX = 0``). The label
dictionary gives, for each tag that appears on a ``B-``/``I-`` line of targetDict.txt, ``B-tag`` and
``I-tag`` consecutive ids, and ``O`` the last id.

**Deterministic ids.** Fluid numbered the tags by enumerating a Python set, so its label ids changed from
run to run; fluidlite numbers them in order of first appearance in targetDict.txt.

``test()`` yields one sample per predicate of each sentence: a 9-tuple of equal-length lists
``(word_ids, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, pred_ids, mark, label_ids)``; ``ctx_*`` repeat the id
of the word at offset -2..+2 from the verb (``bos``/``eos`` past the ends), ``pred_ids`` the verb's id,
``mark`` is 1 on the verb and its two neighbours on each side. Cached in ``<data home>/conll05st/``.
"""
import gzip
import tarfile

from . import common

__all__ = ["get_dict", "get_embedding", "test", "fetch", "UNK_IDX"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/conll05st/conll05st-tests.tar.gz"
DATA_MD5 = "387719152ae52d60422c016e92a742fc"
WORDDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FwordDict.txt"
WORDDICT_MD5 = "ea7fb7d4c75cc6254716f0177a506baa"
VERBDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FverbDict.txt"
VERBDICT_MD5 = "0d2977293bbb6cbefab5b0f97db1e77c"
TRGDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FtargetDict.txt"
TRGDICT_MD5 = "d8c7f03ceb5fc2e5a0fa7503a4353751"
EMB_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2Femb"
EMB_MD5 = "bf436eb0faa1f6f9103017f8be57cdb7"
WORDS_NAME = "conll05st-release/test.wsj/words/test.wsj.words.gz"
PROPS_NAME = "conll05st-release/test.wsj/props/test.wsj.props.gz"

UNK_IDX = 0


def _get(url, md5, name):
    # Saved under a plain name; Paddle's cache name (the URL's last part, e.g. conll05st%2FwordDict.txt) works too.
    return common.get_file("conll05st", name, md5, [url], aliases=(common._basename(url),))


def load_label_dict(filename):
    tags = {}
    with open(filename, "r") as f:
        for line in f:
            line = line.strip()
            if line.startswith(("B-", "I-")):
                tags.setdefault(line[2:], len(tags))
    d = {}
    for tag in tags:
        d["B-" + tag] = len(d)
        d["I-" + tag] = len(d)
    d["O"] = len(d)
    return d


def load_dict(filename):
    with open(filename, "r") as f:
        return {line.strip(): i for i, line in enumerate(f)}


def _to_bio(column, where):
    """One predicate's bracket column (``(A0*``, ``*``, ``*)``, ``(V*)``) as B-/I-/O tags."""
    tag, inside, out = "O", False, []
    for item in column:
        if item == "*":
            out.append("I-" + tag if inside else "O")
        elif item == "*)":
            out.append("I-" + tag)
            inside = False
        elif "(" in item:
            tag = item[1:item.find("*")]
            out.append("B-" + tag)
            inside = ")" not in item
        else:
            raise ValueError("conll05: unexpected label %r in %s" % (item, where))
    return out


def corpus_reader(data_path, words_name, props_name):
    """Yield ``(sentence words, predicate, B/I/O labels)`` for each predicate of each sentence."""

    def reader():
        with tarfile.open(data_path) as tf, \
                gzip.GzipFile(fileobj=tf.extractfile(words_name)) as words_file, \
                gzip.GzipFile(fileobj=tf.extractfile(props_name)) as props_file:
            sentence, rows = [], []
            for word, props in zip(words_file, props_file):
                word = word.strip().decode()
                props = props.strip().decode().split()
                if props:
                    sentence.append(word)
                    rows.append(props)
                    continue
                if rows:  # end of a sentence: column 0 lists the verbs, columns 1.. one predicate each
                    columns = list(zip(*rows))
                    verbs = [v for v in columns[0] if v != "-"]
                    if len(verbs) != len(columns) - 1:
                        raise ValueError("conll05: a sentence of %s has %d predicate column(s) but names %d verb(s) "
                                         "in column 0" % (props_name, len(columns) - 1, len(verbs)))
                    for i, column in enumerate(columns[1:]):
                        yield sentence, verbs[i], _to_bio(column, props_name)
                sentence, rows = [], []

    return reader


def reader_creator(corpus_reader, word_dict=None, predicate_dict=None, label_dict=None):
    def reader():
        for sentence, predicate, labels in corpus_reader():
            n = len(sentence)
            v = labels.index("B-V")
            mark = [0] * n
            for k in range(max(v - 2, 0), min(v + 3, n)):
                mark[k] = 1
            ctx = [sentence[v + k] if 0 <= v + k < n else ("bos" if k < 0 else "eos") for k in (-2, -1, 0, 1, 2)]
            word_idx = [word_dict.get(w, UNK_IDX) for w in sentence]
            ctx_idx = [[word_dict.get(c, UNK_IDX)] * n for c in ctx]
            pred_idx = [predicate_dict.get(predicate)] * n
            label_idx = [label_dict.get(w) for w in labels]
            yield (word_idx, *ctx_idx, pred_idx, mark, label_idx)

    return reader


def get_dict():
    """``(word_dict, verb_dict, label_dict)``."""
    word_dict = load_dict(_get(WORDDICT_URL, WORDDICT_MD5, "wordDict.txt"))
    verb_dict = load_dict(_get(VERBDICT_URL, VERBDICT_MD5, "verbDict.txt"))
    label_dict = load_label_dict(_get(TRGDICT_URL, TRGDICT_MD5, "targetDict.txt"))
    return word_dict, verb_dict, label_dict


def get_embedding():
    """Path of the pre-trained word embedding file (``emb``)."""
    return _get(EMB_URL, EMB_MD5, "emb")


def test():
    """Reader creator of the test.wsj samples (Fluid uses it for training)."""
    word_dict, verb_dict, label_dict = get_dict()
    reader = corpus_reader(common.get_file("conll05st", "conll05st-tests.tar.gz", DATA_MD5, [DATA_URL]),
                           words_name=WORDS_NAME, props_name=PROPS_NAME)
    return reader_creator(reader, word_dict, verb_dict, label_dict)


def fetch():
    """Download the dictionaries, the embedding and the data."""
    get_dict()
    get_embedding()
    common.get_file("conll05st", "conll05st-tests.tar.gz", DATA_MD5, [DATA_URL])
