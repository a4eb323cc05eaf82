"""lstm_unit: forward against numpy, gradients, the layer, errors at build time; on a LoD batch as Fluid 1.8 runs
it (outputs without LoD, X@GRAD with X's)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_unit_ref(x, c_prev, forget_bias=0.0):
    i, f, o, g = np.split(x, 4, axis=1)
    c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * np.tanh(g)
    return c, sigmoid(o) * np.tanh(c)


@pytest.mark.parametrize("n,d", [(1, 1), (3, 5), (32, 16), (2, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("forget_bias", [0.0, 1.0])
def test_lstm_unit_forward(n, d, dtype, forget_bias):
    x = (rand(n, 4 * d) * 3).astype(dtype)
    x.reshape(-1)[:2] = [40.0, -40.0]  # saturated gates
    c_prev = rand(n, d, dtype=dtype)
    c, h = lstm_unit_ref(x.astype("float64"), c_prev.astype("float64"), forget_bias)
    tol = 1e-6 if dtype == "float32" else 1e-12
    OpTest("lstm_unit", {"X": x, "C_prev": c_prev}, {"C": c.astype(dtype), "H": h.astype(dtype)},
           {"forget_bias": forget_bias}).check_output(atol=tol, rtol=tol)


@pytest.mark.parametrize("outputs", [["C", "H"], ["H"], ["C"]])
@pytest.mark.parametrize("forget_bias", [0.0, 0.5])
def test_lstm_unit_grad(outputs, forget_bias):
    x, c_prev = rand(3, 8) * 2, rand(3, 2)
    c, h = lstm_unit_ref(x, c_prev, forget_bias)
    OpTest("lstm_unit", {"X": x, "C_prev": c_prev}, {"C": c, "H": h},
           {"forget_bias": forget_bias}).check_grad(["X", "C_prev"], outputs)


def test_lstm_unit_errors():
    block = fluid.Program().global_block()
    c_prev = declare(block, "c_prev", [-1, 4])
    c, h = declare(block, "c", None), declare(block, "h", None)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm_unit: X 'x' \[-1, 12\] must have width 4 \* D = 16 for "
                                                       r"C_prev 'c_prev' \[-1, 4\]"):
        block.append_op(type="lstm_unit", inputs={"X": [declare(block, "x", [-1, 12])], "C_prev": [c_prev]},
                        outputs={"C": [c], "H": [h]})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lstm_unit: X 'x3' \[2, 16\] and C_prev 'c3' \[3, 4\] must "
                                                       r"have the same batch size"):
        block.append_op(type="lstm_unit", inputs={"X": [declare(block, "x3", [2, 16])],
                                                  "C_prev": [declare(block, "c3", [3, 4])]},
                        outputs={"C": [c], "H": [h]})


def test_lstm_unit_layer_matches_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[3], dtype="float64")
        h0 = fluid.layers.data("h0", shape=[2], dtype="float64")
        c0 = fluid.layers.data("c0", shape=[2], dtype="float64")
        h, c = fluid.layers.lstm_unit(x, h0, c0, forget_bias=1.0)
        assert h.shape == (-1, 2) and c.shape == (-1, 2)
        params = [p.name for p in main.global_block().all_parameters()]
        assert sorted(params) == ["fc_0.b_0", "fc_0.w_0"]
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scope = fluid.global_scope()
    w = np.array(scope.find_var("fc_0.w_0").get_tensor()).copy()
    b = np.array(scope.find_var("fc_0.b_0").get_tensor()).copy()
    xv, hv, cv = rand(4, 3), rand(4, 2), rand(4, 2)
    got_h, got_c = exe.run(main, feed={"x": xv, "h0": hv, "c0": cv}, fetch_list=[h, c])
    want_c, want_h = lstm_unit_ref(np.concatenate([xv, hv], 1) @ w + b, cv, 1.0)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-12, atol=1e-12)
    assert not np.allclose(np.array(scope.find_var("fc_0.w_0").get_tensor()), w)  # trained


def test_lstm_unit_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        h = fluid.layers.data("h", shape=[2], dtype="float32")
        c = fluid.layers.data("c", shape=[4], dtype="float32")
        with pytest.raises(ValueError, match="lstm_unit: hidden_t_prev .* and cell_t_prev .* must have the same width"):
            fluid.layers.lstm_unit(x, h, c)
        with pytest.raises(ValueError, match=r"lstm_unit: x_t x3 must have rank 2, got shape \(-1, 3, 2\)"):
            fluid.layers.lstm_unit(fluid.layers.data("x3", shape=[3, 2]), h, h)


# ------------------------------------------------------------------ lstm_unit on a LoD batch


def test_lstm_unit_op_on_a_lod_batch():
    # Fluid's lstm_unit shares no LoD: C and H of a LoD X are plain tensors; X@GRAD keeps X's LoD.
    x, c_prev = rand(5, 8) * 2, rand(5, 2)
    c, h = lstm_unit_ref(x, c_prev, 0.5)
    t = OpTest("lstm_unit", {"X": (x, [[2, 0, 3]]), "C_prev": c_prev}, {"C": (c, []), "H": (h, [])},
               {"forget_bias": 0.5})
    t.check_output(atol=1e-12, rtol=1e-12)
    t.check_grad(["X", "C_prev"], ["C", "H"])


def test_lstm_unit_layer_on_a_lod_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[3], dtype="float64", lod_level=1)
        x.stop_gradient = False
        h_prev = fluid.layers.data("h_prev", shape=[2], dtype="float64")
        c_prev = fluid.layers.data("c_prev", shape=[2], dtype="float64")
        h, c = fluid.layers.lstm_unit(x, h_prev, c_prev, forget_bias=1.0)
        assert (h.lod_level, c.lod_level) == (0, 0)
        dx, = fluid.gradients([fluid.layers.mean(h)], [x])
        assert dx.lod_level == 1
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    w, b = (np.array(scope.find_var(n).get_tensor()) for n in ("fc_0.w_0", "fc_0.b_0"))
    for lens in ([2, 3], [1, 0, 1, 2]):
        n = sum(lens)
        xv, hv, cv = rand(n, 3), rand(n, 2), rand(n, 2)
        got_h, got_c, got_dx = exe.run(main, feed={"x": (xv, [lens]), "h_prev": hv, "c_prev": cv},
                                       fetch_list=[h, c, dx], scope=scope, return_numpy=False)
        assert got_h.recursive_sequence_lengths() == [] and got_c.recursive_sequence_lengths() == []
        assert got_dx.recursive_sequence_lengths() == [lens]
        want_c, want_h = lstm_unit_ref(np.concatenate([xv, hv], 1) @ w + b, cv, 1.0)
        np.testing.assert_allclose(np.array(got_h), want_h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.array(got_c), want_c, rtol=1e-12, atol=1e-12)
