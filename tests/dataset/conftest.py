"""Every test here runs with the network cut off: urllib's urlopen raises and records the attempt."""
import urllib.request

import pytest

from fluidlite.dataset import common


class NetworkUsed(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_network(monkeypatch, tmp_path):
    calls = []

    def refuse(url, *args, **kwargs):
        calls.append(getattr(url, "full_url", url))
        raise NetworkUsed("test tried to reach %s" % (url,))

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(common, "RETRY_WAIT_S", 0)
    monkeypatch.delenv("FLUIDLITE_DATA_OFFLINE", raising=False)
    monkeypatch.setenv("FLUIDLITE_DATA_HOME", str(tmp_path / "data_home"))
    return calls
