"""fit_a_line: Fluid's linear-regression example, one SGD training step on 13 features (batch 20).

Tiny math (a [20, 13] x [13, 1] product), so a step measures the executor: 16 ops incl. backward and SGD.
"""
import numpy as np

import fluidlite as fluid

from . import Built
from ..reference import NumpyDense, TorchDense, paddle_dense

DESCRIPTION = "Fluid's fit_a_line: fc(13 -> 1), square error, mean, SGD step"
DEFAULTS = {"batch_size": 20, "iterations": 2000, "warmup": 100, "repeat": 5}
LEARNING_RATE = 0.001


def build(batch_size, seed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y))
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(avg_cost)
    rng = np.random.RandomState(seed)
    xs = rng.rand(batch_size, 13).astype("float32")
    ys = rng.rand(batch_size, 1).astype("float32")
    return Built(main, startup, lambda: {"x": xs, "y": ys}, [avg_cost])


def reference_numpy(params, feed):
    return NumpyDense(params, feed["x"], feed["y"], "mse", LEARNING_RATE)


def reference_torch(params, feed):
    return TorchDense(params, feed["x"], feed["y"], "mse", LEARNING_RATE)


def reference_paddle(params, feed):
    return paddle_dense(params, feed["x"], feed["y"], "mse", LEARNING_RATE)
