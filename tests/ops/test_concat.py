"""concat: forward against numpy, gradients, shape errors at build time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def declare(block, name, shape, dtype="float32"):
    return block.create_var(name=name, shape=shape, dtype=dtype)


CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 5)], 1),
    ([(2, 3), (2, 4)], -1),
    ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], -2),
    ([(1, 2, 3, 2), (3, 2, 3, 2)], 0),
    ([(3, 2)], 0),
]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_concat_forward(shapes, axis, dtype):
    xs = [("x%d" % i, (rand(*s) * 10).astype(dtype)) for i, s in enumerate(shapes)]
    OpTest("concat", {"X": xs}, {"Out": np.concatenate([a for _, a in xs], axis)}, {"axis": axis}).check_output()


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
def test_concat_grad(shapes, axis):
    xs = [("x%d" % i, rand(*s)) for i, s in enumerate(shapes)]
    t = OpTest("concat", {"X": xs}, {"Out": np.concatenate([a for _, a in xs], axis)}, {"axis": axis})
    t.check_grad(["X"], "Out")


def test_concat_grad_of_some_inputs_only():
    # Only x1 needs a gradient: concat_grad gets X@GRAD = [@EMPTY@, x1@GRAD].
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[2, 3], dtype="float64", append_batch_size=False)
        b = fluid.layers.data("b", shape=[2, 4], dtype="float64", append_batch_size=False)
        b.stop_gradient = False
        out = fluid.layers.concat([a, b], axis=1)
        loss = fluid.layers.mean(out)
        gb, = fluid.gradients([loss], [b])
    grad_op = [op for op in main.global_block().ops if op.type == "concat_grad"][0]
    assert grad_op.output("X@GRAD")[0] == "@EMPTY@"
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": rand(2, 3), "b": rand(2, 4)}, fetch_list=[gb])
    np.testing.assert_allclose(got, np.full((2, 4), 1.0 / 14))


def test_concat_layer_unknown_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data("a", shape=[3], dtype="float32")
        b = fluid.layers.data("b", shape=[5], dtype="float32")
        assert fluid.layers.concat([a, b], axis=1).shape == (-1, 8)
        assert fluid.layers.concat([a, a], axis=0).shape == (-1, 3)


def test_concat_errors():
    block = fluid.Program().global_block()
    a, b, c = declare(block, "a", [2, 3]), declare(block, "b", [3, 3]), declare(block, "c", [2, 3, 1])
    out = declare(block, "out", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: X 'a' \[2, 3\] and X 'b' \[3, 3\] differ in dim 0"):
        block.append_op(type="concat", inputs={"X": [a, b]}, outputs={"Out": [out]}, attrs={"axis": 1})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: X 'a' \[2, 3\] and X 'c' \[2, 3, 1\] have different "
                                                       r"ranks"):
        block.append_op(type="concat", inputs={"X": [a, c]}, outputs={"Out": [out]}, attrs={"axis": 0})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"concat: axis 2 is out of range \[-2, 2\) for X 'a' \[2, 3\]"):
        block.append_op(type="concat", inputs={"X": [a, a]}, outputs={"Out": [out]}, attrs={"axis": 2})
