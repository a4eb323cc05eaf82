"""What the book chapter tests share besides their fixtures (conftest.py): the loss check."""
import numpy as np


def assert_loss_decreased(losses, k=3, factor=0.9):
    """The mean of the last k losses is below `factor` times the mean of the first k (robust to one noisy step)."""
    losses = [float(np.asarray(v).ravel()[0]) for v in losses]
    assert len(losses) >= 2 * k, losses
    assert all(np.isfinite(losses)), losses
    first, last = np.mean(losses[:k]), np.mean(losses[-k:])
    assert last < factor * first, "loss did not decrease: first %d mean %.4f, last %d mean %.4f (%s)" % (
        k, first, k, last, ", ".join("%.4f" % v for v in losses))
