"""Layer-level checks of the math / activation / logical / reduction layers of issue 14: Fluid 1.8's signatures
(argument names, order and defaults), the module each lives in, and build-time errors that name the layer and
the variable. Their values and gradients are checked in tests/ops/test_<kernel file>.py."""
import inspect

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.layers import control_flow, nn, ops, tensor

E = inspect.Parameter.empty

# layer: (module, Fluid 1.8's arguments with defaults; E: required). gelu and the generated ops.py layers also
# take a trailing name=None (Fluid's generated gelu has none).
SIGNATURES = {
    "elu": (nn, [("x", E), ("alpha", 1.0), ("name", None)]),
    "selu": (nn, [("x", E), ("scale", None), ("alpha", None), ("name", None)]),
    "swish": (nn, [("x", E), ("beta", 1.0), ("name", None)]),
    "hard_swish": (nn, [("x", E), ("threshold", 6.0), ("scale", 6.0), ("offset", 3.0), ("name", None)]),
    "hard_sigmoid": (nn, [("x", E), ("slope", 0.2), ("offset", 0.5), ("name", None)]),
    "pow": (nn, [("x", E), ("factor", 1.0), ("name", None)]),
    "prelu": (nn, [("x", E), ("mode", E), ("param_attr", None), ("name", None)]),
    "maxout": (nn, [("x", E), ("groups", E), ("name", None), ("axis", 1)]),
    "clip_by_norm": (nn, [("x", E), ("max_norm", E), ("name", None)]),
    "logical_and": (nn, [("x", E), ("y", E), ("out", None), ("name", None)]),
    "logical_or": (nn, [("x", E), ("y", E), ("out", None), ("name", None)]),
    "logical_xor": (nn, [("x", E), ("y", E), ("out", None), ("name", None)]),
    "logical_not": (nn, [("x", E), ("out", None), ("name", None)]),
    "reduce_prod": (nn, [("input", E), ("dim", None), ("keep_dim", False), ("name", None)]),
    "reduce_all": (nn, [("input", E), ("dim", None), ("keep_dim", False), ("name", None)]),
    "reduce_any": (nn, [("input", E), ("dim", None), ("keep_dim", False), ("name", None)]),
    "isfinite": (tensor, [("x", E)]),
    "has_inf": (tensor, [("x", E)]),
    "has_nan": (tensor, [("x", E)]),
    "sums": (tensor, [("input", E), ("out", None)]),
    "is_empty": (control_flow, [("x", E), ("cond", None)]),
    "gelu": (ops, [("x", E), ("approximate", False), ("name", None)]),
}
for _op in ["softplus", "softsign", "rsqrt", "reciprocal", "sin", "cos", "ceil", "round", "exp", "log", "sqrt",
            "square", "abs"]:
    SIGNATURES[_op] = (ops, [("x", E), ("name", None)])


@pytest.mark.parametrize("layer", sorted(SIGNATURES))
def test_signature_and_module(layer):
    module, want = SIGNATURES[layer]
    fn = getattr(fluid.layers, layer)
    assert getattr(module, layer) is fn and layer in module.__all__
    got = [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
    assert got == want


@pytest.mark.parametrize("layer", ["elu", "gelu", "softplus", "pow", "maxout", "clip_by_norm", "logical_not",
                                   "reduce_prod", "isfinite", "is_empty"])
def test_non_variable_input_names_the_layer(layer):
    args = {"maxout": (2,), "clip_by_norm": (1.0,)}.get(layer, ())
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match=r"^%s.*'(x|input)' must be a Variable, got ndarray" % layer):
            getattr(fluid.layers, layer)(np.zeros(3), *args)


def test_sums_adds_its_inputs_into_out():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.data("a", shape=[3], dtype="float32", append_batch_size=False)
        b = fluid.layers.data("b", shape=[3], dtype="float32", append_batch_size=False)
        out = fluid.layers.create_tensor("float32")
        s = fluid.layers.sums([a, b, a])
        assert fluid.layers.sums([a, b], out=out) is out
    sum_ops = [o for o in main.global_block().ops if o.type == "sum"]
    assert len(sum_ops) == 2 and sum_ops[1].output("Out") == [out.name]
    av, bv = np.array([1, 2, 3], "float32"), np.array([0.5, -1, 4], "float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": av, "b": bv}, fetch_list=[s, out])
    np.testing.assert_allclose(got[0], 2 * av + bv)
    np.testing.assert_allclose(got[1], av + bv)


def test_activation_with_act_argument_chain():
    # an activation layer name used as `act` of fc appends that op (Fluid's act= strings)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[4], dtype="float32")
        y = fluid.layers.fc(x, size=3, act="gelu")
    assert main.global_block().ops[-1].type == "gelu" and tuple(y.shape) == (-1, 3)


@pytest.mark.parametrize("layer", [
    lambda x: fluid.layers.fc(x, 4),
    lambda x: fluid.layers.conv2d(x, 4, 3),
    lambda x: fluid.layers.conv2d_transpose(x, 4, filter_size=3),
])
def test_parameter_layer_rejects_an_integer_input_at_build_time(layer):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3, 4, 4], "int64")
        with pytest.raises(TypeError, match=r"^(fc|conv2d|conv2d_transpose): input x must be float16, float32 or "
                                            r"float64 \(the layer's parameters take its dtype\), got int64$"):
            layer(x)
