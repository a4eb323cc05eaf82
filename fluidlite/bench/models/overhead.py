"""overhead: a chain of 1000 ``scale`` ops on a tiny float32 tensor.

Each op does ~16 multiply-adds, so a step measures what the executor costs per op (dispatch, variable
lookup, shape check) plus the fixed cost of one ``Executor.run`` (feed, fetch, Python entry).
"""
import numpy as np

import fluidlite as fluid

from . import Built

NUM_OPS = 1000
DESCRIPTION = "%d chained scale ops on a [batch_size] float32 tensor (per-op executor overhead)" % NUM_OPS
DEFAULTS = {"batch_size": 16, "iterations": 1000, "warmup": 50, "repeat": 5}


SCALE, BIAS = 1.0001, 0.001


def build_chain(num_ops, size, scale=SCALE, bias=BIAS):
    """Programs computing x -> scale*x + bias applied `num_ops` times, x a [size] float32 data var."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[size], dtype="float32", append_batch_size=False)
        h = x
        for _ in range(num_ops):
            h = fluid.layers.scale(h, scale=scale, bias=bias)
    return main, startup, h


def build(batch_size, seed):
    main, startup, out = build_chain(NUM_OPS, batch_size)
    main.random_seed = startup.random_seed = seed
    x = np.random.RandomState(seed).rand(batch_size).astype("float32")
    return Built(main, startup, lambda: {"x": x}, [out])


class NumpyChain:
    """numpy: ``x = x * s + b`` num_ops times (two numpy calls per op). Also used by
    benchmarks/op_overhead.py."""

    def __init__(self, x, num_ops=NUM_OPS):
        self.x, self.s, self.b, self.num_ops = x, np.float32(SCALE), np.float32(BIAS), num_ops

    def step(self):
        h = self.x
        for _ in range(self.num_ops):
            h = h * self.s + self.b
        return h


class TorchChain:
    """PyTorch eager under no_grad: ``h = h * s + b`` num_ops times. Also used by benchmarks/op_overhead.py."""

    def __init__(self, x, num_ops=NUM_OPS):
        import torch
        self.torch, self.x, self.num_ops = torch, torch.from_numpy(x), num_ops

    def step(self):
        with self.torch.no_grad():
            h = self.x
            for _ in range(self.num_ops):
                h = h * SCALE + BIAS
        return h.cpu().numpy()


def reference_numpy(params, feed):
    return NumpyChain(feed["x"])


def reference_torch(params, feed):
    return TorchChain(feed["x"])


def paddle_chain(x, num_ops=NUM_OPS):
    """paddle.static: ``paddle.scale(h, SCALE, BIAS)`` num_ops times on the fed x (an inference program, no
    optimizer); each step runs it through Executor.run."""
    from ..reference import PaddleStatic

    def build(pb):
        h = pb.data("x", x)
        for _ in range(num_ops):
            h = pb.paddle.scale(h, scale=SCALE, bias=BIAS)
        return h
    return PaddleStatic(build)


def reference_paddle(params, feed):
    return paddle_chain(feed["x"])
