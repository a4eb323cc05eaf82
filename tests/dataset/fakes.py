"""Small data set files in the real formats, for tests that must never touch the network.

Each ``install_<dataset>(data_home, ..., monkeypatch=None, seed=0)`` writes the files that
``fluidlite.dataset.<dataset>`` reads, under the names it looks for, into ``data_home/<module>/``, and
registers their md5 sums in place of the published ones (through ``monkeypatch.setattr`` when a pytest
``monkeypatch`` is given, so that the change is undone after the test; else by plain assignment).
With ``monkeypatch`` it also sets ``FLUIDLITE_DATA_HOME=data_home``; without, the caller must.

The data is small, deterministic (``seed``) and learnable where a model is trained on it: MNIST and CIFAR
images carry a bright block whose place depends on the label, housing prices are a linear function of
the features plus noise, IMDB positive reviews use positive words. Each function returns the raw data
it wrote (tests use it to check the readers; other callers may ignore it).
"""
import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import zipfile

import numpy as np

from fluidlite.dataset import cifar, conll05, imdb, imikolov, mnist, movielens, uci_housing, wmt16


def _md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def _register(monkeypatch, module, attr, path):
    if monkeypatch is not None:
        monkeypatch.setattr(module, attr, _md5(path))
    else:
        setattr(module, attr, _md5(path))


def _folder(data_home, module_dir, monkeypatch):
    if monkeypatch is not None:
        monkeypatch.setenv("FLUIDLITE_DATA_HOME", str(data_home))
    folder = os.path.join(str(data_home), module_dir)
    os.makedirs(folder, exist_ok=True)
    return folder


def _tar(path, members, mode="w:gz"):
    """Write ``members`` ({name: bytes}, in order) into a tar archive."""
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))


