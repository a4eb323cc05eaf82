"""logical_and / logical_or / logical_xor / logical_not (kernels/logical.cc): bool in, bool out, checked against
numpy over shapes (with trailing-dims broadcasting of Y); the layers (Fluid's out= argument) and the dtype errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(5)
BINARY = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}


@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 4), (3, 4)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (1,)),
                                    ((1,), (1,))], ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_forward(op, shapes):
    x, y = (rng.uniform(0, 1, s) < 0.5 for s in shapes)
    OpTest(op, {"X": x, "Y": y}, {"Out": BINARY[op](x, y)}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)], ids=str)
def test_not_forward(shape):
    x = rng.uniform(0, 1, shape) < 0.5
    OpTest("logical_not", {"X": x}, {"Out": np.logical_not(x)}).check_output(atol=0, rtol=0)


def test_layers_and_out_argument():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[4], dtype="bool", append_batch_size=False)
        b = fluid.layers.data("b", shape=[4], dtype="bool", append_batch_size=False)
        out = fluid.layers.create_tensor("bool")
        r_and = fluid.layers.logical_and(a, b, out=out)
        r_or, r_xor, r_not = fluid.layers.logical_or(a, b), fluid.layers.logical_xor(a, b), fluid.layers.logical_not(a)
    assert r_and is out
    assert all(v.dtype == fluid.core.VarDesc.VarType.BOOL and v.stop_gradient for v in (r_or, r_xor, r_not))
    av, bv = np.array([True, True, False, False]), np.array([True, False, True, False])
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": av, "b": bv}, fetch_list=[r_and, r_or, r_xor, r_not])
    for g, w in zip(got, [av & bv, av | bv, av ^ bv, ~av]):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", sorted(BINARY) + ["logical_not"])
def test_non_bool_input_fails_at_build_time(op):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xf", shape=[3], dtype="float32")
        b = fluid.layers.data("yb", shape=[3], dtype="bool")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"%s: X 'xf' \[-1, 3\] must be bool, got float32" % op):
            getattr(fluid.layers, op)(*([x, b] if op != "logical_not" else [x]))
        if op != "logical_not":
            with pytest.raises(fluid.core.EnforceNotMet, match=r"%s: Y 'xf' \[-1, 3\] must be bool" % op):
                getattr(fluid.layers, op)(b, x)


def test_shapes_that_do_not_broadcast_fail():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xs", shape=[3], dtype="bool", append_batch_size=False)
        y = fluid.layers.data("ys", shape=[4], dtype="bool", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"logical_or.*xs.*ys"):
            fluid.layers.logical_or(x, y)


def test_no_gradient():
    assert all(fluid.core.op_proto(t)["grad"] == "no_gradient" for t in list(BINARY) + ["logical_not"])
