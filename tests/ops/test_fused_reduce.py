"""fused_reduce (made by the fuse_reductions pass; tests/test_fuse_reductions.py tests the pass): every output
against numpy over the layouts its kernel treats differently (rows of a last-axis reduction, column tiles of a
first- or middle-axis one, several reduced runs, reduce_all, keep_dim, empty), bit for bit against the unfused
reduce ops, and its error paths."""
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

NUMPY = {
    "sum": lambda x, axes, keep: np.sum(x, axis=axes, keepdims=keep),
    "mean": lambda x, axes, keep: np.mean(x, axis=axes, keepdims=keep),
    "max": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep),
    "sum_square": lambda x, axes, keep: np.sum(x * x, axis=axes, keepdims=keep),
    "mean_square": lambda x, axes, keep: np.mean(x * x, axis=axes, keepdims=keep),
    "sum_square_dev": lambda x, axes, keep: np.sum((x - x.mean(axis=axes, keepdims=True)) ** 2, axis=axes,
                                                   keepdims=keep),
    "mean_square_dev": lambda x, axes, keep: np.var(x, axis=axes, keepdims=keep),
    "sum_exp_dev": lambda x, axes, keep: np.sum(np.exp(x - x.max(axis=axes, keepdims=True)), axis=axes,
                                                keepdims=keep),
}
UNFUSED = {"sum": "reduce_sum", "mean": "reduce_mean", "max": "reduce_max"}


def _expected(x, reduction, dim, keep_dim, reduce_all):
    axes = tuple(range(x.ndim)) if reduce_all else tuple(sorted(d % x.ndim for d in dim))
    with warnings.catch_warnings():  # the mean of an empty axis is NaN, as fluidlite's
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.asarray(NUMPY[reduction](x, axes, keep_dim), dtype=x.dtype)
    return out.reshape(out.shape if out.ndim else (1,))


CASES = [
    ((6, 37), [1], False, False),           # rows (inner == 1), a tail after the 8 lanes
    ((6, 5), [-1], True, False),            # rows shorter than 8
    ((37, 9), [0], False, False),           # columns, one tile
    ((5, 2100), [0], True, False),          # columns over three tiles (1024 each)
    ((3, 7, 1500), [1], False, False),      # middle axis: outer x tiles
    ((2, 3, 4), [0, 2], False, False),      # two reduced runs: one Reduce per output
    ((2, 3, 4), [0], True, True),           # reduce_all
    ((4, 1, 3), [1], False, False),         # only a size-1 axis reduced
    ((3, 0), [1], False, False),            # empty reduced axis
]
ALL = ["sum", "mean", "max", "sum_square", "mean_square", "sum_square_dev", "mean_square_dev", "sum_exp_dev"]


@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_reduce_forward(shape, dim, keep_dim, reduce_all, dtype):
    x = np.random.RandomState(3).uniform(-2, 2, shape).astype(dtype)
    reductions = ALL if x.size else ["sum", "mean", "sum_square", "mean_square_dev"]  # numpy's max of nothing raises
    want = [("o%d" % i, _expected(x, r, dim, keep_dim, reduce_all)) for i, r in enumerate(reductions)]
    attrs = {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all, "reductions": reductions,
             "fused_ops": ["reduce_sum"] * len(reductions)}
    OpTest("fused_reduce", {"X": x}, {"Out": want}, attrs).check_output(
        atol=1e-5, rtol=1e-5 if dtype == "float32" else 1e-12, equal_nan=True)


