"""The random-tensor ops (kernels/random.cc): uniform_random and gaussian_random. Seeded reproducibility and
seed 0 freshness for both; statistics of each against its distribution; the program random seed of the
initializers; errors."""
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import record_checked

N = 100000


def build(op, shape, dtype="float32", seed=0, **kw):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        if op == "uniform_random":
            out = fluid.layers.uniform_random(shape, dtype=dtype, seed=seed, **kw)
        else:
            out = fluid.layers.gaussian_random(shape, seed=seed, dtype=dtype, **kw)
    return main, out


def sample(op, shape=(N,), dtype="float32", seed=0, runs=1, **kw):
    main, out = build(op, shape, dtype, seed, **kw)
    exe = fluid.Executor(fluid.CPUPlace())
    return [exe.run(main, fetch_list=[out])[0] for _ in range(runs)]


OPS = ["uniform_random", "gaussian_random"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shape_and_dtype(op, dtype):
    main, out = build(op, [3, 1, 4], dtype)
    assert out.shape == (3, 1, 4) and out.dtype == fluid.framework.convert_np_dtype_to_dtype_(dtype)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    assert got.shape == (3, 1, 4) and got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_seeded_is_reproducible_across_runs_and_programs(op, dtype):
    a1, a2 = sample(op, (1000,), dtype, seed=123, runs=2)
    np.testing.assert_array_equal(a1, a2)  # two runs of one program
    (b,) = sample(op, (1000,), dtype, seed=123)  # a second program, built separately
    np.testing.assert_array_equal(a1, b)
    (c,) = sample(op, (1000,), dtype, seed=124)
    assert not np.array_equal(a1, c)
    # A shorter tensor with the same seed is a prefix: the stream depends only on the seed.
    (d,) = sample(op, (10,), dtype, seed=123)
    np.testing.assert_array_equal(d, a1[:10])


def _sample_in_child(op, args):
    """The bytes (hex) of `fluid.layers.<op>(<args>)` run once in a fresh interpreter."""
    code = ("import fluidlite as fluid\n"
            "main = fluid.Program()\n"
            "with fluid.program_guard(main, fluid.Program()):\n"
            "    out = fluid.layers.%s(%s)\n"
            "print(fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])[0].tobytes().hex())\n" % (op, args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("op", OPS)
def test_seeded_is_reproducible_across_processes(op):
    outs = [_sample_in_child(op, "[6], seed=77") for _ in range(2)]
    assert outs[0] == outs[1]
    (here,) = sample(op, (6,), seed=77)
    assert here.tobytes().hex() == outs[0]


@pytest.mark.parametrize("op", OPS)
def test_seed_zero_differs_across_runs_and_programs(op):
    a1, a2 = sample(op, (1000,), seed=0, runs=2)
    assert not np.array_equal(a1, a2)
    (b,) = sample(op, (1000,), seed=0)
    assert not np.array_equal(a1, b)


@pytest.mark.parametrize("op", OPS)
def test_seed_zero_differs_across_processes(op):
    outs = [_sample_in_child(op, "[8]") for _ in range(2)]
    assert outs[0] != outs[1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (2.0, 5.0), (-0.001, 0.0)])
def test_uniform_statistics(dtype, lo, hi):
    kw = {"min": lo, "max": hi}
    (x,) = sample("uniform_random", (N,), dtype, seed=5, **kw)
    assert x.min() >= np.array(lo, dtype) and x.max() < np.array(hi, dtype)
    width = hi - lo
    # Tolerances are several standard errors wide (mean: width/sqrt(12 N) ~ 0.001 width).
    assert abs(x.mean() - (lo + hi) / 2) < 0.006 * width
    assert abs(x.std() - width / np.sqrt(12)) < 0.006 * width
    # Filled evenly: every tenth of the range holds about a tenth of the samples.
    hist, _ = np.histogram(x, bins=10, range=(lo, hi))
    assert np.all(np.abs(hist / N - 0.1) < 0.006)
    assert x.min() < lo + 0.001 * width and x.max() > hi - 0.001 * width
    record_checked("statistical", "uniform_random")


def test_uniform_defaults_are_minus_one_to_one():
    main = fluid.Program()
    block = main.global_block()
    out = block.create_var(name="u", dtype="float32")
    block.append_op(type="uniform_random", outputs={"Out": out}, attrs={"shape": [N]})
    (x,) = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    assert x.min() >= -1 and x.max() < 1 and x.min() < -0.99 and x.max() > 0.99


def test_initializers_use_program_random_seed():
    def init_values(initializer):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = 42
        with fluid.program_guard(main, startup):
            w = fluid.layers.create_parameter([50], "float32", name="w", default_initializer=initializer)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        return exe.run(main, fetch_list=[w])[0]

    for init in (fluid.initializer.Uniform(-0.5, 0.5), fluid.initializer.Normal(0.0, 2.0)):
        a, b = init_values(init), init_values(init)
        np.testing.assert_array_equal(a, b)
        assert np.std(a) > 0
    u = init_values(fluid.initializer.Uniform(-0.5, 0.5))
    assert u.min() >= -0.5 and u.max() < 0.5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (3.0, 0.5), (-2.0, 10.0)])
def test_gaussian_statistics(dtype, mean, std):
    (x,) = sample("gaussian_random", (N,), dtype, seed=9, mean=mean, std=std)
    assert abs(x.mean() - mean) < 0.015 * std  # standard error: std / sqrt(N) ~ 0.003 std
    assert abs(x.std() - std) < 0.015 * std
    z = (x - mean) / std
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.01
    assert abs(np.mean(np.abs(z) < 2) - 0.9545) < 0.005
    assert abs(np.mean(z ** 3)) < 0.05 and abs(np.mean(z ** 4) - 3) < 0.1  # skew 0, kurtosis 3
    assert np.all(np.isfinite(x))
    record_checked("statistical", "gaussian_random")


def test_gaussian_std_zero_is_constant():
    (x,) = sample("gaussian_random", (100,), "float64", seed=1, mean=4.0, std=0.0)
    np.testing.assert_array_equal(x, np.full(100, 4.0))


def test_gaussian_odd_length():
    (a,) = sample("gaussian_random", (7,), "float64", seed=3)
    (b,) = sample("gaussian_random", (8,), "float64", seed=3)
    np.testing.assert_array_equal(a, b[:7])


@pytest.mark.parametrize("op", OPS)
def test_int_dtype_rejected(op):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(core.EnforceNotMet, match=op + r": dtype int32 of Out '.*' is not supported"):
            build(op, [2], "int32")


@pytest.mark.parametrize("op", OPS)
def test_negative_shape_rejected(op):
    with pytest.raises(core.EnforceNotMet, match=op + r": attribute shape \[2, -1\] has a negative dim"):
        build(op, [2, -1])


def test_uniform_min_not_below_max():
    with pytest.raises(core.EnforceNotMet, match="uniform_random: min 1 must be less than max 1"):
        build("uniform_random", [2], min=1.0, max=1.0)


def test_gaussian_negative_std():
    with pytest.raises(core.EnforceNotMet, match="gaussian_random: std -1 must not be negative"):
        build("gaussian_random", [2], std=-1.0)
