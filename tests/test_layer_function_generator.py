"""Layers generated from the C++ registration: signatures, defaults and docstrings come from op_proto."""
import inspect

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.layers.layer_function_generator import generate_layer_fn

L = fluid.layers


@pytest.mark.parametrize("layer,want", [
    (L.relu, "(x, name=None)"),
    (L.leaky_relu, "(x, alpha=0.02, name=None)"),
    (L.relu6, "(x, threshold=6.0, name=None)"),
    (L.clip, "(x, min, max, name=None)"),
    (L.scale, "(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None)"),
    (L.elementwise_add, "(x, y, axis=-1, act=None, name=None)"),
    (L.reduce_mean, "(input, dim=None, keep_dim=False, name=None)"),
    (L.less_than, "(x, y, force_cpu=False, cond=None, name=None)"),
    (L.equal, "(x, y, cond=None, name=None)"),
    (L.mean, "(x, name=None)"),
])
def test_fluid_signatures(layer, want):
    assert str(inspect.signature(layer)) == want


def test_defaults_and_docs_come_from_the_registration():
    attrs = {a["name"]: a for a in core.op_proto("leaky_relu")["attrs"]}
    assert inspect.signature(L.leaky_relu).parameters["alpha"].default == pytest.approx(attrs["alpha"]["default"])
    assert attrs["alpha"]["doc"] in L.leaky_relu.__doc__
    assert L.leaky_relu.__doc__.startswith(core.op_proto("leaky_relu")["doc"])
    assert L.leaky_relu.__name__ == "leaky_relu"


def test_generated_layer_builds_and_runs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", shape=[4], dtype="float32", append_batch_size=False)
        y = L.leaky_relu(x, alpha=0.5)
        z = L.scale(y, 2.0, bias=1.0, act="relu")
        c = L.less_than(x, z)
    assert c.stop_gradient and c.dtype == fluid.core.VarDesc.VarType.BOOL
    xv = np.array([-2, -1, 1, 2], "float32")
    got_y, got_z, got_c = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[y, z, c])
    np.testing.assert_array_equal(got_y, np.where(xv >= 0, xv, 0.5 * xv))
    np.testing.assert_array_equal(got_z, np.maximum(2 * got_y + 1, 0))
    np.testing.assert_array_equal(got_c, xv < got_z)


def test_bad_arguments():
    x = L.data("x", shape=[4], dtype="float32")
    with pytest.raises(TypeError, match=r"clip\(x, min, max, name=None\): missing a required argument: 'max'"):
        L.clip(x, 0.0)
    with pytest.raises(TypeError, match="relu: 'x' must be a Variable, got ndarray"):
        L.relu(np.zeros(3))
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        L.relu(x, alpha=1.0)


def test_order_must_name_every_argument():
    with pytest.raises(ValueError, match="order"):
        generate_layer_fn("scale", order=["scale", "name"])
