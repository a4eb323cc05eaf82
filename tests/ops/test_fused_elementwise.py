"""fused_elementwise (made by the elementwise fusion passes; tests/test_fuse_elementwise.py tests the passes): each
instruction kind against numpy, broadcast inputs and column views, and the checks of a hand-written program."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

FULL = -2
UNARY = {"relu": 0, "sigmoid": 1, "tanh": 2, "leaky_relu": 12}  # indices in FL_FUSED_UNARY_OPS
ADD, SUB, MUL, DIV, MAX, MIN = range(6)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def program(*instrs):
    """code and params from (kind, fn, dst, a, b, c[, params]) tuples."""
    code, params = [], []
    for ins in instrs:
        code += list(ins[:6])
        params += list(ins[6]) if len(ins) > 6 else [0.0, 0.0, 0.0]
    return {"code": code, "params": params}


def test_unary_binary_and_scale_instructions_against_numpy():
    rng = np.random.RandomState(0)
    x, y = rng.uniform(-2, 2, (5, 7)), rng.uniform(0.5, 2, (5, 7))
    attrs = program((0, UNARY["sigmoid"], 2, 0, -1, -1),          # s2 = sigmoid(x)
                    (2, MUL, 3, 2, 1, -1),                        # s3 = s2 * y
                    (0, UNARY["leaky_relu"], 4, 0, -1, -1, (0.1, 0, 0)),  # s4 = leaky_relu(x, alpha=0.1)
                    (2, DIV, 5, 4, 1, -1),                        # s5 = s4 / y
                    (5, 0, 6, 5, -1, -1, (3.0, 0.5, 0.0)),        # s6 = scale(s5, 3, 0.5, bias before scale)
                    (2, MAX, 7, 6, 3, -1))                        # s7 = max(s6, s3)
    attrs.update(outputs=[3, 7], axes=[FULL, FULL], fused_ops=["sigmoid", "elementwise_mul", "leaky_relu",
                                                               "elementwise_div", "scale", "elementwise_max"])
    s3 = sigmoid(x) * y
    s6 = 3.0 * (np.where(x >= 0, x, 0.1 * x) / y + 0.5)
    for dtype in ("float32", "float64"):
        OpTest("fused_elementwise", {"X": [("x", x.astype(dtype)), ("y", y.astype(dtype))]},
               {"Out": [("o3", s3.astype(dtype)), ("o7", np.maximum(s6, s3).astype(dtype))]},
               attrs).check_output(rtol=1e-5, atol=1e-6)


def test_gradient_instructions_against_numpy():
    rng = np.random.RandomState(1)
    out, g, x, y = (rng.uniform(0.1, 0.9, (4, 6)) for _ in range(4))
    attrs = program((1, UNARY["sigmoid"], 4, 0, 1, -1),  # sigmoid_grad(Out, dOut)
                    (1, UNARY["tanh"], 5, 0, 1, -1),     # tanh_grad(Out, dOut)
                    (3, MUL, 6, -1, 3, 1),               # elementwise_mul_grad dX = dOut * y
                    (4, MUL, 7, 2, -1, 1),               # dY = dOut * x
                    (4, SUB, 8, -1, -1, 1))              # elementwise_sub_grad dY = -dOut
    attrs.update(outputs=[4, 5, 6, 7, 8], axes=[FULL] * 4)
    OpTest("fused_elementwise", {"X": [("out", out), ("g", g), ("x", x), ("y", y)]},
           {"Out": [("a", g * out * (1 - out)), ("b", g * (1 - out * out)), ("c", g * y), ("d", g * x),
                    ("e", -g)]}, attrs).check_output()


@pytest.mark.parametrize("shape, bshape, axis", [((6, 5), (5,), -1), ((2, 3, 4), (3,), 1), ((3, 4), (1,), -1),
                                                 ((4, 3), (4,), 0)])
def test_a_broadcast_input(shape, bshape, axis):
    rng = np.random.RandomState(2)
    x, b = rng.randn(*shape), rng.randn(*bshape)
    attrs = program((2, ADD, 2, 0, 1, -1), (0, UNARY["relu"], 3, 2, -1, -1))
    attrs.update(outputs=[3], axes=[FULL, axis])
    a = axis if axis >= 0 else len(shape) - len(bshape)
    bb = b.reshape((1,) * a + bshape + (1,) * (len(shape) - a - len(bshape)))
    OpTest("fused_elementwise", {"X": [("x", x), ("b", b)]}, {"Out": [("o", np.maximum(x + bb, 0))]},
           attrs).check_output()


def test_column_views_read_a_split_in_place():
    rng = np.random.RandomState(3)
    gates, m = rng.randn(3, 8), rng.randn(3, 4)
    attrs = program((0, UNARY["sigmoid"], 3, 0, -1, -1), (0, UNARY["tanh"], 4, 1, -1, -1), (2, MUL, 5, 3, 4, -1),
                    (2, ADD, 6, 5, 2, -1))
    attrs.update(outputs=[6], axes=[FULL, FULL, FULL], column_offsets=[0, 4, -1])
    want = sigmoid(gates[:, :4]) * np.tanh(gates[:, 4:]) + m
    OpTest("fused_elementwise", {"X": [("g0", gates), ("g1", gates), ("m", m)]}, {"Out": [("o", want)]},
           attrs).check_output()


def _append(block, x, out, **attrs):
    block.append_op(type="fused_elementwise", inputs={"X": [x]}, outputs={"Out": [out]}, attrs=attrs)


@pytest.mark.parametrize("attrs, message", [
    (dict(code=[0, 1, 1, 5, -1, -1], params=[0.0] * 3, outputs=[1], axes=[FULL]),
     r"fused_elementwise: instruction 0 reads slot 5 before it is written"),
    (dict(code=[0, 1, 1, 0, -1, -1], params=[0.0], outputs=[1], axes=[FULL]),
     r"fused_elementwise: params has 1 values, expected 3 \(3 per instruction\)"),
    (dict(code=[0, 1, 2, 0, -1, -1], params=[0.0] * 3, outputs=[1], axes=[FULL]),
     r"fused_elementwise: instruction 0 writes slot 2, expected 1"),
    (dict(code=[9, 1, 1, 0, -1, -1], params=[0.0] * 3, outputs=[1], axes=[FULL]),
     r"fused_elementwise: instruction 0 has unknown kind 9"),
    (dict(code=[0, 99, 1, 0, -1, -1], params=[0.0] * 3, outputs=[1], axes=[FULL]),
     r"fused_elementwise: instruction 0 has function 99, expected \[0, 28\)"),
    (dict(code=[0, 1, 1, 0, -1, -1], params=[0.0] * 3, outputs=[0], axes=[FULL]),
     r"fused_elementwise: output slot 0 is not an instruction's"),
    (dict(code=[0, 1, 1, 0, -1, -1], params=[0.0] * 3, outputs=[1], axes=[-1]),
     r"fused_elementwise: no input has the output's shape"),
    (dict(code=[0, 1, 1, 0, -1, -1], params=[0.0] * 3, outputs=[1], axes=[FULL, FULL]),
     r"fused_elementwise: axes has 2 values, expected one per input X \(1\)"),
])
def test_a_hand_written_program_is_checked(attrs, message):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32", append_batch_size=False)
        out = main.global_block().create_var(name="out", shape=[4], dtype="float32")
        with pytest.raises(Exception, match=message):
            _append(main.global_block(), x, out, **attrs)


def test_mismatched_shapes_at_run_time_name_the_variables():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[-1, 4], dtype="float32", append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[-1, 4], dtype="float32", append_batch_size=False)
        out = main.global_block().create_var(name="out", dtype="float32")
        main.global_block().append_op(type="fused_elementwise", inputs={"X": [x, y]}, outputs={"Out": [out]},
                                      attrs=dict(program((2, ADD, 2, 0, 1, -1)), outputs=[2], axes=[FULL, FULL]))
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(Exception, match=r"fused_elementwise: X\[1\] 'y' has dims \[3, 4\] but X\[0\] 'x' has "
                                        r"\[2, 4\]; inputs of the fused chain must have the same shape"):
        exe.run(main, feed={"x": np.ones((2, 4), "float32"), "y": np.ones((3, 4), "float32")}, fetch_list=[out])
    with pytest.raises(Exception, match=r"fused_elementwise: X\[1\] 'y' is float64 but X\[0\] 'x' is float32"):
        exe.run(main, feed={"x": np.ones((2, 4), "float32"), "y": np.ones((2, 4), "float64")}, fetch_list=[out])
