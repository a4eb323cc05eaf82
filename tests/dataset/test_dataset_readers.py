"""fluidlite.dataset.* readers over small real-format files (tests/dataset/fakes.py): exact values, dtypes,
shapes, normalisation, splits and id assignment. conftest.no_network fails any network use."""
import re

import numpy as np
import pytest

import fakes
import fluidlite as paddle
from fluidlite.dataset import cifar, common, conll05, imdb, imikolov, mnist, movielens, uci_housing, wmt16


@pytest.fixture
def home(tmp_path, no_network):
    yield tmp_path / "data_home"
    assert no_network == []


def test_package_layout_is_paddles():
    with pytest.raises(AttributeError, match="module 'fluidlite.dataset' has no attribute 'flowers' \\(it holds "
                                             "paddle.dataset's modules mnist, "):
        paddle.dataset.flowers  # noqa: B018
    for name in ("uci_housing", "mnist", "cifar", "imikolov", "movielens", "imdb", "conll05", "wmt16", "common"):
        assert getattr(paddle.dataset, name).__name__ == "fluidlite.dataset." + name


# ------------------------------------------------------------------------------------------------ mnist
def test_mnist_values_and_order(home, monkeypatch):
    raw = fakes.install_mnist(home, n_train=130, n_test=7, monkeypatch=monkeypatch)  # not multiples of 100
    for part, reader in (("train", mnist.train()), ("test", mnist.test())):
        images, labels = raw[part]
        got = list(reader())
        assert len(got) == len(labels)
        for (img, lab), want_img, want_lab in zip(got, images, labels):
            assert img.dtype == np.float32 and img.shape == (784,)
            np.testing.assert_array_equal(img, want_img.astype(np.float32) / 255.0 * 2.0 - 1.0)
            assert type(lab) is int and lab == want_lab
    img = got[0][0]
    assert img.min() >= -1.0 and img.max() == 1.0  # 255 -> 1


def test_mnist_rejects_wrong_magic(home, monkeypatch, tmp_path):
    import gzip
    import struct
    fakes.install_mnist(home, monkeypatch=monkeypatch)
    path = home / "mnist" / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(struct.pack(">II", 2051, 1) + b"\x00"))
    monkeypatch.setattr(mnist, "TEST_LABEL_MD5", fakes._md5(path))
    with pytest.raises(ValueError, match="mnist: .*t10k-labels-idx1-ubyte.gz is not an IDX file of this kind: "
                                         "magic number 2051, expected 2049"):
        next(mnist.test()())


# ------------------------------------------------------------------------------------------------ cifar
def test_cifar_values_members_and_labels(home, monkeypatch):
    raw = fakes.install_cifar(home, n_train=9, n_test=4, n_batches=2, monkeypatch=monkeypatch)
    for key, reader in (("train10", cifar.train10()), ("test10", cifar.test10()), ("train100", cifar.train100()),
                        ("test100", cifar.test100())):
        images, labels = raw[key]
        got = list(reader())
        assert [lab for _, lab in got] == list(labels)  # data_batch_1 then data_batch_2, in archive order
        assert all(type(lab) is int for _, lab in got)
        stacked = np.stack([img for img, _ in got])
        assert stacked.dtype == np.float32 and stacked.shape == (len(labels), 3072)
        np.testing.assert_allclose(stacked, (images / 255.0).astype(np.float32), rtol=0, atol=0)


def test_cifar_cycle_really_cycles(home, monkeypatch):
    raw = fakes.install_cifar(home, n_train=4, n_test=3, monkeypatch=monkeypatch)
    it = cifar.test10(cycle=True)()
    labels = [next(it)[1] for _ in range(7)]
    assert labels == raw["test10"][1] * 2 + raw["test10"][1][:1]


