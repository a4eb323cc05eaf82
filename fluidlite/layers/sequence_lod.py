"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h. Each section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling and convolution
# sequence_pool, sequence_first_step, sequence_last_step, sequence_conv
__all__ += ["sequence_pool", "sequence_first_step", "sequence_last_step"]

_POOL_TYPES = ("average", "sum", "sqrt", "max", "last", "first")


def _pool_conv_input(layer, input):
    """Build-time checks of the pooling and convolution layers' input: a float32/float64 Variable."""
    from ..framework import dtype_to_str
    if not isinstance(input, Variable):
        raise TypeError("%s: 'input' must be a Variable, got %s" % (layer, type(input).__name__))
    if dtype_to_str(input.dtype) not in ("float32", "float64"):
        raise TypeError("%s: input '%s' must be float32 or float64, got %s"
                        % (layer, input.name, dtype_to_str(input.dtype)))


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0):
    """One row per sequence of ``input``'s last LoD level: ``pool_type`` "average", "sum", "sqrt" (sum divided by
    the square root of the length), "max", "last" or "first" (any case). An empty sequence gives ``pad_value``.
    A 2-level input pools its last level; the result keeps the first level as its LoD."""
    _pool_conv_input("sequence_pool", input)
    if not isinstance(pool_type, str) or pool_type.lower() not in _POOL_TYPES:
        raise ValueError("sequence_pool: pool_type must be one of %s (any case), got %r"
                         % (", ".join(_POOL_TYPES), pool_type))
    helper = LayerHelper("sequence_pool", input=input)
    dtype = helper.input_dtype()
    pool_out = helper.create_variable_for_type_inference(dtype)
    max_index = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="sequence_pool", inputs={"X": [input]}, outputs={"Out": [pool_out], "MaxIndex": [max_index]},
                     attrs={"pooltype": pool_type.upper(), "is_test": bool(is_test), "pad_value": float(pad_value)})
    if input.lod_level > 0:  # pooling removes the last level (the kernel sets the run-time LoD)
        pool_out.desc.set_lod_level(input.lod_level - 1)
    max_index.stop_gradient = True
    return pool_out


def sequence_first_step(input):
    """The first row of each sequence: ``sequence_pool(input, "first")``."""
    _pool_conv_input("sequence_first_step", input)
    return sequence_pool(input=input, pool_type="first")


def sequence_last_step(input):
    """The last row of each sequence: ``sequence_pool(input, "last")``."""
    _pool_conv_input("sequence_last_step", input)
    return sequence_pool(input=input, pool_type="last")

# ------------------------------------------------------------ softmax, reverse, enumerate, erase, im2sequence, row_conv

# ---------------------------------------------------------------- expansion, concat, reshape, slice, pad, mask

# ---------------------------------------------------------------- LoD rewriting: lod_reset, lod_append
