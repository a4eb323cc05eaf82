"""transpose2: forward against numpy, gradients, permutation errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


TRANSPOSE_CASES = [
    ((3, 5), [1, 0]),
    ((70, 33), [1, 0]),            # several 32x32 tiles with ragged edges
    ((130, 67), [1, 0]),           # 8x8 register blocks across 64x64 tiles, ragged rows and columns
    ((16, 8), [1, 0]),             # whole 8x8 blocks only
    ((3, 16, 9, 7), [0, 2, 3, 1]),  # NCHW -> NHWC with 16 channels (conv2d's transposes)
    ((2, 3, 4), [0, 2, 1]),
    ((2, 3, 4), [2, 0, 1]),
    ((2, 3, 4), [1, 0, 2]),        # last axis stays: contiguous rows move
    ((2, 3, 4), [0, 1, 2]),        # identity
    ((2, 3, 4, 5), [0, 2, 3, 1]),  # NCHW -> NHWC
    ((2, 3, 4, 5), [0, 3, 1, 2]),  # NHWC -> NCHW
    ((2, 3, 4, 5), [3, 2, 1, 0]),
    ((2, 1, 4, 1), [3, 2, 0, 1]),  # size-1 dims
    ((1, 1), [1, 0]),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_transpose_forward(shape, perm, dtype):
    x = (rand(*shape) * 100).astype(dtype)
    OpTest("transpose2", {"X": x}, {"Out": x.transpose(perm), "XShape": None}, {"axis": perm}).check_output()


@pytest.mark.parametrize("shape,perm", [c for c in TRANSPOSE_CASES if np.prod(c[0]) <= 200])
def test_transpose_grad(shape, perm):
    x = rand(*shape)
    OpTest("transpose2", {"X": x}, {"Out": x.transpose(perm), "XShape": None}, {"axis": perm}).check_grad(["X"], "Out")


def test_transpose_large_2d_and_batched():
    x = rand(257, 129, dtype="float32")
    OpTest("transpose2", {"X": x}, {"Out": x.T, "XShape": None}, {"axis": [1, 0]}).check_output()
    y = rand(3, 65, 40, 7, dtype="float32")
    OpTest("transpose2", {"X": y}, {"Out": y.transpose(0, 2, 1, 3), "XShape": None},
           {"axis": [0, 2, 1, 3]}).check_output()
    OpTest("transpose2", {"X": y}, {"Out": y.transpose(3, 1, 0, 2), "XShape": None},
           {"axis": [3, 1, 0, 2]}).check_output()


def test_transpose_layer_shape():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")
        assert fluid.layers.transpose(x, [2, 0, 1]).shape == (4, -1, 3)


def test_transpose_bad_permutation():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3, 4], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op transpose2: attribute 'axis' = \[0, 0, 1\] is invalid: "
                                                           r"must be a permutation of \[0, 3\): element 1 is 0"):
            fluid.layers.transpose(x, [0, 0, 1])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"transpose2: X 'x' \[2, 3, 4\]: axis \[1, 0\] has 2 "
                                                           r"entries, expected one per dim \(3\)"):
            fluid.layers.transpose(x, [1, 0])
        with pytest.raises(fluid.core.EnforceNotMet, match=r"must be a permutation of \[0, 3\): element 2 is 3"):
            fluid.layers.transpose(x, [0, 1, 3])
