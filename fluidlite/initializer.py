"""Parameter initializers. Each appends one op to the startup program's global block, as Fluid does."""
import contextlib
import math

import numpy as np

from .framework import convert_np_dtype_to_dtype_

__all__ = ["Constant", "Uniform", "Normal", "Xavier", "MSRA", "NumpyArrayInitializer",
           "ConstantInitializer", "UniformInitializer", "NormalInitializer", "XavierInitializer",
           "MSRAInitializer", "TruncatedNormal", "init_on_cpu", "force_init_on_cpu"]

_force_init_on_cpu = False


def force_init_on_cpu():
    """True inside ``init_on_cpu()``."""
    return _force_init_on_cpu


@contextlib.contextmanager
def init_on_cpu():
    """Constant initializers built inside get ``force_cpu=True`` on their fill_constant, as in Fluid. The
    attribute is recorded only: fluidlite keeps every tensor of a program on the executor's place."""
    global _force_init_on_cpu
    before, _force_init_on_cpu = _force_init_on_cpu, True
    try:
        yield
    finally:
        _force_init_on_cpu = before


class Initializer:
    def __call__(self, var, block):
        raise NotImplementedError

    @staticmethod
    def _fans(var):
        shape = var.shape
        if len(shape) == 0:
            return 1, 1
        if len(shape) == 1:
            return shape[0], shape[0]
        if len(shape) == 2:
            return shape[0], shape[1]
        receptive = int(np.prod(shape[2:]))
        return shape[1] * receptive, shape[0] * receptive

    @staticmethod
    def _seed(block, seed):
        return seed if seed else block.program.random_seed


class ConstantInitializer(Initializer):
    def __init__(self, value=0.0, force_cpu=False):
        self.value, self.force_cpu = value, force_cpu

    def __call__(self, var, block):
        return block.append_op(type="fill_constant", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": int(var.dtype), "value": float(self.value),
                                      "force_cpu": bool(self.force_cpu or _force_init_on_cpu)})


class UniformInitializer(Initializer):
    def __init__(self, low=-1.0, high=1.0, seed=0):
        self.low, self.high, self.seed = low, high, seed

    def __call__(self, var, block):
        return block.append_op(type="uniform_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": int(var.dtype), "min": float(self.low),
                                      "max": float(self.high), "seed": self._seed(block, self.seed)})


class NormalInitializer(Initializer):
    def __init__(self, loc=0.0, scale=1.0, seed=0):
        self.loc, self.scale, self.seed = loc, scale, seed

    def __call__(self, var, block):
        return block.append_op(type="gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": int(var.dtype), "mean": float(self.loc),
                                      "std": float(self.scale), "seed": self._seed(block, self.seed)})


TruncatedNormal = NormalInitializer


class XavierInitializer(Initializer):
    """Glorot: uniform in +-sqrt(6 / (fan_in + fan_out)), or normal with std sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, uniform=True, fan_in=None, fan_out=None, seed=0):
        self.uniform, self.fan_in, self.fan_out, self.seed = uniform, fan_in, fan_out, seed

    def __call__(self, var, block):
        f_in, f_out = self._fans(var)
        fan_in = self.fan_in if self.fan_in is not None else f_in
        fan_out = self.fan_out if self.fan_out is not None else f_out
        if self.uniform:
            limit = math.sqrt(6.0 / float(fan_in + fan_out))
            return UniformInitializer(-limit, limit, self.seed)(var, block)
        return NormalInitializer(0.0, math.sqrt(2.0 / float(fan_in + fan_out)), self.seed)(var, block)


class MSRAInitializer(Initializer):
    """He: uniform in +-sqrt(6 / fan_in), or normal with std sqrt(2 / fan_in)."""

    def __init__(self, uniform=True, fan_in=None, seed=0):
        self.uniform, self.fan_in, self.seed = uniform, fan_in, seed

    def __call__(self, var, block):
        fan_in = self.fan_in if self.fan_in is not None else self._fans(var)[0]
        if self.uniform:
            limit = math.sqrt(6.0 / float(fan_in))
            return UniformInitializer(-limit, limit, self.seed)(var, block)
        return NormalInitializer(0.0, math.sqrt(2.0 / float(fan_in)), self.seed)(var, block)


class NumpyArrayInitializer(Initializer):
    """Initializes from a numpy array (stored as an `assign_value`-style fill per element group)."""

    def __init__(self, value):
        self.value = np.asarray(value)

    def __call__(self, var, block):
        if tuple(self.value.shape) != tuple(var.shape):
            raise ValueError("NumpyArrayInitializer: array shape %s does not match %s shape %s"
                             % (self.value.shape, var.name, var.shape))
        dtype = convert_np_dtype_to_dtype_(var.dtype)
        name = dtype.name
        if name in ("FP32", "FP64"):
            key, values = "fp32_values", self.value.astype(np.float32).ravel().tolist()
        elif name == "INT32":
            key, values = "int32_values", self.value.astype(np.int32).ravel().tolist()
        elif name == "INT64":
            key, values = "int64_values", self.value.astype(np.int64).ravel().tolist()
        elif name == "BOOL":
            key, values = "bool_values", self.value.astype(bool).ravel().tolist()
        else:
            raise TypeError("NumpyArrayInitializer does not support dtype %s" % name)
        return block.append_op(type="assign_value", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": int(dtype), key: values})


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
