"""LR schedules driven by @LR_DECAY_COUNTER@: an increment op first in the main program, first run sees 0."""
import math

import numpy as np
import pytest

import fluidlite as fluid


def _lrs(build, steps=6):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = build()
    assert main.global_block().ops[0].type == "increment"
    counter = main.global_block().var("@LR_DECAY_COUNTER@")
    assert counter.persistable and counter.shape == (1,) and counter.dtype == fluid.core.VarDesc.VarType.INT64
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(exe.run(main, fetch_list=[lr], scope=scope)[0][0]) for _ in range(steps)]


def test_exponential_decay():
    got = _lrs(lambda: fluid.layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5))
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (s / 2) for s in range(6)], rtol=1e-6)


def test_exponential_decay_staircase():
    got = _lrs(lambda: fluid.layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5, staircase=True))
    np.testing.assert_allclose(got, [0.1 * 0.5 ** math.floor(s / 2) for s in range(6)], rtol=1e-6)


def test_inverse_time_decay():
    got = _lrs(lambda: fluid.layers.inverse_time_decay(1.0, decay_steps=3, decay_rate=0.5))
    np.testing.assert_allclose(got, [1.0 / (1 + 0.5 * s / 3) for s in range(6)], rtol=1e-6)


def test_piecewise_decay():
    got = _lrs(lambda: fluid.layers.piecewise_decay(boundaries=[2, 4], values=[1.0, 0.5, 0.1]))
    np.testing.assert_allclose(got, [1.0, 1.0, 0.5, 0.5, 0.1, 0.1], rtol=1e-6)


def test_piecewise_decay_checks_lengths():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(ValueError, match="len\\(values\\)"):
            fluid.layers.piecewise_decay(boundaries=[2, 4], values=[1.0, 0.5])


def test_decayed_lr_drives_sgd():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        w = fluid.layers.create_parameter(shape=[1], dtype="float32", name="w",
                                          default_initializer=fluid.initializer.Constant(1.0))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(x, w))
        lr = fluid.layers.piecewise_decay(boundaries=[1], values=[1.0, 0.1])
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    ws = []
    for _ in range(3):
        exe.run(main, feed={"x": np.ones((1, 1), "float32")}, scope=scope)
        ws.append(float(np.array(scope.find_var("w").get_tensor())[0]))
    np.testing.assert_allclose(ws, [0.0, -0.1, -0.2], atol=1e-6)
