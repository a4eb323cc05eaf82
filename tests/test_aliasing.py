"""An op whose output is one of its inputs: the op computes in place when its registration declares the pair
(Inplace(out, in), as Fluid's inplace inference), and then the numpy result comes out; any other alias is
refused when the program is prepared, naming the op, the slots and the variable."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import declare, run

rng = np.random.RandomState(3)


def _one_op(op_type, inputs, outputs, attrs=None, shapes=None):
    """A program of one op over fed float32 variables (name -> shape in `shapes`)."""
    main = fluid.Program()
    block = main.global_block()
    for name, shape in shapes.items():
        declare(block, name, shape)
    block.append_op(type=op_type, inputs=inputs, outputs=outputs, attrs=attrs or {})
    return main


@pytest.mark.parametrize("op_type, inputs, outputs, attrs, slots", [
    ("matmul", {"X": ["t"], "Y": ["t"]}, {"Out": ["t"]}, {}, ("Out", "X")),
    ("mul", {"X": ["t"], "Y": ["t"]}, {"Out": ["t"]}, {}, ("Out", "X")),
    ("matmul", {"X": ["u"], "Y": ["t"]}, {"Out": ["t"]}, {}, ("Out", "Y")),
    ("transpose2", {"X": ["t"]}, {"Out": ["t"], "XShape": ["xs"]}, {"axis": [1, 0]}, ("Out", "X")),
])
def test_undeclared_alias_is_refused_at_prepare(op_type, inputs, outputs, attrs, slots):
    main = _one_op(op_type, inputs, outputs, attrs, {"t": [3, 3], "u": [3, 3], "xs": [0, 3, 3]})
    exe = fluid.Executor(fluid.CPUPlace())
    msg = r"op %s: output %s and input %s are the same variable 't', but %s does not compute in place" % (
        op_type, slots[0], slots[1], op_type)
    with pytest.raises(fluid.core.EnforceNotMet, match=msg):
        exe.run(main, feed={"t": rng.rand(3, 3).astype("float32"), "u": rng.rand(3, 3).astype("float32")},
                fetch_list=["t"])
    # The executor stays usable: the same op with an output of its own runs.
    main2 = _one_op(op_type, {k: ["a" if n == "t" else n for n in v] for k, v in inputs.items()},
                    {"Out": ["b"], **({"XShape": ["xs"]} if "XShape" in outputs else {})}, attrs,
                    {"a": [3, 3], "b": [3, 3], "u": [3, 3], "xs": [0, 3, 3]})
    a = rng.rand(3, 3).astype("float32")
    u = rng.rand(3, 3).astype("float32")
    b, = exe.run(main2, feed={"a": a, "u": u}, fetch_list=["b"])
    want = {"matmul": (u if "u" in str(inputs) else a) @ a, "mul": a @ a, "transpose2": a.T}[op_type]
    np.testing.assert_allclose(b, want, rtol=1e-6)


@pytest.mark.parametrize("op_type, attrs, ref", [
    ("relu", {}, lambda x: np.maximum(x, 0)),
    ("exp", {}, np.exp),
    ("scale", {"scale": 3.0, "bias": 1.0}, lambda x: 3 * x + 1),
    ("assign", {}, lambda x: x),
])
def test_declared_unary_in_place_matches_numpy(op_type, attrs, ref):
    main = _one_op(op_type, {"X": ["t"]}, {"Out": ["t"]}, attrs, {"t": [4, 5]})
    x = rng.uniform(-1, 1, (4, 5)).astype("float32")
    out, = run(main, {"t": x}, ["t"])
    np.testing.assert_allclose(out, ref(x), rtol=1e-6)


@pytest.mark.parametrize("op_type, ref", [("elementwise_add", np.add), ("elementwise_mul", np.multiply),
                                          ("elementwise_sub", np.subtract)])
def test_elementwise_in_place_into_the_full_size_operand(op_type, ref):
    # Out = X where Y broadcasts into X; also X, Y and Out all one variable.
    main = _one_op(op_type, {"X": ["t"], "Y": ["b"]}, {"Out": ["t"]}, {}, {"t": [3, 4], "b": [4]})
    x, y = rng.rand(3, 4).astype("float32"), rng.rand(4).astype("float32")
    out, = run(main, {"t": x, "b": y}, ["t"])
    np.testing.assert_allclose(out, ref(x, y), rtol=1e-6)
    main = _one_op(op_type, {"X": ["t"], "Y": ["t"]}, {"Out": ["t"]}, {}, {"t": [3, 4]})
    out, = run(main, {"t": x}, ["t"])
    np.testing.assert_allclose(out, ref(x, x), rtol=1e-6)


def test_elementwise_in_place_into_the_broadcast_operand_raises_and_restores_its_shape():
    # Out = Y with Y [4] broadcast to [3, 4]: 12 results cannot go over the 4 values Y holds.
    main = fluid.Program()
    block = main.global_block()
    declare(block, "x", [3, 4])
    b = block.create_var(name="b", shape=[4], dtype="float32", persistable=True)  # to look at it afterwards
    block.append_op(type="fill_constant", outputs={"Out": [b]}, attrs={"shape": [4], "value": 2.0, "dtype": 5})
    block.append_op(type="elementwise_add", inputs={"X": ["x"], "Y": ["b"]}, outputs={"Out": ["b"]})
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.core.Scope()
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"op elementwise_add: output Out is input Y's variable 'b' \(in place\), but its shape "
                             r"would change from \[4\] to \[3, 4\]; give the output a variable of its own"):
        exe.run(main, feed={"x": np.ones((3, 4), "float32")}, scope=scope)
    t = scope.find_var("b").get_tensor()
    assert t.shape() == [4]  # not left claiming 12 elements over a buffer of 4
    np.testing.assert_array_equal(np.array(t), [2, 2, 2, 2])


def test_sum_in_place_into_any_input():
    # The regularizer's pattern sum(X=[g, d], Out=g), and Out the second input.
    for out_name in ("g", "d"):
        main = _one_op("sum", {"X": ["g", "d"]}, {"Out": [out_name]}, {}, {"g": [5, 3], "d": [5, 3]})
        g, d = rng.rand(5, 3).astype("float32"), rng.rand(5, 3).astype("float32")
        out, = run(main, {"g": g, "d": d}, [out_name])
        np.testing.assert_allclose(out, g + d, rtol=1e-6)


def test_sgd_updates_param_in_place():
    main = _one_op("sgd", {"Param": ["p"], "Grad": ["g"], "LearningRate": ["lr"]}, {"ParamOut": ["p"]}, {},
                   {"p": [4], "g": [4], "lr": [1]})
    p, g = rng.rand(4).astype("float32"), rng.rand(4).astype("float32")
    out, = run(main, {"p": p, "g": g, "lr": np.array([0.5], "float32")}, ["p"])
    np.testing.assert_allclose(out, p - 0.5 * g, rtol=1e-6)


def test_inplace_declarations_name_existing_slots():
    # A few ops declare their in-place pairs; matmul, mul and transpose2 declare none.
    assert fluid.core.op_proto("sgd")["inplace"] == [("ParamOut", "Param")]
    assert fluid.core.op_proto("matmul")["inplace"] == []
