"""dropout: mask statistics, seeding, both implementations in train and test, gradients, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked

rng = np.random.RandomState(3)


def run_dropout(x, fetch_grad=False, runs=1, **kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=list(x.shape), dtype=str(x.dtype), append_batch_size=False)
        xv.stop_gradient = False
        out = fluid.layers.dropout(xv, **kw)
        fetch = [out]
        op = main.global_block().ops[-1]
        fetch.append(main.global_block().var(op.output("Mask")[0]))
        if fetch_grad:
            loss = fluid.layers.reduce_sum(out)
            fetch += fluid.gradients([loss], [xv])
    exe = fluid.Executor(fluid.CPUPlace())
    if kw.get("is_test"):
        fetch = [f for f in fetch if f.name != op.output("Mask")[0]]
    results = [exe.run(main, feed={"x": x}, fetch_list=fetch) for _ in range(runs)]
    return results if runs > 1 else results[0]


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_train_mask_statistics(p, impl):
    x = rng.uniform(0.5, 1.5, (100, 1000)).astype("float32")
    out, mask, gx = run_dropout(x, fetch_grad=True, dropout_prob=p, dropout_implementation=impl)
    assert mask.dtype == np.float32 and mask.shape == x.shape
    assert set(np.unique(mask)) <= {0.0, 1.0}
    dropped = 1 - mask.mean()
    # 100k Bernoulli draws: standard deviation of the fraction <= 0.0016
    assert abs(dropped - p) < 0.008, (dropped, p)
    scale = 1 / (1 - p) if impl == "upscale_in_train" and p < 1 else 1.0
    np.testing.assert_allclose(out, x * mask * scale, rtol=1e-6)
    np.testing.assert_allclose(gx, mask * scale, rtol=1e-6)
    record_checked("output", "dropout")  # Out against numpy given the Mask, and the Mask's statistics


@pytest.mark.parametrize("impl,factor", [("downgrade_in_infer", 0.65), ("upscale_in_train", 1.0)])
def test_dropout_test_mode(impl, factor):
    x = rng.uniform(-1, 1, (4, 7)).astype("float64")
    out, gx = run_dropout(x, fetch_grad=True, dropout_prob=0.35, is_test=True, dropout_implementation=impl)
    np.testing.assert_allclose(out, x * factor, rtol=1e-7)  # dropout_prob is a float attribute
    np.testing.assert_allclose(gx, np.full_like(x, factor), rtol=1e-7)


def test_dropout_clone_for_test_switches_mode():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[50])
        out = fluid.layers.dropout(x, 0.4)
    test_prog = main.clone(for_test=True)
    xv = np.ones((20, 50), dtype="float32")
    exe = fluid.Executor(fluid.CPUPlace())
    train_out, = exe.run(main, feed={"x": xv}, fetch_list=[out])
    test_out, = exe.run(test_prog, feed={"x": xv}, fetch_list=[out.name])
    assert (train_out == 0).any() and set(np.unique(train_out)) <= {0.0, 1.0}
    np.testing.assert_allclose(test_out, np.full_like(xv, 0.6), rtol=1e-6)


def test_dropout_seeding():
    x = np.ones((64, 64), dtype="float32")
    # fix_seed: the same mask on every run and for every program built with that seed (also seed 0 via attrs)
    (a, ma), (b, mb) = run_dropout(x, runs=2, dropout_prob=0.5, seed=123)
    np.testing.assert_array_equal(ma, mb)
    (_, mc), = [run_dropout(x, dropout_prob=0.5, seed=123)]
    np.testing.assert_array_equal(ma, mc)
    _, md = run_dropout(x, dropout_prob=0.5, seed=124)
    assert (ma != md).any()
    # no seed: a process-wide engine, so runs differ
    (_, m1), (_, m2) = run_dropout(x, runs=2, dropout_prob=0.5)
    assert (m1 != m2).any()


def test_dropout_fix_seed_zero_is_reproducible():
    x = np.ones((32, 32), dtype="float32")
    attrs = {"dropout_prob": 0.5, "fix_seed": True, "seed": 0}
    main = OpTest("dropout", {"X": x}, {"Out": None, "Mask": None}, attrs).check_output()
    exe = fluid.Executor(fluid.CPUPlace())
    mask_var = main.global_block().ops[-1].output("Mask")[0]
    m1, = exe.run(main, feed={"in_X_x_var": x}, fetch_list=[mask_var])
    m2, = exe.run(main, feed={"in_X_x_var": x}, fetch_list=[mask_var])
    np.testing.assert_array_equal(m1, m2)
    assert 0.4 < m1.mean() < 0.6


def test_dropout_program_random_seed():
    x = np.ones((32, 32), dtype="float32")
    masks = []
    for _ in range(2):
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = 9
        with fluid.program_guard(main, startup):
            xv = fluid.layers.data("x", shape=[32, 32], append_batch_size=False)
            fluid.layers.dropout(xv, 0.5)
        op = main.global_block().ops[-1]
        assert op.attr("fix_seed") and op.attr("seed") == 9
        masks.append(fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[op.output("Mask")[0]])[0])
    np.testing.assert_array_equal(masks[0], masks[1])


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_grad_uses_mask(impl, dtype):
    x = rng.uniform(-1, 1, (3, 5, 4)).astype(dtype)
    out, mask, gx = run_dropout(x, fetch_grad=True, dropout_prob=0.3, seed=1, dropout_implementation=impl)
    assert mask.dtype == np.dtype(dtype)
    scale = 1 / 0.7 if impl == "upscale_in_train" else 1.0
    np.testing.assert_allclose(out, x * mask * scale, rtol=1e-6)
    np.testing.assert_allclose(gx, mask * scale, rtol=1e-6)


def test_dropout_numeric_grad_with_fixed_seed():
    x = rng.uniform(-1, 1, (4, 6))
    t = OpTest("dropout", {"X": x}, {"Out": None, "Mask": None},
               {"dropout_prob": 0.4, "fix_seed": True, "seed": 7, "dropout_implementation": "upscale_in_train"})
    t.check_grad(["X"], "Out")


def test_dropout_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[4])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op dropout: attribute 'dropout_prob' = 1.5 is invalid: "
                                                           r"must be in \[0, 1\]"):
            fluid.layers.dropout(x, 1.5)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op dropout: attribute 'dropout_implementation' = 'scale' "
                                                           r"is invalid: must be one of 'downgrade_in_infer', "
                                                           r"'upscale_in_train'"):
            fluid.layers.dropout(x, 0.5, dropout_implementation="scale")
