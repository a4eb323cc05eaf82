"""What the book chapter tests share besides the `chapter` fixture (conftest.py): the pieces they need and the
loss check."""

import numpy as np
import pytest

import fluidlite as fluid

# The pieces of issue [3/10] the chapters need, landing from other branches; a chapter test skips until its
# pieces exist (temporary: by the end of the issue every chapter runs).
HAS = {
    "fluid.data": hasattr(fluid, "data"),
    "fluid.DataFeeder": hasattr(fluid, "DataFeeder"),
    "fluid.embedding": hasattr(fluid, "embedding"),
    "fluid.create_lod_tensor": hasattr(fluid, "create_lod_tensor"),
    "paddle.batch": hasattr(fluid, "batch"),
    "paddle.reader": hasattr(fluid, "reader"),
    "paddle.dataset": hasattr(fluid, "dataset"),
}


def needs(*pieces):
    missing = [p for p in pieces if not HAS[p]]
    return pytest.mark.skipif(bool(missing), reason="needs %s (issue [3/10], not merged yet)" % ", ".join(missing))


def assert_loss_decreased(losses, k=3, factor=0.9):
    """The mean of the last k losses is below `factor` times the mean of the first k (robust to one noisy step)."""
    losses = [float(np.asarray(v).ravel()[0]) for v in losses]
    assert len(losses) >= 2 * k, losses
    assert all(np.isfinite(losses)), losses
    first, last = np.mean(losses[:k]), np.mean(losses[-k:])
    assert last < factor * first, "loss did not decrease: first %d mean %.4f, last %d mean %.4f (%s)" % (
        k, first, k, last, ", ".join("%.4f" % v for v in losses))