# ------------------------------------------------------------------------------------------------ uci_housing
def test_uci_housing_normalisation_and_split(home, monkeypatch):
    table = fakes.install_uci_housing(home, rows=21, monkeypatch=monkeypatch)
    want = table.copy()
    for i in range(13):  # over the whole file, train and test rows alike
        want[:, i] = (table[:, i] - table[:, i].mean()) / (table[:, i].max() - table[:, i].min())
    train = list(uci_housing.train()())
    test = list(uci_housing.test()())
    assert len(train) == int(21 * 0.8) == 16 and len(test) == 5
    for (x, y), row in zip(train + test, want):
        assert x.dtype == np.float64 and x.shape == (13,) and y.dtype == np.float64 and y.shape == (1,)
        np.testing.assert_allclose(x, row[:13], rtol=1e-12, atol=1e-12)
        assert y[0] == row[13]
    np.testing.assert_allclose(uci_housing.predict_reader()[0], want[16, :13], rtol=1e-12)
    assert len(uci_housing.feature_names) == 13 and uci_housing.feature_names[-1] == "LSTAT"


def test_uci_housing_rereads_after_data_home_changes(home, monkeypatch, tmp_path):
    fakes.install_uci_housing(home, rows=10, monkeypatch=monkeypatch)
    assert len(list(uci_housing.train()())) == 8
    fakes.install_uci_housing(tmp_path / "other", rows=20, monkeypatch=monkeypatch)
    assert len(list(uci_housing.train()())) == 16


def test_uci_housing_bad_table(home, monkeypatch):
    fakes.install_uci_housing(home, rows=3, monkeypatch=monkeypatch)
    path = home / "uci_housing" / "housing.data"
    path.write_text("1 2 3\n")
    monkeypatch.setattr(uci_housing, "MD5", fakes._md5(path))
    with pytest.raises(ValueError, match="uci_housing: .*housing.data holds 3 numbers, expected a positive "
                                         "multiple of 14"):
        uci_housing.train()


# ------------------------------------------------------------------------------------------------ imikolov
PTB_TRAIN = [" a b a c \n", " a b <unk> \n", " b a d \n"]
PTB_VALID = [" a e \n", " \n"]


def test_imikolov_dict(home, monkeypatch):
    fakes.install_imikolov(home, train_lines=PTB_TRAIN, valid_lines=PTB_VALID, monkeypatch=monkeypatch)
    # counts over train+valid: <s>=5, <e>=5, a=5, b=3, c=1, d=1, e=1; <unk> dropped; kept if count > min
    assert imikolov.build_dict(min_word_freq=0) == {"<e>": 0, "<s>": 1, "a": 2, "b": 3, "c": 4, "d": 5, "e": 6,
                                                    "<unk>": 7}
    assert imikolov.build_dict(min_word_freq=3) == {"<e>": 0, "<s>": 1, "a": 2, "<unk>": 3}


def test_imikolov_ngram_and_seq(home, monkeypatch):
    fakes.install_imikolov(home, train_lines=PTB_TRAIN, valid_lines=PTB_VALID, monkeypatch=monkeypatch)
    d = {"<s>": 0, "<e>": 1, "a": 2, "b": 3, "<unk>": 4}
    assert list(imikolov.train(d, 5)()) == [(0, 2, 3, 2, 4), (2, 3, 2, 4, 1), (0, 2, 3, 4, 1), (0, 3, 2, 4, 1)]
    # test() reads ptb.valid.txt; the empty line becomes "<s> <e>"
    assert list(imikolov.test(d, 2)()) == [(0, 2), (2, 4), (4, 1), (0, 1)]
    seq = imikolov.DataType.SEQ
    assert list(imikolov.train(d, 4, seq)()) == [([0, 2, 3, 4], [2, 3, 4, 1]), ([0, 3, 2, 4], [3, 2, 4, 1])]
    assert len(list(imikolov.train(d, 0, seq)())) == 3  # n=0: no length limit
    with pytest.raises(ValueError, match="imikolov: data_type must be DataType.NGRAM \\(1\\) or DataType.SEQ "
                                         "\\(2\\), got 3"):
        imikolov.train(d, 2, 3)


