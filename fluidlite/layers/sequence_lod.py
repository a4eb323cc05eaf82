"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h. Each section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling and convolution
# sequence_pool, sequence_first_step, sequence_last_step, sequence_conv
__all__ += ["sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_conv"]

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


def sequence_conv(input, num_filters, filter_size=3, filter_stride=1, padding=True, padding_start=None,
                  bias_attr=None, param_attr=None, act=None, name=None):
    """1-D convolution along each sequence of ``input`` ([T, D], lod_level >= 1): output row t is the concatenation
    of rows t + padding_start .. t + padding_start + filter_size - 1 of its sequence (zeros outside it) times the
    filter ``<name>.w_0`` [filter_size * D, num_filters]; then the bias ``<name>.b_0`` [num_filters] and ``act``.
    ``padding_start`` defaults to -(filter_size // 2) (centred); ``filter_stride`` must be 1. ``padding`` is
    accepted and has no effect, as in Fluid 1.8 (the padding is always zeros: no trainable PaddingData)."""
    _pool_conv_input("sequence_conv", input)
    if len(input.shape) != 2:
        raise ValueError("sequence_conv: input '%s' must be 2-D [T, D], got shape %s" % (input.name, list(input.shape)))
    if input.shape[1] is None or input.shape[1] < 1:
        raise ValueError("sequence_conv: input '%s' must have a known width D (shape %s)"
                         % (input.name, list(input.shape)))
    if isinstance(filter_size, bool) or not isinstance(filter_size, int) or filter_size < 1:
        raise ValueError("sequence_conv: filter_size must be an int >= 1, got %r" % (filter_size,))
    if filter_stride != 1:
        raise ValueError("sequence_conv: filter_stride must be 1 (the only stride Fluid supports), got %r"
                         % (filter_stride,))
    helper = LayerHelper("sequence_conv", input=input, bias_attr=bias_attr, param_attr=param_attr, act=act,
                         name=name)
    dtype = helper.input_dtype()
    filter_param = helper.create_parameter(attr=helper.param_attr, shape=[filter_size * input.shape[1], num_filters],
                                           dtype=dtype)
    pre_bias = helper.create_variable_for_type_inference(dtype)
    if padding_start is None:
        padding_start = -int(filter_size // 2)
    helper.append_op(type="sequence_conv", inputs={"X": [input], "Filter": [filter_param]},
                     outputs={"Out": [pre_bias]},
                     attrs={"contextStride": int(filter_stride), "contextStart": int(padding_start),
                            "contextLength": int(filter_size)})
    pre_act = helper.append_bias_op(pre_bias)
    return helper.append_activation(pre_act)


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
