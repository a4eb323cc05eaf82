"""gru_unit (kernels/gru_unit.cc): forward against the numpy cell for every activation pair, both origin modes,
with and without bias; numeric gradients of every input; the thread-split path; build-time errors; the layer
(parameters, activations, training) and its errors."""
import numpy as np
import pytest

import fluidlite as fluid
from gru_reference import ACTIVATIONS, CODES, gru_cell
from op_test import OpTest, declare

rng = np.random.RandomState(11)


def rand(*shape, dtype="float64", scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(dtype)


def case(n, d, with_bias=True, dtype="float64"):
    """Input, HiddenPrev, Weight and (maybe) Bias of an n x d gru_unit."""
    ins = {"Input": rand(n, 3 * d, dtype=dtype, scale=2.0), "HiddenPrev": rand(n, d, dtype=dtype),
           "Weight": rand(d, 3 * d, dtype=dtype)}
    if with_bias:
        ins["Bias"] = rand(1, 3 * d, dtype=dtype)
    return ins


def expected(ins, act="tanh", gate_act="sigmoid", origin_mode=False, dtype="float64"):
    h, rh, g = gru_cell(*(ins[k].astype("float64") for k in ("Input", "HiddenPrev", "Weight")),
                        ins["Bias"].astype("float64") if "Bias" in ins else None, act, gate_act, origin_mode)
    return {"Hidden": h.astype(dtype), "ResetHiddenPrev": rh.astype(dtype), "Gate": g.astype(dtype)}


def attrs(act="tanh", gate_act="sigmoid", origin_mode=False):
    return {"activation": CODES[act], "gate_activation": CODES[gate_act], "origin_mode": origin_mode}


@pytest.mark.parametrize("n,d", [(1, 1), (3, 5), (6, 2), (2, 17)])
@pytest.mark.parametrize("origin_mode", [False, True])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gru_unit_forward(n, d, origin_mode, with_bias, dtype):
    ins = case(n, d, with_bias, dtype)
    tol = 2e-6 if dtype == "float32" else 1e-12
    OpTest("gru_unit", ins, expected(ins, origin_mode=origin_mode, dtype=dtype),
           attrs(origin_mode=origin_mode)).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("gate_act", sorted(ACTIVATIONS))
def test_gru_unit_activations(act, gate_act):
    ins = case(4, 3)
    OpTest("gru_unit", ins, expected(ins, act, gate_act), attrs(act, gate_act)).check_output(atol=1e-12, rtol=1e-12)


def test_gru_unit_defaults_are_tanh_and_sigmoid():
    ins = case(3, 2)
    OpTest("gru_unit", ins, expected(ins, "tanh", "sigmoid"), {}).check_output(atol=1e-12, rtol=1e-12)


def test_gru_unit_rows_split_across_threads():
    # 96 rows of D = 64 is two row blocks of the thread pool (kernels/helpers/gru_cell.h RowGrain: 41 rows).
    ins = case(96, 64, dtype="float32")
    OpTest("gru_unit", ins, expected(ins, dtype="float32"), attrs()).check_output(atol=5e-6, rtol=5e-6)


@pytest.mark.parametrize("origin_mode", [False, True])
@pytest.mark.parametrize("act,gate_act", [("tanh", "sigmoid"), ("relu", "tanh"), ("sigmoid", "identity"),
                                          ("identity", "relu")])
def test_gru_unit_grad(origin_mode, act, gate_act):
    ins = case(3, 2)
    OpTest("gru_unit", ins, expected(ins, act, gate_act, origin_mode),
           attrs(act, gate_act, origin_mode)).check_grad(["Input", "HiddenPrev", "Weight", "Bias"], "Hidden")


@pytest.mark.parametrize("wanted", [["Weight"], ["HiddenPrev"], ["Input", "Bias"], ["Input"]])
def test_gru_unit_grad_of_some_inputs(wanted):
    # The inputs not listed keep stop_gradient: their gradients are not computed (Input@GRAD absent: the gate
    # gradient goes to a temporary).
    ins = case(4, 3)
    OpTest("gru_unit", ins, expected(ins), attrs()).check_grad(wanted, "Hidden")


def test_gru_unit_grad_without_bias():
    ins = case(2, 3, with_bias=False)
    OpTest("gru_unit", ins, expected(ins), attrs(origin_mode=True)).check_grad(["Input", "HiddenPrev", "Weight"],
                                                                             "Hidden")


def test_gru_unit_on_a_lod_batch_gives_outputs_without_lod():
    # Fluid's gru_unit shares no LoD: a LoD Input gives plain outputs.
    ins = case(5, 2)
    want = expected(ins)
    ins["Input"] = (ins["Input"], [[2, 3]])
    OpTest("gru_unit", ins, {k: (v, []) for k, v in want.items()}, attrs()).check_output(atol=1e-12, rtol=1e-12)


def _append(block, x, hp, w, b=None, **attrs):
    ins = {"Input": [x], "HiddenPrev": [hp], "Weight": [w]}
    if b is not None:
        ins["Bias"] = [b]
    outs = {k: [declare(block, "%s_out" % k, None)] for k in ("Gate", "ResetHiddenPrev", "Hidden")}
    return block.append_op(type="gru_unit", inputs=ins, outputs=outs, attrs=attrs)


def test_gru_unit_shapes_at_build_time():
    block = fluid.Program().global_block()
    _append(block, declare(block, "x", [-1, 12]), declare(block, "hp", [-1, 4]), declare(block, "w", [4, 12]))
    assert block.var("Gate_out").shape == (-1, 12)
    assert block.var("ResetHiddenPrev_out").shape == (-1, 4)
    assert block.var("Hidden_out").shape == (-1, 4)


def test_gru_unit_errors():
    block = fluid.Program().global_block()
    x, hp, w = declare(block, "x", [-1, 12]), declare(block, "hp", [-1, 4]), declare(block, "w", [4, 12])
    EnforceNotMet = fluid.core.EnforceNotMet
    with pytest.raises(EnforceNotMet, match=r"gru_unit: Weight 'w2' \[4, 8\] must be \[D, 3 \* D\]"):
        _append(block, x, hp, declare(block, "w2", [4, 8]))
    with pytest.raises(EnforceNotMet, match=r"gru_unit: Input 'x2' \[-1, 9\] must have width 3 \* D = 12 for "
                                            r"Weight 'w' \[4, 12\]"):
        _append(block, declare(block, "x2", [-1, 9]), hp, w)
    with pytest.raises(EnforceNotMet, match=r"gru_unit: HiddenPrev 'hp2' \[-1, 3\] must have width D = 4"):
        _append(block, x, declare(block, "hp2", [-1, 3]), w)
    with pytest.raises(EnforceNotMet, match=r"gru_unit: Input 'x3' \[2, 12\] and HiddenPrev 'hp3' \[3, 4\] must "
                                            r"have the same batch size"):
        _append(block, declare(block, "x3", [2, 12]), declare(block, "hp3", [3, 4]), w)
    with pytest.raises(EnforceNotMet, match=r"gru_unit: Bias 'b' \[1, 4\] must be \[1, 3 \* D\] = \[1, 12\]"):
        _append(block, x, hp, w, declare(block, "b", [1, 4]))
    with pytest.raises(EnforceNotMet, match=r"gru_unit: Input 'x' \[-1, 12\] is float32 but HiddenPrev 'hp64' "
                                            r"\[-1, 4\] is float64"):
        _append(block, x, declare(block, "hp64", [-1, 4], dtype="float64"), w)
    with pytest.raises(EnforceNotMet, match=r"op gru_unit: attribute 'activation' = 4 is invalid: must be in \[0, 3\]"):
        _append(block, x, hp, w, activation=4)


def _unit_program(activation="tanh", gate_activation="sigmoid", origin_mode=False, bias_attr=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[9], dtype="float64")
        h = fluid.layers.data("h", shape=[3], dtype="float64")
        out = fluid.layers.gru_unit(x, h, size=9, activation=activation, gate_activation=gate_activation,
                                    origin_mode=origin_mode, bias_attr=bias_attr)
    return main, startup, out


@pytest.mark.parametrize("act,gate_act,origin_mode", [("tanh", "sigmoid", False), ("relu", "tanh", True),
                                                      ("identity", "relu", False)])
def test_gru_unit_layer_matches_numpy(act, gate_act, origin_mode):
    main, startup, (hidden, reset_h, gate) = _unit_program(act, gate_act, origin_mode)
    assert (hidden.shape, reset_h.shape, gate.shape) == ((-1, 3), (-1, 3), (-1, 9))
    params = {p.name: p.shape for p in main.global_block().all_parameters()}
    assert params == {"gru_unit_0.w_0": (3, 9), "gru_unit_0.b_0": (1, 9)}
    op = [o for o in main.global_block().ops if o.type == "gru_unit"][0]
    assert (op.attr("activation"), op.attr("gate_activation"), op.attr("origin_mode")) == (
        CODES[act], CODES[gate_act], origin_mode)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("gru_unit_0.w_0").get_tensor())
    scope.find_var("gru_unit_0.b_0").get_tensor().set(rand(1, 9), fluid.CPUPlace())
    b = np.array(scope.find_var("gru_unit_0.b_0").get_tensor())
    xv, hv = rand(5, 9), rand(5, 3)
    got = exe.run(main, feed={"x": xv, "h": hv}, fetch_list=[hidden, reset_h, gate], scope=scope)
    for g, want in zip(got, gru_cell(xv, hv, w, b, act, gate_act, origin_mode)):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def test_gru_unit_layer_without_bias_trains():
    main, startup, (hidden, _, _) = _unit_program(bias_attr=False)
    assert [p.name for p in main.global_block().all_parameters()] == ["gru_unit_0.w_0"]
    op = [o for o in main.global_block().ops if o.type == "gru_unit"][0]
    assert op.input("Bias") == []
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fluid.optimizer.SGD(0.5).minimize(fluid.layers.mean(hidden))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    w0 = np.array(scope.find_var("gru_unit_0.w_0").get_tensor()).copy()
    exe.run(main, feed={"x": rand(4, 9), "h": rand(4, 3)}, scope=scope)
    assert not np.allclose(np.array(scope.find_var("gru_unit_0.w_0").get_tensor()), w0)


def test_gru_unit_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[9], dtype="float32")
        h = fluid.layers.data("h", shape=[3], dtype="float32")
        with pytest.raises(ValueError, match="gru_unit: activation must be one of sigmoid, tanh, relu, identity, "
                                             "got 'softmax'"):
            fluid.layers.gru_unit(x, h, 9, activation="softmax")
        with pytest.raises(ValueError, match=r"gru_unit: input x must have width 3 \* \(size // 3\) = 6, got "
                                             r"shape \(-1, 9\)"):
            fluid.layers.gru_unit(x, h, 6)
        with pytest.raises(ValueError, match=r"gru_unit: hidden h4 must have width size // 3 = 3, got shape "
                                             r"\(-1, 4\)"):
            fluid.layers.gru_unit(x, fluid.layers.data("h4", shape=[4], dtype="float32"), 9)
        with pytest.raises(ValueError, match=r"gru_unit: size must be 3 \* D with D >= 1"):
            fluid.layers.gru_unit(x, h, 2)
        with pytest.raises(TypeError, match="gru_unit: 'hidden' must be a Variable, got ndarray"):
            fluid.layers.gru_unit(x, np.zeros((2, 3)), 9)
