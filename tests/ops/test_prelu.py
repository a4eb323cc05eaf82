"""prelu (kernels/prelu.cc): forward against numpy for the modes all / channel / element, gradients of X and
Alpha by central differences, the layer's parameter (Fluid's shape, name and 0.25 init) and its errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

rng = np.random.RandomState(6)


def _alpha_shape(mode, xshape):
    return {"all": [1], "channel": [1, xshape[1]] + [1] * (len(xshape) - 2), "element": [1] + list(xshape[1:])}[mode]


def _x(shape):
    return rng.uniform(0.1, 1.0, shape) * rng.choice([-1.0, 1.0], shape)  # off the kink at 0


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (2, 3, 2)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["all", "channel", "element"])
def test_forward(mode, dtype, shape):
    x = _x(shape).astype(dtype)
    alpha = rng.uniform(0.05, 0.5, _alpha_shape(mode, shape)).astype(dtype)
    want = np.where(x > 0, x, alpha * x)  # the alpha shapes broadcast as Fluid lays them out
    OpTest("prelu", {"X": x, "Alpha": alpha}, {"Out": want}, {"mode": mode}).check_output(atol=0, rtol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 2, 2), (3, 4)], ids=str)
@pytest.mark.parametrize("mode", ["all", "channel", "element"])
def test_grad(mode, shape):
    x = _x(shape)
    alpha = rng.uniform(0.05, 0.5, _alpha_shape(mode, shape))
    OpTest("prelu", {"X": x, "Alpha": alpha}, {"Out": np.zeros(1)}, {"mode": mode}).check_grad(["X", "Alpha"], "Out")


@pytest.mark.parametrize("mode", ["all", "channel", "element"])
def test_layer_parameter_and_training(mode):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 2, 2], dtype="float32")
        out = fluid.layers.prelu(x, mode)
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(learning_rate=1.0).minimize(loss)
    alpha, = [p for p in main.global_block().all_parameters()]
    assert alpha.name.startswith("prelu_") and alpha.name.endswith(".w_0")
    assert list(alpha.shape) == {"all": [1], "channel": [1, 3, 1, 1], "element": [1, 3, 2, 2]}[mode]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scope = fluid.global_scope()
    np.testing.assert_array_equal(np.array(scope.find_var(alpha.name).get_tensor()), np.full(alpha.shape, 0.25))
    xv = -np.ones((2, 3, 2, 2), "float32")
    got, = exe.run(main, feed={"x": xv}, fetch_list=[out])
    np.testing.assert_allclose(got, -0.25 * np.ones_like(xv))
    # d(mean)/d(alpha) = sum over shared positions of x / numel = -(positions per alpha) / 24
    per_alpha = {"all": 24, "channel": 8, "element": 2}[mode]
    np.testing.assert_allclose(np.array(scope.find_var(alpha.name).get_tensor()),
                               np.full(alpha.shape, 0.25 + per_alpha / 24.0), rtol=1e-6)


def test_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("xp", shape=[3, 2, 2], dtype="float32")
        with pytest.raises(ValueError, match="prelu: mode should be one of all, channel, element, got 'any'"):
            fluid.layers.prelu(x, "any")
        v = fluid.layers.data("v", shape=[5], dtype="float32", append_batch_size=False)
        with pytest.raises(ValueError, match=r"prelu: mode 'channel' needs x of rank >= 2, got v with shape \[5\]"):
            fluid.layers.prelu(v, "channel")
        with pytest.raises(TypeError, match="prelu: 'x' must be a Variable, got ndarray"):
            fluid.layers.prelu(np.zeros(3), "all")


def test_op_alpha_size_error():
    x = _x((2, 3, 4))
    with pytest.raises(fluid.core.EnforceNotMet, match=r"prelu: mode 'channel' takes one alpha per channel "
                                                        r"\(X.dims\[1\] = 3\), but Alpha .* has 4 elements"):
        OpTest("prelu", {"X": x, "Alpha": np.ones(4)}, {"Out": x}, {"mode": "channel"}).check_output()
    with pytest.raises(fluid.core.EnforceNotMet, match=r"prelu: mode 'all' takes one alpha, but Alpha .* has 3"):
        OpTest("prelu", {"X": x, "Alpha": np.ones(3)}, {"Out": x}, {"mode": "all"}).check_output()