# ------------------------------------------------------------------------------------------------ imdb
def test_imdb_tokenising_dict_and_labels(home, monkeypatch):
    docs = {("train", "pos"): [b"Good, good film!\n", b"GOOD <br />plot.\r\n"],
            ("train", "neg"): [b"Bad film... bad.\n"],
            ("test", "pos"): [b"good\n"],
            ("test", "neg"): [b"bad plot\n", b"dull\n"]}
    fakes.install_imdb(home, docs=docs, monkeypatch=monkeypatch)
    pattern = re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$")
    # good 4, bad 3, film 2, plot 2, br 1, dull 1 (the unsup review and imdb.vocab are not read)
    assert imdb.build_dict(pattern, 1) == {"good": 0, "bad": 1, "film": 2, "plot": 3, "<unk>": 4}
    assert imdb.build_dict(pattern, 0) == {"good": 0, "bad": 1, "film": 2, "plot": 3, "br": 4, "dull": 5,
                                           "<unk>": 6}
    d = imdb.build_dict(pattern, 1)
    assert list(imdb.train(d)()) == [([0, 0, 2], 0), ([0, 4, 3], 0), ([1, 2, 1], 1)]
    assert list(imdb.test(d)()) == [([0], 0), ([1, 3], 1), ([4], 1)]


def test_imdb_word_dict_cutoff_is_150(home, monkeypatch):
    docs = {("train", "pos"): [b"often " * 151 + b"rare " * 150], ("train", "neg"): [], ("test", "pos"): [],
            ("test", "neg"): []}
    fakes.install_imdb(home, docs=docs, monkeypatch=monkeypatch)
    assert imdb.word_dict() == {"often": 0, "<unk>": 1}


# ------------------------------------------------------------------------------------------------ movielens
def test_movielens_samples_split_and_ids(home, monkeypatch):
    raw = fakes.install_movielens(home, n_ratings=200, monkeypatch=monkeypatch)
    movies = {m: (t, g) for m, t, g in raw["movies"]}
    users = {u: (g, a, j) for u, g, a, j in raw["users"]}
    cats, words = {}, {}
    for _, title, genres in raw["movies"]:  # ids in order of first appearance
        for g in genres:
            cats.setdefault(g, len(cats))
        for w in title.split():
            words.setdefault(w.lower(), len(words))
    assert movielens.movie_categories() == cats
    assert movielens.get_movie_title_dict() == words
    assert "café" in words  # latin-1 decoded
    draws = np.random.RandomState(0).random_sample(len(raw["ratings"]))
    want = {False: [], True: []}
    for (uid, mid, r), p in zip(raw["ratings"], draws):
        g, age, job = users[uid]
        title, genres = movies[mid]
        want[bool(p < 0.1)].append([uid, 0 if g == "M" else 1, movielens.age_table.index(age), job, mid,
                                    [cats[c] for c in genres], [words[w.lower()] for w in title.split()],
                                    [r * 2 - 5.0]])
    state = np.random.get_state()[1].copy()
    assert list(movielens.train()()) == want[False]
    assert list(movielens.test()()) == want[True]
    assert len(want[True]) > 0
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # numpy's global generator untouched
    assert movielens.max_user_id() == max(users)
    assert movielens.max_movie_id() == max(movies)
    assert movielens.max_job_id() == max(j for _, _, j in users.values())
    assert movielens.user_info()[2].value() == [2, 0, movielens.age_table.index(users[2][1]), users[2][2]]


