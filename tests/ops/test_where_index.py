"""where_index (layers.where): forward against numpy's argwhere, and masked-select by gather_nd(x, where(mask))."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, run

rng = np.random.RandomState(13)


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4), (2, 2, 1, 3)])
@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float32", "float64"])
def test_where_index_forward(shape, dtype):
    cond = (rng.uniform(size=shape) > 0.5).astype(dtype)
    OpTest("where_index", {"Condition": cond}, {"Out": np.argwhere(cond).astype("int64")}).check_output()


def test_where_index_none_and_all_true():
    OpTest("where_index", {"Condition": np.zeros((2, 3), bool)}, {"Out": np.zeros((0, 2), "int64")}).check_output()
    OpTest("where_index", {"Condition": np.ones((2, 2), bool)},
           {"Out": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], "int64")}).check_output()


def test_masked_select_by_where_and_gather_nd_with_grad():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        mask = fluid.layers.greater_than(x, fluid.layers.fill_constant([3, 4], "float64", 0.0))
        coords = fluid.layers.where(mask)
        assert coords.shape == (-1, 2) and coords.dtype == fluid.core.VarDesc.VarType.INT64
        picked = fluid.layers.gather_nd(x, coords)
        loss = fluid.layers.reduce_sum(picked * picked)
        gx, = fluid.gradients([loss], [x])
    xv = rng.uniform(-1, 1, (3, 4))
    c, p, g = run(main, {"x": xv}, [coords, picked, gx])
    np.testing.assert_array_equal(c, np.argwhere(xv > 0))
    np.testing.assert_allclose(p, xv[xv > 0])
    np.testing.assert_allclose(g, np.where(xv > 0, 2 * xv, 0))


def test_where_layer_errors():
    with pytest.raises(TypeError, match="where: 'condition' must be a Variable, got ndarray"):
        fluid.layers.where(np.ones(3, bool))
    main = fluid.Program()
    block = main.global_block()
    c = block.create_var(name="c", shape=[], dtype="bool")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"where_index: Condition 'c' \[\] must have rank >= 1"):
        block.append_op(type="where_index", inputs={"Condition": [c]},
                        outputs={"Out": [block.create_var(name="o", dtype="int64")]})
