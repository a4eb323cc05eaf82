"""sampling_id: deterministic rows (one-hot, and a row summing below the draw) against numpy, frequencies of many
draws against each row's distribution, min/max, seeded reproducibility and seed-0 freshness, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked


def program(probs_shape, dtype="float32", **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape=list(probs_shape), dtype=dtype)
        out = fluid.layers.sampling_id(x, **attrs)
    return main, out


def draw(probs, runs=1, **attrs):
    main, out = program(probs.shape, str(probs.dtype), **attrs)
    exe = fluid.Executor(fluid.CPUPlace())
    return [exe.run(main, feed={"x": probs}, fetch_list=[out])[0] for _ in range(runs)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sampling_id_deterministic_rows(dtype):
    """A one-hot row always gives its hot column; a row whose sum never exceeds the draw gives the last column
    (Fluid's fallback): here the draw is in [0.6, 1) and the row sums to 0.5."""
    eye = np.eye(5, dtype=dtype)[[3, 0, 4, 1, 1, 2]]
    OpTest("sampling_id", {"X": eye}, {"Out": np.array([3, 0, 4, 1, 1, 2], "int64")}, {"seed": 7}).check_output()
    short = np.array([[0.1, 0.2, 0.2, 0.0], [0.25, 0.25, 0.0, 0.0]], dtype)
    OpTest("sampling_id", {"X": short}, {"Out": np.array([3, 3], "int64")},
           {"min": 0.6, "max": 1.0}).check_output()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sampling_id_frequencies_follow_each_row(dtype):
    rng = np.random.RandomState(0)
    rows = rng.dirichlet(np.ones(6), size=3).astype(dtype)
    n = 20000
    probs = np.repeat(rows, n, axis=0)
    (ids,) = draw(probs, seed=11)
    assert ids.dtype == np.int64 and ids.shape == (3 * n,) and ids.min() >= 0 and ids.max() < 6
    for k in range(3):
        freq = np.bincount(ids[k * n:(k + 1) * n], minlength=6) / n
        # a binomial frequency's standard error is at most 0.5 / sqrt(n) = 0.0035; allow 5 of them
        np.testing.assert_allclose(freq, rows[k], atol=0.018)
    record_checked("statistical", "sampling_id")


def test_sampling_id_min_max_shift_the_draw():
    """With the draw in [0.5, 1), a [0.5, 0.5] row always gives column 1."""
    (ids,) = draw(np.full((1000, 2), 0.5, "float32"), min=0.5, max=1.0)
    assert (ids == 1).all()


def test_sampling_id_seeds():
    probs = np.full((2000, 4), 0.25, "float32")
    a, b = draw(probs, runs=2, seed=3)
    np.testing.assert_array_equal(a, b)           # a seed repeats its draws on every run, as in Fluid
    c, d = draw(probs, runs=2)                    # seed 0: a process-wide engine, fresh draws
    assert (c != d).any()


def test_sampling_id_layer_and_errors():
    main, out = program([None, 3])
    assert out.dtype == fluid.core.VarDesc.VarType.INT64 and out.shape == (-1,) and out.stop_gradient
    assert fluid.core.op_proto("sampling_id")["grad"] == "no_gradient"
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x3 = fluid.data("x3", shape=[2, 3, 4], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sampling_id: X 'x3' \[2, 3, 4\] must be 2-D"):
            fluid.layers.sampling_id(x3)
        x = fluid.data("x", shape=[2, 3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sampling_id: min 1 must be less than max 0.5"):
            fluid.layers.sampling_id(x, min=1.0, max=0.5)
        ids = fluid.data("ids", shape=[2, 3], dtype="int64")
        with pytest.raises(TypeError, match=r"sampling_id: 'x' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.sampling_id(ids)
