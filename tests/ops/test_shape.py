"""shape and size: forward against numpy (run-time dims, not the build-time -1), the layers, no gradient."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, run


@pytest.mark.parametrize("shape", [(5,), (2, 3), (4, 1, 3), (2, 0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_shape_and_size_forward(shape, dtype):
    x = np.zeros(shape, dtype)
    OpTest("shape", {"Input": x}, {"Out": np.array(shape, "int32")}).check_output()
    OpTest("size", {"Input": x}, {"Out": np.array([x.size], "int64")}).check_output()


def test_shape_size_layers_read_run_time_dims():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32")  # [-1, 3, 4]
        s = fluid.layers.shape(x)
        n = fluid.layers.size(x)
        assert s.shape == (3,) and s.dtype == fluid.core.VarDesc.VarType.INT32 and s.stop_gradient
        assert n.shape == (1,) and n.dtype == fluid.core.VarDesc.VarType.INT64
        # the usual use: a reshape whose batch dim comes from the feed
        flat = fluid.layers.reshape(x, [-1, 12])
        batch = fluid.layers.slice(fluid.layers.shape(flat), axes=[0], starts=[0], ends=[1])
    a, b, c = run(main, {"x": np.zeros((5, 3, 4), "float32")}, [s, n, batch])
    np.testing.assert_array_equal(a, [5, 3, 4])
    np.testing.assert_array_equal(b, [60])
    np.testing.assert_array_equal(c, [5])


def test_shape_layer_errors():
    with pytest.raises(TypeError, match="shape: 'input' must be a Variable, got ndarray"):
        fluid.layers.shape(np.zeros(3))
    with pytest.raises(TypeError, match="size: 'input' must be a Variable, got list"):
        fluid.layers.size([1])


def test_no_gradient_flows_through_shape():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        s = fluid.layers.cast(fluid.layers.shape(x), "float64")
        loss = fluid.layers.reduce_sum(x) + fluid.layers.reduce_sum(s)
        gx, = fluid.gradients([loss], [x])
    g, = run(main, {"x": np.ones((2, 3))}, [gx])
    np.testing.assert_array_equal(g, np.ones((2, 3)))
