"""clip_by_norm (kernels/clip_by_norm.cc): X rescaled to L2 norm max_norm when its norm exceeds it, else X
unchanged; checked against numpy; no gradient (as in Fluid); max_norm must be positive."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def _ref(x, max_norm):
    norm = np.sqrt((x.astype(np.float64) ** 2).sum())
    return (x * (max_norm / norm) if norm > max_norm else x).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("max_norm", [0.5, 2.0, 100.0])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)], ids=str)
def test_forward(shape, max_norm, dtype):
    x = np.random.RandomState(7).uniform(-1, 1, shape).astype(dtype)
    want = _ref(x, max_norm)
    OpTest("clip_by_norm", {"X": x}, {"Out": want}, {"max_norm": max_norm}).check_output(atol=1e-7, rtol=1e-6)
    norm = np.sqrt((x.astype(np.float64) ** 2).sum())
    assert (norm > max_norm) == (max_norm == 0.5) or max_norm == 2.0  # 0.5 always clips, 100 never
    if norm > max_norm:  # clipped to max_norm exactly
        assert np.sqrt((want.astype(np.float64) ** 2).sum()) == pytest.approx(max_norm, rel=1e-6)
    else:
        np.testing.assert_array_equal(want, x)


def test_layer_and_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("xc", shape=[4], dtype="float32", append_batch_size=False)
        out = fluid.layers.clip_by_norm(x, max_norm=1.0)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"clip_by_norm: max_norm must be positive, got -1 for "
                                                            r"X 'xc' \[4\]"):
            fluid.layers.clip_by_norm(x, max_norm=-1.0)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"xc": np.array([3, 4, 0, 0], "float32")},
                                                fetch_list=[out])
    np.testing.assert_allclose(got, [0.6, 0.8, 0, 0], rtol=1e-6)
    assert fluid.core.op_proto("clip_by_norm")["grad"] == "none"  # Fluid registers it without a gradient
