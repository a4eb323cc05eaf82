"""fill_zeros_like: every dtype, buffer reuse, uninitialized input."""
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


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(3, 4), (1,), (2, 0, 3)])
def test_fill_zeros_like(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) + 1).astype(dtype)
    OpTest("fill_zeros_like", {"X": x}, {"Out": np.zeros(shape, dtype)}).check_output()


def test_fill_zeros_like_layer_and_reuse():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2], dtype="float64")
        z = fluid.layers.zeros_like(x)
    assert z.dtype == x.dtype and z.shape == (-1, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    for n in (3, 1, 5):  # the output buffer is reused; it must still be all zero each time
        (got,) = exe.run(main, feed={"x": np.full((n, 2), 9.0)}, fetch_list=[z])
        np.testing.assert_array_equal(got, np.zeros((n, 2)))


def test_fill_zeros_like_uninitialized_input():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="never_set", shape=[2], dtype="float32")
    out = block.create_var(name="out", dtype="float32")
    block.append_op(type="fill_zeros_like", inputs={"X": x}, outputs={"Out": out})
    with pytest.raises(core.EnforceNotMet, match="fill_zeros_like.*never_set.*not initialized"):
        run(main, fetch_list=[out])