def _run_ops(x, ops):
    """Runs [(type, input name, dim, keep_dim, reduce_all, reductions or None)] over feed x; returns the fetches."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        xv = block.create_var(name="x", shape=x.shape, dtype=x.dtype)
        sq = block.create_var(name="sq", dtype=x.dtype)
        block.append_op(type="elementwise_mul", inputs={"X": [xv], "Y": [xv]}, outputs={"Out": [sq]})
        fetch = []
        for k, (op_type, src, dim, keep, rall, reductions) in enumerate(ops):
            attrs = {"dim": dim, "keep_dim": keep, "reduce_all": rall}
            n = len(reductions) if reductions else 1
            outs = [block.create_var(name="o%d_%d" % (k, i), dtype=x.dtype) for i in range(n)]
            if reductions:
                attrs.update(reductions=reductions, fused_ops=["reduce_sum"])
            block.append_op(type=op_type, inputs={"X": [block.var(src)]}, outputs={"Out": outs}, attrs=attrs)
            fetch += outs
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed={"x": x}, fetch_list=fetch)


@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", CASES[:-1])
def test_fused_reduce_equals_the_reduce_ops_bit_for_bit(shape, dim, keep_dim, reduce_all):
    # The same accumulation order as reduce_sum / reduce_mean / reduce_max (of x, and of x * x computed by
    # elementwise_mul), so the values are identical, not merely close; with 2 threads the rows split.
    x = np.random.RandomState(4).standard_normal(shape).astype("float32") * 100
    cfg = (dim, keep_dim, reduce_all)
    unfused = _run_ops(x, [(UNFUSED[r], "x") + cfg + (None,) for r in ("sum", "mean", "max")] +
                       [("reduce_sum", "sq") + cfg + (None,), ("reduce_mean", "sq") + cfg + (None,)])
    fused = _run_ops(x, [("fused_reduce", "x") + cfg + (ALL[:5],)])
    for f, u in zip(fused, unfused):
        assert f.shape == u.shape
        assert np.array_equal(f, u)


@pytest.mark.parametrize("shape,dim,reduce_all", [((6, 37), [1], False), ((5, 2100), [0], False),
                                                 ((3, 7, 1500), [1], False), ((2, 3, 4), [0, 2], False),
                                                 ((2, 3, 4), [0], True), ((300, 4096), [-1], False)])
def test_variance_equals_the_unfused_chain_bit_for_bit(shape, dim, reduce_all):
    # reduce_mean(square(x - reduce_mean(x, keep_dim=True))) and reduce_sum of the same, as ops, vs fused_reduce.
    x = (np.random.RandomState(6).standard_normal(shape) * 10 + 3).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", list(shape), "float32")
        kw = dict(dim=None if reduce_all else dim, keep_dim=True)
        m = fluid.layers.reduce_mean(xv, **kw)
        sq = fluid.layers.square(fluid.layers.elementwise_sub(xv, m))
        unfused = [m, fluid.layers.reduce_mean(sq, **kw), fluid.layers.reduce_sum(sq, **kw)]
        block = main.global_block()
        outs = [block.create_var(name="f%d" % i, dtype="float32") for i in range(3)]
        block.append_op(type="fused_reduce", inputs={"X": [xv]}, outputs={"Out": outs},
                        attrs={"dim": dim, "keep_dim": True, "reduce_all": reduce_all,
                               "reductions": ["mean", "mean_square_dev", "sum_square_dev"]})
    bs = fluid.BuildStrategy()
    bs.fuse_reductions = False
    got = fluid.Executor(fluid.CPUPlace()).run(fluid.CompiledProgram(main, build_strategy=bs), feed={"x": x},
                                               fetch_list=unfused + outs)
    for u, f in zip(got[:3], got[3:]):
        assert u.shape == f.shape and np.array_equal(u, f)
    axes = tuple(range(x.ndim)) if reduce_all else tuple(d % x.ndim for d in dim)
    np.testing.assert_allclose(got[4], x.astype("float64").var(axis=axes, keepdims=True), rtol=1e-4)


@pytest.mark.parametrize("shape,dim,reduce_all", [((6, 37), [1], False), ((5, 2100), [0], False),
                                                 ((3, 7, 1500), [1], False), ((2, 3, 4), [0, 2], False),
                                                 ((2, 3, 4), [0], True), ((300, 4096), [-1], False)])
@pytest.mark.parametrize("with_exp", [True, False])
def test_softmax_sums_equal_the_unfused_chain_bit_for_bit(shape, dim, reduce_all, with_exp):
    # reduce_max(x, keep_dim=True), exp(x - max), reduce_sum of that, as ops, vs fused_reduce (with its Exp output
    # or without).
    x = (np.random.RandomState(7).standard_normal(shape) * 4).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", list(shape), "float32")
        kw = dict(dim=None if reduce_all else dim, keep_dim=True)
        m = fluid.layers.reduce_max(xv, **kw)
        e = fluid.layers.exp(fluid.layers.elementwise_sub(xv, m))
        unfused = [m, fluid.layers.reduce_sum(e, **kw), e]
        block = main.global_block()
        outs = [block.create_var(name="f%d" % i, dtype="float32") for i in range(3)]
        block.append_op(type="fused_reduce", inputs={"X": [xv]},
                        outputs={"Out": outs[:2], "Exp": outs[2:] if with_exp else []},
                        attrs={"dim": dim, "keep_dim": True, "reduce_all": reduce_all,
                               "reductions": ["max", "sum_exp_dev"]})
    bs = fluid.BuildStrategy()
    bs.fuse_reductions = False
    fetch = unfused + (outs if with_exp else outs[:2])
    got = fluid.Executor(fluid.CPUPlace()).run(fluid.CompiledProgram(main, build_strategy=bs), feed={"x": x},
                                               fetch_list=fetch)
    for u, f in zip(got[:3], got[3:]):
        assert u.shape == f.shape and np.array_equal(u, f)
    np.testing.assert_allclose(got[4], NUMPY["sum_exp_dev"](x.astype("float64"), tuple(
        range(x.ndim)) if reduce_all else tuple(d % x.ndim for d in dim), True), rtol=1e-5)


def test_fused_reduce_large_rows_in_parallel_equal_the_reduce_ops():
    x = np.random.RandomState(5).standard_normal((300, 4096)).astype("float32")
    cfg = ([1], False, False)
    unfused = _run_ops(x, [("reduce_sum", "x") + cfg + (None,), ("reduce_sum", "sq") + cfg + (None,)])
    fused = _run_ops(x, [("fused_reduce", "x") + cfg + (["sum", "sum_square"],)])
    assert all(np.array_equal(f, u) for f, u in zip(fused, unfused))
    np.testing.assert_allclose(fused[1], (x.astype("float64") ** 2).sum(1), rtol=1e-5)


def _build(x_dtype="float32", reductions=("sum", "max"), n_out=None, dim=(1,), exp_out=False):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        x = block.create_var(name="x", shape=[2, 3], dtype=x_dtype)
        n = len(reductions) if n_out is None else n_out
        outs = [block.create_var(name="o%d" % i, dtype=x_dtype) for i in range(n)]
        exp = [block.create_var(name="e", dtype=x_dtype)] if exp_out else []
        block.append_op(type="fused_reduce", inputs={"X": [x]}, outputs={"Out": outs, "Exp": exp},
                        attrs={"dim": list(dim), "reductions": list(reductions)})


def test_fused_reduce_errors():
    with pytest.raises(Exception, match=r"fused_reduce: attribute 'reductions'.*one of sum, mean, max, sum_square, "
                                        r"mean_square, sum_square_dev, mean_square_dev, sum_exp_dev \(got 'min'\)"):
        _build(reductions=("sum", "min"))
    with pytest.raises(Exception, match=r"fused_reduce: 2 reductions but 3 Out variables were given"):
        _build(n_out=3)
    with pytest.raises(Exception, match=r"fused_reduce: .*'x'.* must be float32 or float64, got int32"):
        _build(x_dtype="int32")
    with pytest.raises(Exception, match=r"fused_reduce: an Exp output needs a sum_exp_dev reduction"):
        _build(exp_out=True)
    with pytest.raises(Exception, match=r"fused_reduce: dim=2 is out of range for .*'x'.*rank 2"):
        _build(dim=(2,))
