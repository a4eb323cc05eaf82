"""mlp: a 784-512-512-10 ReLU classifier, one SGD training step with softmax cross-entropy (batch 64).

Three GEMMs forward and five backward dominate; the rest is elementwise work and executor overhead.
"""
import numpy as np

import fluidlite as fluid

from . import Built
from ..reference import NumpyDense, TorchDense, paddle_dense

DESCRIPTION = "MLP 784-512-512-10 (relu), softmax cross-entropy, SGD step"
DEFAULTS = {"batch_size": 64, "iterations": 50, "warmup": 10, "repeat": 5}
SIZES = (784, 512, 512, 10)
LEARNING_RATE = 0.01


def build(batch_size, seed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=[SIZES[0]], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = img
        for size in SIZES[1:-1]:
            h = fluid.layers.fc(input=h, size=size, act="relu")
        logits = fluid.layers.fc(input=h, size=SIZES[-1])
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
    rng = np.random.RandomState(seed)
    images = rng.rand(batch_size, SIZES[0]).astype("float32")
    labels = rng.randint(0, SIZES[-1], size=(batch_size, 1)).astype("int64")
    return Built(main, startup, lambda: {"img": images, "label": labels}, [loss])


def reference_numpy(params, feed):
    return NumpyDense(params, feed["img"], feed["label"], "softmax_ce", LEARNING_RATE)


def reference_torch(params, feed):
    return TorchDense(params, feed["img"], feed["label"], "softmax_ce", LEARNING_RATE)


def reference_paddle(params, feed):
    return paddle_dense(params, feed["img"], feed["label"], "softmax_ce", LEARNING_RATE)
