"""fluidlite.dataset.common: cache location, md5 checks, atomic downloads with retries, offline errors.
The network is cut off by conftest.no_network; downloads are simulated by replacing urlopen."""
import hashlib
import io
import os
import pickle
import re
import urllib.request

import pytest

import fakes
from fluidlite.dataset import common, imdb, mnist, uci_housing

PAYLOAD = b"0.1 0.2\n" * 100
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


class FakeResponse(io.BytesIO):
    def __init__(self, data, fail_after=None):
        super().__init__(data)
        self.fail_after = fail_after

    def read(self, n=-1):
        if self.fail_after is not None and self.tell() >= self.fail_after:
            raise ConnectionResetError("connection reset mid-file")
        return super().read(min(n, self.fail_after - self.tell()) if self.fail_after is not None else n)


def serve(monkeypatch, responses):
    """urlopen returns (or raises) the given responses in order; returns the list of URLs asked for."""
    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        r = responses.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def leftovers(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


def test_data_home_follows_env_at_call_time(monkeypatch, tmp_path):
    monkeypatch.setenv("FLUIDLITE_DATA_HOME", str(tmp_path / "a"))
    assert common.DATA_HOME == str(tmp_path / "a")
    monkeypatch.setenv("FLUIDLITE_DATA_HOME", str(tmp_path / "b"))
    assert common.data_home() == str(tmp_path / "b")
    monkeypatch.delenv("FLUIDLITE_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert common.data_home() == str(tmp_path / "home" / ".cache" / "fluidlite" / "dataset")
    assert not os.path.exists(tmp_path / "home")  # nothing is created until a file is needed


def test_offline_error_names_file_url_md5_and_path(no_network):
    with pytest.raises(common.DatasetFileError) as ei:
        uci_housing.train()
    msg = str(ei.value)
    path = os.path.join(common.data_home(), "uci_housing", "housing.data")
    assert "fluidlite.dataset.uci_housing: cannot get the file 'housing.data' (md5 %s)" % uci_housing.MD5 in msg
    assert "download it from %s and put it at %s" % (uci_housing.URL, path) in msg
    assert "NetworkUsed: test tried to reach %s" % uci_housing.URL in msg
    assert no_network == [uci_housing.URL] * common.RETRIES  # retried, then gave up
    assert leftovers(os.path.dirname(path)) == []


def test_offline_error_lists_mirrors(no_network):
    with pytest.raises(common.DatasetFileError, match=re.escape(
            "download it from %s or %s and put it at %s" % (imdb.MIRROR_URL, imdb.URL,
                                                           os.path.join(common.data_home(), "imdb",
                                                                        "aclImdb_v1.tar.gz")))):
        imdb.word_dict()
    assert no_network == [imdb.MIRROR_URL, imdb.URL] * common.RETRIES


def test_offline_switch_never_tries(no_network, monkeypatch):
    monkeypatch.setenv("FLUIDLITE_DATA_OFFLINE", "1")
    with pytest.raises(common.DatasetFileError, match="downloads are disabled \\(FLUIDLITE_DATA_OFFLINE is set\\)"):
        mnist.train()
    assert no_network == []


def test_download_is_md5_checked_and_atomic(monkeypatch):
    asked = serve(monkeypatch, [FakeResponse(PAYLOAD)])
    path = common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"])
    assert path == os.path.join(common.data_home(), "toy", "toy.txt")
    with open(path, "rb") as f:
        assert f.read() == PAYLOAD
    assert asked == ["http://example.invalid/toy.txt"] and leftovers(os.path.dirname(path)) == []
    # cached: no second download
    assert common.download("http://example.invalid/toy.txt", "toy", PAYLOAD_MD5) == path
    assert len(asked) == 1


def test_interrupted_download_leaves_nothing_and_is_retried(monkeypatch):
    asked = serve(monkeypatch, [FakeResponse(PAYLOAD, fail_after=300), FakeResponse(PAYLOAD)])
    folder = os.path.join(common.data_home(), "toy")
    path = common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"])
    assert len(asked) == 2 and open(path, "rb").read() == PAYLOAD and leftovers(folder) == []


def test_interrupted_download_never_passes_for_complete(monkeypatch):
    serve(monkeypatch, [FakeResponse(PAYLOAD, fail_after=300) for _ in range(common.RETRIES)])
    folder = os.path.join(common.data_home(), "toy")
    with pytest.raises(common.DatasetFileError, match="ConnectionResetError: connection reset mid-file"):
        common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"])
    assert os.listdir(folder) == []


def test_wrong_content_is_refused(monkeypatch):
    serve(monkeypatch, [FakeResponse(b"<html>login page</html>") for _ in range(common.RETRIES)])
    with pytest.raises(common.DatasetFileError, match="downloaded file has md5 [0-9a-f]{32}, expected %s"
                       % PAYLOAD_MD5):
        common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"])
    assert os.listdir(os.path.join(common.data_home(), "toy")) == []


def test_preplaced_file_is_used_only_if_md5_matches(no_network, tmp_path):
    folder = os.path.join(common.data_home(), "toy")
    os.makedirs(folder)
    with open(os.path.join(folder, "toy.txt"), "wb") as f:
        f.write(PAYLOAD[:-1])  # truncated copy
    with pytest.raises(common.DatasetFileError, match=re.escape(
            "Present but with the wrong md5 (incomplete or another version): %s has md5 %s"
            % (os.path.join(folder, "toy.txt"), hashlib.md5(PAYLOAD[:-1]).hexdigest()))):
        common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"])
    with open(os.path.join(folder, "toy.txt"), "wb") as f:
        f.write(PAYLOAD)
    assert common.get_file("toy", "toy.txt", PAYLOAD_MD5, ["http://example.invalid/toy.txt"]).endswith("toy.txt")


def test_file_copied_from_paddle_cache_is_accepted(no_network, monkeypatch, tmp_path):
    # Paddle saved the mirror's file under the URL's last part, imdb%2FaclImdb_v1.tar.gz.
    home = tmp_path / "data_home"
    fakes.install_imdb(home, monkeypatch=monkeypatch)
    folder = home / "imdb"
    os.rename(folder / "aclImdb_v1.tar.gz", folder / "imdb%2FaclImdb_v1.tar.gz")
    assert len(list(imdb.train(imdb.word_dict())())) == 12
    assert no_network == []


def test_split_and_cluster_files_reader(tmp_path):
    def reader():
        return iter(range(7))

    out = tmp_path / "parts"
    out.mkdir()
    common.split(reader, 3, suffix=str(out / "part-%05d.pickle"))
    assert sorted(os.listdir(out)) == ["part-00000.pickle", "part-00001.pickle", "part-00002.pickle"]
    with open(out / "part-00000.pickle", "rb") as f:
        assert pickle.load(f) == [0, 1, 2]
    pattern = str(out / "part-*.pickle")
    assert list(common.cluster_files_reader(pattern, 2, 0)()) == [0, 1, 2, 6]
    assert list(common.cluster_files_reader(pattern, 2, 1)()) == [3, 4, 5]
    with pytest.raises(ValueError, match="split: line_count must be a positive integer, got 0"):
        common.split(reader, 0)
