"""fc (Fluid 1.8's fused op, made by the fuse_fc inference pass): Out = act(flatten(Input) @ W + Bias) against numpy,
every activation, in_num_col_dims, no bias, float64, and its attribute check. The pass itself:
tests/test_inference_passes.py."""
import numpy as np
import pytest

from fluidlite import core
from op_test import OpTest

ACTS = {"": lambda v: v, "relu": lambda v: np.maximum(v, 0), "relu6": lambda v: np.clip(v, 0, 6),
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fc_matches_numpy(act, dtype):
    rng = np.random.RandomState(0)
    x = rng.randn(5, 7).astype(dtype)
    w = rng.randn(7, 3).astype(dtype)
    b = rng.randn(3).astype(dtype)
    OpTest("fc", {"Input": x, "W": w, "Bias": b}, {"Out": ACTS[act](x @ w + b).astype(dtype)},
           {"activation_type": act}).check_output(rtol=1e-5, atol=1e-6)


def test_fc_flattens_by_in_num_col_dims_and_bias_is_optional():
    rng = np.random.RandomState(1)
    x = rng.randn(2, 3, 4).astype("float32")
    w = rng.randn(4, 5).astype("float32")
    OpTest("fc", {"Input": x, "W": w}, {"Out": (x.reshape(6, 4) @ w).reshape(2, 3, 5)},
           {"in_num_col_dims": 2}).check_output(rtol=1e-5, atol=1e-6)


def test_fc_rejects_an_unknown_activation():
    x, w = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
    with pytest.raises(core.EnforceNotMet, match="activation_type"):
        OpTest("fc", {"Input": x, "W": w}, {"Out": x @ w}, {"activation_type": "softmax"}).check_output()
