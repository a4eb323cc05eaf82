"""The GPU test subset (tools/device_check.sh runs it with tests/ops on a machine with a CUDA device). Every test here
skips, saying why, where no CUDA device can be used; nothing here runs in CI."""
import pytest

from fluidlite.bench import gpu_unavailable_reason


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: " + reason)
    for item in items:
        if "tests/gpu/" in str(item.path).replace("\\", "/"):
            item.add_marker(skip)