# ------------------------------------------------------------------------------------------------ conll05
def test_conll05_dicts_and_samples(home, monkeypatch):
    fakes.install_conll05(home, monkeypatch=monkeypatch)
    word_dict, verb_dict, label_dict = conll05.get_dict()
    assert word_dict == {w: i for i, w in enumerate(fakes.CONLL_WORDS)}
    assert verb_dict == {"chase": 0, "say": 1, "leave": 2}
    # tags in order of first appearance in targetDict.txt, B-/I- pairs, O last
    assert label_dict == {"B-A0": 0, "I-A0": 1, "B-A1": 2, "I-A1": 3, "B-AM-TMP": 4, "I-AM-TMP": 5, "B-V": 6,
                          "I-V": 7, "O": 8}
    L = label_dict
    w = word_dict
    got = list(conll05.test()())
    assert got == [
        # "The cat chased a mouse .", verb chased at 2
        ([1, 2, 3, 4, 5, 6], [w["The"]] * 6, [w["cat"]] * 6, [w["chased"]] * 6, [w["a"]] * 6, [w["mouse"]] * 6,
         [0] * 6, [1, 1, 1, 1, 1, 0], [L["B-A0"], L["I-A0"], L["B-V"], L["B-A1"], L["I-A1"], L["O"]]),
        # "He said she left early", verb said at 1: ctx_n2 is bos; "early" is unknown (UNK_IDX 0)
        ([7, 8, 9, 10, 0], [w["bos"]] * 5, [w["He"]] * 5, [w["said"]] * 5, [w["she"]] * 5, [w["left"]] * 5,
         [1] * 5, [1, 1, 1, 1, 0], [L["B-A0"], L["B-V"], L["B-A1"], L["I-A1"], L["I-A1"]]),
        # same sentence, verb left at 3: ctx_p2 is eos
        ([7, 8, 9, 10, 0], [w["said"]] * 5, [w["she"]] * 5, [w["left"]] * 5, [0] * 5, [w["eos"]] * 5,
         [2] * 5, [0, 1, 1, 1, 1], [L["O"], L["O"], L["B-A0"], L["B-V"], L["B-AM-TMP"]]),
    ]
    assert conll05.get_embedding() == str(home / "conll05st" / "emb")


def test_conll05_bad_props(home, monkeypatch):
    fakes.install_conll05(home, sentences=[(["x"], [["go", "(V*)"]]), (["y"], [["go", "#"]])],
                          monkeypatch=monkeypatch)
    with pytest.raises(ValueError, match="conll05: unexpected label '#' in .*test.wsj.props.gz"):
        list(conll05.test()())
    fakes.install_conll05(home, sentences=[(["x", "y"], [["-", "(V*)"], ["-", "*"]])], monkeypatch=monkeypatch)
    with pytest.raises(ValueError, match="conll05: a sentence of .*test.wsj.props.gz has 1 predicate column\\(s\\) "
                                         "but names 0 verb\\(s\\) in column 0"):
        list(conll05.test()())


# ------------------------------------------------------------------------------------------------ wmt16
def test_wmt16_dicts_and_samples(home, monkeypatch):
    raw = fakes.install_wmt16(home, monkeypatch=monkeypatch)
    counts = {}
    for en, _ in raw["train"]:
        for t in en.split():
            counts[t] = counts.get(t, 0) + 1
    top = [t for t, _ in sorted(counts.items(), key=lambda x: x[1], reverse=True)][:5]
    samples = list(wmt16.train(8, 6)())
    en_dict = wmt16.get_dict("en", 8)
    assert en_dict == {w: i for i, w in enumerate(["<s>", "<e>", "<unk>"] + top)}
    assert (home / "wmt16" / "en_8.dict").read_text() == "".join(t + "\n" for t in ["<s>", "<e>", "<unk>"] + top)
    de_dict = wmt16.get_dict("de", 6)
    assert len(de_dict) == 6 and wmt16.get_dict("de", 6, reverse=True) == {i: w for w, i in de_dict.items()}
    assert len(samples) == len(raw["train"])  # the malformed line is skipped
    for (src, trg, nxt), (en, de) in zip(samples, raw["train"]):
        assert src == [0] + [en_dict.get(t, 2) for t in en.split()] + [1]
        assert trg == [0] + [de_dict.get(t, 2) for t in de.split()]
        assert nxt == trg[1:] + [1]
    rev = list(wmt16.validation(6, 8, src_lang="de")())
    assert rev[0][0] == [0] + [de_dict.get(t, 2) for t in raw["val"][0][1].split()] + [1]
    assert len(list(wmt16.test(8, 6)())) == len(raw["test"])


