"""increment: steps of every dtype, in place and not, the one-element check."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest


def run(main, startup=None, feed=None, fetch_list=()):
    exe = fluid.Executor(fluid.CPUPlace())
    if startup is not None:
        exe.run(startup)
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch_list))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_increment(dtype):
    x = np.array([5], dtype)
    OpTest("increment", {"X": x}, {"Out": (x + 2).astype(dtype)}, {"step": 2.0}).check_output()
    OpTest("increment", {"X": x}, {"Out": (x + 1).astype(dtype)}).check_output()  # default step 1


def test_increment_fractional_and_negative_step():
    x = np.array([[1.5]], "float64")
    OpTest("increment", {"X": x}, {"Out": x - 0.25}, {"step": -0.25}).check_output()


def test_increment_in_place_counter_accumulates():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.create_global_var([1], 0, "int64", persistable=True, name="counter")
        out = fluid.layers.increment(i, 3)  # in place: Out is i
    assert out is i
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for k in range(1, 4):
        (got,) = exe.run(main, fetch_list=[i])
        assert got.tolist() == [3 * k]


def test_increment_not_in_place():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.fill_constant([1], "float32", 10.0)
        y = fluid.layers.increment(x, 0.5, in_place=False)
    got_x, got_y = run(main, fetch_list=[x, y])
    assert got_x.tolist() == [10.0] and got_y.tolist() == [10.5]


def test_increment_needs_one_element():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.fill_constant([2, 3], "float32", 1.0)
        with pytest.raises(core.EnforceNotMet, match=r"increment: X '.*' \[2, 3\] must have exactly one element"):
            fluid.layers.increment(x)


def test_increment_one_element_checked_at_run_time():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[1], dtype="float32")  # [-1, 1]: unknown until fed
        y = fluid.layers.increment(x, in_place=False)
    np.testing.assert_array_equal(run(main, feed={"x": np.ones((1, 1), "float32")}, fetch_list=[y])[0], [[2.0]])
    with pytest.raises(core.EnforceNotMet, match=r"increment: X 'x' \[3, 1\] must have exactly one element"):
        run(main, feed={"x": np.ones((3, 1), "float32")}, fetch_list=[y])
