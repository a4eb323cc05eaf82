"""feed and fetch, the ops the executor puts first and last in a prepared program: a program with no ops of
its own moves fed arrays through feed and fetch only, so the fetched values are compared with the fed numpy
arrays directly (every dtype, columns in order, a fresh buffer per fetch)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import record_checked

DTYPES = ["float32", "float64", "int32", "int64", "bool", "uint8", "int8", "int16"]


def _empty_program(**vars_):
    """A program that only declares variables: running it runs feed and fetch ops and nothing else."""
    main = fluid.Program()
    for name, (shape, dtype) in vars_.items():
        main.global_block().create_var(name=name, shape=list(shape), dtype=dtype)
    assert not main.global_block().ops
    return main


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (1,), (3, 0, 2), (2, 1, 2, 2)])
def test_feed_then_fetch_round_trip(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) * 7 % 5).astype(dtype)
    main = _empty_program(x=(shape, dtype))
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=["x"])
    names = [e["name"] for e in fluid.profiler.events()]
    assert names.count("feed") == 1 and names.count("fetch") == 1  # the values went through both ops
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, x)
    assert not np.shares_memory(got, x)
    record_checked("output", "feed", "fetch")


def test_columns_keep_their_order():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.array([[1], [-2]], "int64")
    main = _empty_program(a=(a.shape, "float32"), b=(b.shape, "int64"))
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed={"a": a, "b": b}, fetch_list=["b", "a", "b"])
    for g, want in zip(got, [b, a, b]):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)
    assert not np.shares_memory(got[0], got[2])  # each fetch is its own copy


def test_fetched_array_is_not_overwritten_by_the_next_run():
    main = _empty_program(x=((3,), "float64"))
    exe = fluid.Executor(fluid.CPUPlace())
    (first,) = exe.run(main, feed={"x": np.ones(3)}, fetch_list=["x"])
    (second,) = exe.run(main, feed={"x": np.full(3, 2.0)}, fetch_list=["x"])
    np.testing.assert_array_equal(first, np.ones(3))
    np.testing.assert_array_equal(second, np.full(3, 2.0))