def test_wmt16_sizes_are_clipped_and_lang_checked(home, monkeypatch):
    fakes.install_wmt16(home, monkeypatch=monkeypatch)
    list(wmt16.train(10 ** 6, 10 ** 6)())
    assert (home / "wmt16" / ("en_%d.dict" % wmt16.TOTAL_EN_WORDS)).exists()
    assert (home / "wmt16" / ("de_%d.dict" % wmt16.TOTAL_DE_WORDS)).exists()
    with pytest.raises(ValueError, match="wmt16.train: src_lang must be 'en' \\(English\\) or 'de' \\(German\\), "
                                         "got 'fr'"):
        wmt16.train(10, 10, src_lang="fr")


# ------------------------------------------------------------------------------------------------ book usage
def test_book_style_pipeline(home, monkeypatch):
    fakes.install_mnist(home, n_train=20, n_test=5, monkeypatch=monkeypatch)
    reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=500), batch_size=8)
    batches = list(reader())
    assert [len(b) for b in batches] == [8, 8, 4]
    assert all(img.shape == (784,) for b in batches for img, _ in b)


def test_install_all_without_monkeypatch_registers_md5(tmp_path, monkeypatch):
    # The plain-assignment path (for callers without a monkeypatch fixture): undo it through monkeypatch here.
    for mod, attrs in ((mnist, ["TRAIN_IMAGE_MD5", "TRAIN_LABEL_MD5", "TEST_IMAGE_MD5", "TEST_LABEL_MD5"]),
                       (cifar, ["CIFAR10_MD5", "CIFAR100_MD5"]), (uci_housing, ["MD5"]), (imikolov, ["MD5"]),
                       (imdb, ["MD5"]), (movielens, ["MD5"]), (wmt16, ["DATA_MD5"]),
                       (conll05, ["DATA_MD5", "WORDDICT_MD5", "VERBDICT_MD5", "TRGDICT_MD5", "EMB_MD5"])):
        for a in attrs:
            monkeypatch.setattr(mod, a, getattr(mod, a))
    fakes.install_all(tmp_path / "all")
    monkeypatch.setenv("FLUIDLITE_DATA_HOME", str(tmp_path / "all"))
    assert common.data_home() == str(tmp_path / "all")
    assert len(list(mnist.train()())) == 64
    assert len(list(conll05.test()())) == 3


def test_imikolov_accepts_archive_without_dot_slash(home, monkeypatch):
    folder = home / "imikolov"
    folder.mkdir(parents=True)
    fakes._tar(str(folder / "simple-examples.tgz"), {"simple-examples/data/ptb.train.txt": b" a b \n",
                                                      "simple-examples/data/ptb.valid.txt": b" a \n"})
    monkeypatch.setattr(imikolov, "MD5", fakes._md5(folder / "simple-examples.tgz"))
    assert imikolov.build_dict(0) == {"<e>": 0, "<s>": 1, "a": 2, "b": 3, "<unk>": 4}
    fakes._tar(str(folder / "simple-examples.tgz"), {"other.txt": b"x\n"})
    monkeypatch.setattr(imikolov, "MD5", fakes._md5(folder / "simple-examples.tgz"))
    with pytest.raises(ValueError, match=r"imikolov: .*simple-examples.tgz has no member "
                                         r"\./simple-examples/data/ptb.train.txt"):
        imikolov.build_dict(0)