# ---------------------------------------------------------------------------------------------- mnist
def mnist_images(labels, rng, rows=28, cols=28):
    """uint8 images (n, rows*cols): noise plus a bright 4x4 block at a place given by the label."""
    n = len(labels)
    img = rng.integers(0, 60, size=(n, rows, cols)).astype(np.uint8)
    for i, lab in enumerate(labels):
        r, c = 4 + 8 * (lab // 4), 2 + 6 * (lab % 4)
        img[i, r:r + 4, c:c + 4] = 255
    return img.reshape(n, rows * cols)


def _idx_gz(path, header, payload):
    with gzip.open(path, "wb") as f:
        f.write(header + payload)


def install_mnist(data_home, n_train=64, n_test=16, monkeypatch=None, seed=0):
    """Write the four gzip'd big-endian IDX files. Returns {"train": (images, labels), "test": ...}."""
    folder = _folder(data_home, "mnist", monkeypatch)
    rng = np.random.default_rng(seed)
    out = {}
    for part, n, img_name, lab_name, img_md5, lab_md5 in (
            ("train", n_train, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "TRAIN_IMAGE_MD5",
             "TRAIN_LABEL_MD5"),
            ("test", n_test, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", "TEST_IMAGE_MD5",
             "TEST_LABEL_MD5")):
        labels = (np.arange(n) % 10).astype(np.uint8)
        rng.shuffle(labels)
        images = mnist_images(labels, rng)
        _idx_gz(os.path.join(folder, img_name), struct.pack(">IIII", 2051, n, 28, 28), images.tobytes())
        _idx_gz(os.path.join(folder, lab_name), struct.pack(">II", 2049, n), labels.tobytes())
        _register(monkeypatch, mnist, img_md5, os.path.join(folder, img_name))
        _register(monkeypatch, mnist, lab_md5, os.path.join(folder, lab_name))
        out[part] = (images, labels)
    return out


# ---------------------------------------------------------------------------------------------- cifar
def _cifar_images(labels, rng):
    n = len(labels)
    img = rng.integers(0, 80, size=(n, 3, 32, 32)).astype(np.uint8)
    for i, lab in enumerate(labels):
        ch, pos = lab % 3, (lab * 3) % 28
        img[i, ch, pos:pos + 4, pos:pos + 4] = 255
    return img.reshape(n, 3072)


def install_cifar(data_home, n_train=40, n_test=10, n_batches=2, monkeypatch=None, seed=0):
    """Write cifar-10-python.tar.gz (``n_batches`` data_batch_k members + test_batch + batches.meta) and
    cifar-100-python.tar.gz (train, test, meta). Returns {"train10": (images, labels), "test10", "train100",
    "test100"} with the images as uint8 (n, 3072)."""
    folder = _folder(data_home, "cifar", monkeypatch)
    rng = np.random.default_rng(seed)
    out = {}
    members = {}
    per = -(-n_train // n_batches)
    all_imgs, all_labels = [], []
    for b in range(n_batches):
        n = min(per, n_train - b * per)
        labels = [int(x) for x in rng.integers(0, 10, size=n)]
        imgs = _cifar_images(labels, rng)
        members["cifar-10-batches-py/data_batch_%d" % (b + 1)] = pickle.dumps(
            {b"batch_label": b"training batch", b"labels": labels, b"data": imgs, b"filenames": [b"x.png"] * n})
        all_imgs.append(imgs)
        all_labels += labels
    out["train10"] = (np.concatenate(all_imgs), all_labels)
    labels = [int(x) for x in rng.integers(0, 10, size=n_test)]
    imgs = _cifar_images(labels, rng)
    members["cifar-10-batches-py/test_batch"] = pickle.dumps({b"labels": labels, b"data": imgs})
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps({b"label_names": [b"c%d" % i for i in range(10)]})
    out["test10"] = (imgs, labels)
    _tar(os.path.join(folder, "cifar-10-python.tar.gz"), members)
    _register(monkeypatch, cifar, "CIFAR10_MD5", os.path.join(folder, "cifar-10-python.tar.gz"))

    members = {}
    for part, n in (("train", n_train), ("test", n_test)):
        fine = [int(x) for x in rng.integers(0, 100, size=n)]
        imgs = _cifar_images(fine, rng)
        members["cifar-100-python/" + part] = pickle.dumps(
            {b"fine_labels": fine, b"coarse_labels": [f // 5 for f in fine], b"data": imgs})
        out[part + "100"] = (imgs, fine)
    members["cifar-100-python/meta"] = pickle.dumps({b"fine_label_names": [b"f%d" % i for i in range(100)]})
    _tar(os.path.join(folder, "cifar-100-python.tar.gz"), members)
    _register(monkeypatch, cifar, "CIFAR100_MD5", os.path.join(folder, "cifar-100-python.tar.gz"))
    return out


# ---------------------------------------------------------------------------------------------- uci_housing
def install_uci_housing(data_home, rows=50, monkeypatch=None, seed=0):
    """Write housing.data: ``rows`` lines of 14 whitespace-separated numbers (price = linear + noise).
    Returns the (rows, 14) float64 table as written (rounded to the printed precision)."""
    folder = _folder(data_home, "uci_housing", monkeypatch)
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 100, size=(rows, 13)).round(3)
    w = np.linspace(-0.2, 0.3, 13)
    price = (x @ w + 20 + rng.normal(0, 0.5, size=rows)).round(2)
    table = np.concatenate([x, price[:, None]], axis=1)
    with open(os.path.join(folder, "housing.data"), "w") as f:
        for row in table:  # the real file: fixed-width columns with leading spaces
            f.write(" " + " ".join("%8.3f" % v for v in row[:13]) + " %7.2f\n" % row[13])
    _register(monkeypatch, uci_housing, "MD5", os.path.join(folder, "housing.data"))
    return table


# ---------------------------------------------------------------------------------------------- imikolov
_PTB_WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "ran", "to", "house", "N", "<unk>"]


def _ptb_lines(n, rng):
    lines = []
    for _ in range(n):
        k = int(rng.integers(3, 9))
        lines.append(" " + " ".join(_PTB_WORDS[int(i)] for i in rng.integers(0, len(_PTB_WORDS), size=k)) + " \n")
    return lines


def install_imikolov(data_home, train_lines=None, valid_lines=None, n_train=60, n_valid=20, monkeypatch=None,
                     seed=0):
    """Write simple-examples.tgz with ./simple-examples/data/ptb.{train,valid,test}.txt (lines as in PTB:
    a leading and a trailing space). Lines are generated unless given. Returns {"train": lines, "valid": ...}."""
    folder = _folder(data_home, "imikolov", monkeypatch)
    rng = np.random.default_rng(seed)
    train = list(train_lines) if train_lines is not None else _ptb_lines(n_train, rng)
    valid = list(valid_lines) if valid_lines is not None else _ptb_lines(n_valid, rng)
    _tar(os.path.join(folder, "simple-examples.tgz"), {
        "./simple-examples/data/ptb.train.txt": "".join(train).encode(),
        "./simple-examples/data/ptb.valid.txt": "".join(valid).encode(),
        "./simple-examples/data/ptb.test.txt": "".join(valid[:3]).encode(),
    })
    _register(monkeypatch, imikolov, "MD5", os.path.join(folder, "simple-examples.tgz"))
    return {"train": train, "valid": valid}


# ---------------------------------------------------------------------------------------------- imdb
_POS = ["good", "great", "fine", "loved", "wonderful"]
_NEG = ["bad", "awful", "boring", "hated", "worst"]
_NEUTRAL = ["the", "movie", "film", "was", "plot", "actor"]


def _review(words, rng, k):
    picks = [words[int(i) % len(words)] if rng.random() < 0.4 else _NEUTRAL[int(i) % len(_NEUTRAL)]
             for i in rng.integers(0, 30, size=k)]
    return ("The " + " ".join(picks) + ". It's <br />fine!\n").encode()


def install_imdb(data_home, docs=None, n_per_class=6, monkeypatch=None, seed=0):
    """Write aclImdb_v1.tar.gz with aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt members (plus
    aclImdb/imdb.vocab and an unsup review, which the readers must skip). ``docs`` maps (split, "pos"/"neg")
    to a list of review bytes; generated unless given. Returns that mapping."""
    folder = _folder(data_home, "imdb", monkeypatch)
    rng = np.random.default_rng(seed)
    if docs is None:
        docs = {}
        for split in ("train", "test"):
            docs[(split, "pos")] = [_review(_POS, rng, int(rng.integers(5, 15))) for _ in range(n_per_class)]
            docs[(split, "neg")] = [_review(_NEG, rng, int(rng.integers(5, 15))) for _ in range(n_per_class)]
    members = {"aclImdb/imdb.vocab": b"the\nmovie\n", "aclImdb/train/unsup/0_0.txt": b"unlabelled words here\n"}
    for (split, cls), texts in docs.items():
        for i, t in enumerate(texts):
            members["aclImdb/%s/%s/%d_%d.txt" % (split, cls, i, 8 if cls == "pos" else 2)] = t
    _tar(os.path.join(folder, "aclImdb_v1.tar.gz"), members)
    _register(monkeypatch, imdb, "MD5", os.path.join(folder, "aclImdb_v1.tar.gz"))
    return docs


# ---------------------------------------------------------------------------------------------- movielens
_GENRES = ["Animation", "Children's", "Comedy", "Drama", "Action", "Thriller"]
_TITLE_WORDS = ["Toy", "Story", "Jumanji", "Heat", "The", "Night", "City", "Lost"]


def install_movielens(data_home, n_users=8, n_movies=10, n_ratings=60, monkeypatch=None, seed=0, rate=None):
    """Write ml-1m.zip with ml-1m/{movies,users,ratings}.dat ('::'-separated, latin-1). Returns
    {"movies": [(id, title, [genres])], "users": [(id, gender, age, job)], "ratings": [(uid, mid, r)]}.
    Ratings are drawn uniformly from 1-5, or are rate(user id, movie id) (a pattern a model can learn)."""
    folder = _folder(data_home, "movielens", monkeypatch)
    rng = np.random.default_rng(seed)
    movies = []
    for m in range(1, n_movies + 1):
        words = [_TITLE_WORDS[int(i)] for i in rng.integers(0, len(_TITLE_WORDS), size=int(rng.integers(1, 4)))]
        genres = sorted({_GENRES[int(i)] for i in rng.integers(0, len(_GENRES), size=int(rng.integers(1, 3)))})
        movies.append((m * 2, " ".join(words) + (" Café" if m == 3 else ""), genres))
    users = [(u, "MF"[u % 2], movielens.age_table[u % 7], u % 21) for u in range(1, n_users + 1)]
    ratings = [(int(rng.integers(1, n_users + 1)), movies[int(rng.integers(0, n_movies))][0],
                int(rng.integers(1, 6))) for _ in range(n_ratings)]
    if rate is not None:
        ratings = [(u, m, int(rate(u, m))) for u, m, _ in ratings]
    path = os.path.join(folder, "ml-1m.zip")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ml-1m/movies.dat", "".join("%d::%s (199%d)::%s\n" % (m, t, m % 10, "|".join(g))
                                               for m, t, g in movies).encode("latin-1"))
        z.writestr("ml-1m/users.dat", "".join("%d::%s::%d::%d::%05d\n" % (u, g, a, j, 10000 + u)
                                              for u, g, a, j in users).encode("latin-1"))
        z.writestr("ml-1m/ratings.dat", "".join("%d::%d::%d::%d\n" % (u, m, r, 978300000 + i)
                                                for i, (u, m, r) in enumerate(ratings)).encode("latin-1"))
    _register(monkeypatch, movielens, "MD5", path)
    return {"movies": movies, "users": users, "ratings": ratings}


# ---------------------------------------------------------------------------------------------- conll05
# Two sentences in CoNLL-2005 props format: column 0 names the predicates, one column per predicate.
CONLL_SENTENCES = [
    (["The", "cat", "chased", "a", "mouse", "."],
     [["-", "(A0*"], ["-", "*)"], ["chase", "(V*)"], ["-", "(A1*"], ["-", "*)"], ["-", "*"]]),
    (["He", "said", "she", "left", "early"],
     [["-", "(A0*)", "*"], ["say", "(V*)", "*"], ["-", "(A1*", "(A0*)"], ["leave", "*", "(V*)"],
      ["-", "*)", "(AM-TMP*)"]]),
]
CONLL_WORDS = ["<unk>", "The", "cat", "chased", "a", "mouse", ".", "He", "said", "she", "left", "bos", "eos"]
CONLL_VERBS = ["chase", "say", "leave"]
CONLL_TARGETS = ["B-A0", "I-A0", "B-A1", "I-A1", "B-AM-TMP", "I-AM-TMP", "B-V", "I-V", "O"]


def install_conll05(data_home, sentences=None, monkeypatch=None, seed=0):
    """Write conll05st-tests.tar.gz (test.wsj words/props, gzip'd, inside the tar), wordDict.txt,
    verbDict.txt, targetDict.txt and emb. Returns {"sentences", "words", "verbs", "targets"}."""
    folder = _folder(data_home, "conll05st", monkeypatch)
    sentences = CONLL_SENTENCES if sentences is None else sentences
    words = "".join("".join(w + "\n" for w in ws) + "\n" for ws, _ in sentences)
    props = "".join("".join(" ".join(cols) + "\n" for cols in ps) + "\n" for _, ps in sentences)
    _tar(os.path.join(folder, "conll05st-tests.tar.gz"), {
        conll05.WORDS_NAME: gzip.compress(words.encode(), mtime=0),
        conll05.PROPS_NAME: gzip.compress(props.encode(), mtime=0),
    })
    _register(monkeypatch, conll05, "DATA_MD5", os.path.join(folder, "conll05st-tests.tar.gz"))
    for name, lines, attr in (("wordDict.txt", CONLL_WORDS, "WORDDICT_MD5"), ("verbDict.txt", CONLL_VERBS,
                              "VERBDICT_MD5"), ("targetDict.txt", CONLL_TARGETS, "TRGDICT_MD5")):
        with open(os.path.join(folder, name), "w") as f:
            f.write("".join(x + "\n" for x in lines))
        _register(monkeypatch, conll05, attr, os.path.join(folder, name))
    rng = np.random.default_rng(seed)
    with open(os.path.join(folder, "emb"), "wb") as f:  # Paddle's parameter file: a 16-byte header, then float32s
        f.write(struct.pack("<iIQ", 0, 4, len(CONLL_WORDS) * 32))
        f.write(rng.standard_normal((len(CONLL_WORDS), 32)).astype(np.float32).tobytes())
    _register(monkeypatch, conll05, "EMB_MD5", os.path.join(folder, "emb"))
    return {"sentences": sentences, "words": CONLL_WORDS, "verbs": CONLL_VERBS, "targets": CONLL_TARGETS}


# ---------------------------------------------------------------------------------------------- wmt16
_EN = ["a", "man", "woman", "dog", "runs", "sits", "in", "the", "park", "red", "ball"]
_DE = ["ein", "mann", "frau", "hund", "läuft", "sitzt", "im", "der", "park", "rot", "ball", "die"]


def _wmt_pairs(n, rng):
    pairs = []
    for _ in range(n):
        k = int(rng.integers(2, 7))
        idx = rng.integers(0, len(_EN), size=k)
        pairs.append((" ".join(_EN[int(i)] for i in idx), " ".join(_DE[int(i)] for i in idx)))
    return pairs


def install_wmt16(data_home, n_train=40, n_test=8, n_val=8, monkeypatch=None, seed=0):
    """Write wmt16.tar.gz with wmt16/{train,test,val} ('english<TAB>german' lines, plus one malformed line
    each, which the readers skip). Returns {"train": [(en, de)], "test": ..., "val": ...}."""
    folder = _folder(data_home, "wmt16", monkeypatch)
    rng = np.random.default_rng(seed)
    out = {"train": _wmt_pairs(n_train, rng), "test": _wmt_pairs(n_test, rng), "val": _wmt_pairs(n_val, rng)}
    members = {"wmt16/" + part: ("".join("%s\t%s\n" % p for p in pairs) + "no tab here\n").encode("utf-8")
               for part, pairs in out.items()}
    _tar(os.path.join(folder, "wmt16.tar.gz"), members)
    _register(monkeypatch, wmt16, "DATA_MD5", os.path.join(folder, "wmt16.tar.gz"))
    return out


def install_all(data_home, monkeypatch=None, seed=0):
    """Every data set with its default sizes."""
    for f in (install_mnist, install_cifar, install_uci_housing, install_imikolov, install_imdb, install_movielens,
              install_conll05, install_wmt16):
        f(data_home, monkeypatch=monkeypatch, seed=seed)
