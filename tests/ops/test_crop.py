"""crop: the box of X (shape attribute or Y's shape; offsets attribute or Offsets input), gradient, layer, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def test_forward_and_grad_attrs():
    x = np.random.RandomState(0).uniform(-1, 1, (3, 5, 6))
    t = OpTest("crop", {"X": x}, {"Out": x[1:3, 0:4, 2:5]}, {"shape": [2, 4, 3], "offsets": [1, 0, 2]})
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_y_and_offsets_inputs():
    x = np.random.RandomState(1).uniform(-1, 1, (4, 6)).astype("float32")
    y = np.zeros((2, 3), "float32")
    t = OpTest("crop", {"X": x, "Y": y, "Offsets": np.array([2, 1], "int32")}, {"Out": x[2:4, 1:4]}, {})
    t.check_output()
    t.check_grad(["X"], "Out", no_grad_set={"in_Y_y_var", "in_Offsets_offsets_var"}, max_relative_error=1e-3)
    OpTest("crop", {"X": x.astype("int64")}, {"Out": x.astype("int64")[:3, :2]}, {"shape": [3, 2]}).check_output()


def test_layer_and_errors():
    xv = np.random.RandomState(2).uniform(-1, 1, (3, 4, 5)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4, 5], dtype="float32")
        off = fluid.layers.data("off", shape=[3], dtype="int32", append_batch_size=False)
        a = fluid.layers.crop(x, shape=[-1, 2, 3], offsets=[0, 1, 2])
        b = fluid.layers.crop(x, shape=[2, 2, 2], offsets=off)
        assert tuple(a.shape) == (-1, 2, 3) and tuple(b.shape) == (2, 2, 2)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"crop: offset 3 \+ size 3 at dim 2 is outside X 'x'"):
            fluid.layers.crop(x, shape=[-1, 2, 3], offsets=[0, 0, 3])
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"crop: shape has 2 values but X 'x' \[-1, 4, 5\] has rank 3"):
            fluid.layers.crop(x, shape=[2, 2])
        with pytest.raises(TypeError, match="crop: shape must be a list, tuple or Variable"):
            fluid.layers.crop(x, shape=3)
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed={"x": xv, "off": np.array([1, 2, 0], "int32")}, fetch_list=[a, b])
    np.testing.assert_array_equal(got[0], xv[:, 1:3, 2:5])
    np.testing.assert_array_equal(got[1], xv[1:3, 2:4, 0:2])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"crop: offset 2 \+ size 2 at dim 0 is outside X 'x'"):
        exe.run(main, feed={"x": xv, "off": np.array([2, 2, 0], "int32")}, fetch_list=[b])
