"""The fixtures of the book chapter tests: `chapter` (a fresh program, scope and folder) and `book_data`."""
import os
import random
import sys
import urllib.request

import numpy as np
import pytest

import fluidlite as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dataset"))  # fakes


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    """Runs the test the way a chapter script runs: default programs, names and scope of its own, the working
    directory a fresh folder, Python's random (paddle.reader.shuffle) seeded, one compute thread."""
    monkeypatch.chdir(tmp_path)
    random.seed(0)
    np.random.seed(0)
    threads = fluid.core.get_num_threads()
    fluid.core.set_num_threads(1)  # a shared 2-core machine: one thread is the fastest and steadiest
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard(), \
            fluid.scope_guard(fluid.Scope()):
        yield tmp_path
    fluid.core.set_num_threads(threads)


@pytest.fixture
def book_data(tmp_path, monkeypatch):
    """The chapters' data sets as small generated files in the real formats (tests/dataset/fakes.py) under a
    FLUIDLITE_DATA_HOME of their own, with the network cut off."""
    import fakes

    def refuse(url, *args, **kwargs):
        raise AssertionError("a book test tried to reach %s" % (getattr(url, "full_url", url),))

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    home = tmp_path / "data_home"
    # fit_a_line: 400 training rows, 20 batches an epoch (SGD at lr 0.001 needs a hundred steps to show)
    fakes.install_uci_housing(home, rows=500, monkeypatch=monkeypatch)
    fakes.install_mnist(home, n_train=64, n_test=16, monkeypatch=monkeypatch)
    fakes.install_cifar(home, n_train=40, n_test=10, monkeypatch=monkeypatch)
    # word2vec: sentences a 4-gram model can learn (every word above build_dict's min_word_freq of 50)
    rng = np.random.RandomState(0)
    sentences = [" the cat sat on the mat \n", " a dog ran to the house \n", " the dog sat on a mat \n"]
    fakes.install_imikolov(home, train_lines=[sentences[i] for i in rng.randint(0, 3, 120)],
                           valid_lines=[sentences[i] for i in rng.randint(0, 3, 30)], monkeypatch=monkeypatch)
    return home
