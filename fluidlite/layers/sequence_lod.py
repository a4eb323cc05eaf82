"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h. Each section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401
from .checks import check_dtype, check_variable  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling and convolution
# sequence_pool, sequence_first_step, sequence_last_step, sequence_conv
__all__ += ["sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_conv"]

_POOL_TYPES = ("average", "sum", "sqrt", "max", "last", "first")


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0):
    """One row per sequence of ``input``'s last LoD level: ``pool_type`` "average", "sum", "sqrt" (sum divided by
    the square root of the length), "max", "last" or "first" (any case). An empty sequence gives ``pad_value``.
    A 2-level input pools its last level; the result keeps the first level as its LoD."""
    check_dtype("sequence_pool", "input", input, ("float32", "float64"))
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
    check_dtype("sequence_conv", "input", input, ("float32", "float64"))
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
    check_dtype("sequence_first_step", "input", input, ("float32", "float64"))
    return sequence_pool(input=input, pool_type="first")


def sequence_last_step(input):
    """The last row of each sequence: ``sequence_pool(input, "last")``."""
    check_dtype("sequence_last_step", "input", input, ("float32", "float64"))
    return sequence_pool(input=input, pool_type="last")

# ------------------------------------------------------ softmax, reverse, enumerate, erase, im2sequence, row_conv
__all__ += ["sequence_softmax", "sequence_reverse", "sequence_enumerate", "im2sequence", "row_conv"]


def sequence_softmax(input, use_cudnn=False, name=None):
    """Softmax over the time steps of each sequence (the last LoD level) of `input`, a float32/float64 LoDTensor
    [N, 1] or [N] (one value per step): Out[b:e] = exp(X[b:e]) / sum(exp(X[b:e])), computed stably. Returns a
    LoDTensor of `input`'s shape and LoD. `use_cudnn` is accepted and passed to the op (no effect on CPU)."""
    check_dtype("sequence_softmax", "input", input, ("float32", "float64"))
    helper = LayerHelper("sequence_softmax", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="sequence_softmax", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"use_cudnn": bool(use_cudnn)})
    return out


def sequence_reverse(x, name=None):
    """The rows of each sequence of `x` (a LoDTensor with one LoD level, rank >= 2) in reverse order; the result
    has `x`'s shape, dtype and LoD. Named `name` when given (as in Fluid 1.8), else a temporary."""
    check_dtype("fluid.layers.sequence_reverse", "x", x, ("float32", "float64", "int8", "int32", "int64"))
    helper = LayerHelper("sequence_reverse", name=name)
    if name is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    else:
        out = helper.create_variable(name=name, dtype=x.dtype, persistable=False)
    helper.append_op(type="sequence_reverse", inputs={"X": [x]}, outputs={"Y": [out]})
    return out


def sequence_enumerate(input, win_size, pad_value=0, name=None):
    """Every window of `win_size` consecutive ids of each sequence: `input` is an int32/int64 LoDTensor [N, 1] with
    one LoD level; row t of the result [N, win_size] holds ids t .. t + win_size - 1 of t's sequence, `pad_value`
    past its end. The result keeps `input`'s LoD and does not take gradients (win_size >= 2, as in Fluid)."""
    check_dtype("sequence_enumerate", "input", input, ("int32", "int64"))
    helper = LayerHelper("sequence_enumerate", name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type="sequence_enumerate", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"win_size": win_size, "pad_value": pad_value})
    return out


def im2sequence(input, filter_size=1, stride=1, padding=0, input_image_size=None, out_stride=1, name=None):
    """Each image of `input` (float32/float64 NCHW) becomes one sequence of its filter_size patches, scanned row by
    row: the result is a LoDTensor [N * out_h * out_w, C * kh * kw] with one sequence per image, where
    out_h = (H + up + down - kh) // stride_h + 1 (likewise out_w). `filter_size` and `stride` are ints or
    [h, w]; `padding` an int, [h, w] (meaning [h, w, h, w]) or [up, left, down, right].

    `input_image_size` (a [N, 2] Variable of real (height, width) per image, for batch inference) makes image n
    yield only the patches of its real size divided (rounding up) by `out_stride`, an int or [h, w]; as in Fluid it
    takes effect when the batch holds more than one image."""
    check_dtype("im2sequence", "input", input, ("float32", "float64"))
    if len(input.shape) != 4:
        raise ValueError("im2sequence: input %s must be 4-D [N, C, H, W], got shape %s"
                         % (input.name, list(input.shape)))

    def pair(arg, v):
        v = [v, v] if isinstance(v, int) else [int(e) for e in v]
        if len(v) != 2:
            raise ValueError("im2sequence: %s must be an int or a list of 2 ints, got %r" % (arg, v))
        return v

    padding = [padding, padding] if isinstance(padding, int) else [int(p) for p in padding]
    if len(padding) == 2:
        padding = padding * 2
    if len(padding) != 4:
        raise ValueError("im2sequence: padding must be an int, [h, w] or [up, left, down, right], got %r" % (padding,))
    inputs = {"X": [input]}
    attrs = {"kernels": pair("filter_size", filter_size), "strides": pair("stride", stride), "paddings": padding}
    if input_image_size is not None:
        inputs["Y"] = [input_image_size]
        attrs["out_stride"] = pair("out_stride", out_stride)
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    out.desc.set_lod_level(1)  # one sequence per image (Fluid's InferShape sets it at build time)
    helper.append_op(type="im2sequence", inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    return out


def row_conv(input, future_context_size, param_attr=None, act=None):
    """Lookahead (row) convolution of DeepSpeech2: out[t] = sum over i = 0 .. future_context_size of
    input[t + i] * W[i] (elementwise), within t's sequence. `input` is a float LoDTensor [T, D] or a padded batch
    [B, T, D] without LoD; W is the parameter ``row_conv_N.w_0`` of shape [future_context_size + 1, D] (Xavier
    initialised unless `param_attr` says otherwise). `act` is applied to the result."""
    check_dtype("row_conv", "input", input, ("float32", "float64"))
    if len(input.shape) not in (2, 3) or input.shape[-1] < 0:
        raise ValueError("row_conv: input %s must be [T, D] or [B, T, D] with D known, got shape %s"
                         % (input.name, list(input.shape)))
    helper = LayerHelper("row_conv", input=input, param_attr=param_attr, act=act)
    filter_param = helper.create_parameter(attr=helper.param_attr, shape=[future_context_size + 1, input.shape[-1]],
                                           dtype=input.dtype)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="row_conv", inputs={"X": [input], "Filter": [filter_param]}, outputs={"Out": [out]})
    return helper.append_activation(out)


# ---------------------------------------------------------------- expansion, concat, reshape, slice, pad, mask
# Ops in kernels/sequence_expand.cc, sequence_concat.cc, sequence_reshape.cc, sequence_slice.cc, sequence_pad.cc and
# sequence_mask.cc; docs/lod.md "Sequence ops: expansion, concat, reshape, slice, pad, mask".
__all__ += ["sequence_expand", "sequence_expand_as", "sequence_concat", "sequence_reshape", "sequence_slice",
            "sequence_pad", "sequence_unpad", "sequence_mask"]

_SEQ_SHAPE_DTYPES = ("float32", "float64", "int32", "int64")


def sequence_expand(x, y, ref_level=-1, name=None):
    """Repeats `x` as the LoD level `ref_level` of `y` says (-1: its last level): without LoD, row i of x is
    repeated len_i times; with one LoD level, x's sequence i is, each copy a sequence of the output."""
    check_dtype("sequence_expand", "x", x, _SEQ_SHAPE_DTYPES)
    check_variable("sequence_expand", "y", y)  # only y's LoD is read
    helper = LayerHelper("sequence_expand", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_expand", inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]},
                     attrs={"ref_level": int(ref_level)})
    return out


def sequence_expand_as(x, y, name=None):
    """Row i of `x` repeated as many times as `y`'s sequence i is long; the output takes y's LoD."""
    check_dtype("sequence_expand_as", "x", x, _SEQ_SHAPE_DTYPES)
    check_variable("sequence_expand_as", "y", y)
    helper = LayerHelper("sequence_expand_as", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_expand_as", inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]})
    return out


def sequence_concat(input, name=None):
    """Sequence i of the output = sequence i of input[0], then of input[1], ... (same number of sequences)."""
    if not isinstance(input, list):
        raise TypeError("fluid.layers.sequence_concat: 'input' must be a list of Variables, got %s"
                        % type(input).__name__)
    for i, v in enumerate(input):
        check_dtype("fluid.layers.sequence_concat", "input[%d]" % i, v, ("int64", "float32", "float64"))
    helper = LayerHelper("sequence_concat", name=name)
    out = helper.create_variable_for_type_inference(input[0].dtype if input else "float32")
    helper.append_op(type="sequence_concat", inputs={"X": list(input)}, outputs={"Out": [out]})
    return out


def sequence_reshape(input, new_dim):
    """Each sequence's values re-cut into rows of `new_dim` (len * D must divide by new_dim for every sequence)."""
    check_dtype("fluid.layers.sequence_reshape", "input", input, _SEQ_SHAPE_DTYPES)
    helper = LayerHelper("sequence_reshape")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="sequence_reshape", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"new_dim": new_dim})
    return out


def sequence_slice(input, offset, length, name=None):
    """Sequence i of the output = rows [offset[i], offset[i] + length[i]) of input's sequence i; `offset` and
    `length` are [N, 1] int64 (or int32) tensors."""
    check_dtype("sequence_slice", "input", input, _SEQ_SHAPE_DTYPES)
    check_dtype("sequence_slice", "offset", offset, ("int32", "int64"))
    check_dtype("sequence_slice", "length", length, ("int32", "int64"))
    helper = LayerHelper("sequence_slice", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    offset.stop_gradient = True
    length.stop_gradient = True
    helper.append_op(type="sequence_slice", inputs={"X": [input], "Offset": [offset], "Length": [length]},
                     outputs={"Out": [out]})
    return out


def sequence_pad(x, pad_value, maxlen=None, name=None):
    """Pads x's sequences to `maxlen` steps (None: the longest sequence) with `pad_value` (one value, or one step's
    shape). Returns (Out [N, maxlen, ...], Length int64 [N])."""
    check_dtype("fluid.layers.sequence_pad", "x", x, _SEQ_SHAPE_DTYPES)
    check_dtype("fluid.layers.sequence_pad", "pad_value", pad_value, _SEQ_SHAPE_DTYPES)
    helper = LayerHelper("sequence_pad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference("int64")
    pad_value.stop_gradient = True
    length.stop_gradient = True
    helper.append_op(type="sequence_pad", inputs={"X": [x], "PadValue": [pad_value]},
                     outputs={"Out": [out], "Length": [length]},
                     attrs={"padded_length": -1 if maxlen is None else maxlen})
    return out, length


def sequence_unpad(x, length, name=None):
    """The first length[i] steps of each x[i], as a LoDTensor with those lengths (the inverse of sequence_pad)."""
    check_dtype("fluid.layers.sequence_unpad", "x", x, _SEQ_SHAPE_DTYPES)
    check_dtype("fluid.layers.sequence_unpad", "length", length, ("int64",))
    helper = LayerHelper("sequence_unpad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length.stop_gradient = True
    helper.append_op(type="sequence_unpad", inputs={"X": [x], "Length": [length]}, outputs={"Out": [out]})
    out.desc.set_lod_level(1)  # the kernel gives it one level, from Length
    return out


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """mask[..., j] = j < x[...] as `dtype`, shape x.shape + [maxlen]; `maxlen` is an int, a Variable (read at run
    time) or None (max(x))."""
    check_dtype("sequence_mask", "x", x, dtypes=("float32", "float64", "int32", "int64"))
    helper = LayerHelper("sequence_mask", name=name)
    out = helper.create_variable_for_type_inference(dtype)
    inputs, attrs = {"X": [x]}, {"out_dtype": out.dtype}
    if isinstance(maxlen, Variable):
        inputs["MaxLenTensor"] = [maxlen]
    elif maxlen is not None:
        attrs["maxlen"] = maxlen
    helper.append_op(type="sequence_mask", inputs=inputs, outputs={"Y": [out]}, attrs=attrs)
    out.stop_gradient = True
    return out


# ---------------------------------------------------------------- LoD rewriting: lod_reset, lod_append
__all__ += ["lod_reset", "lod_append"]

_LOD_RESET_DTYPES = ("float32", "float64", "int32", "int64")


def lod_reset(x, y=None, target_lod=None):
    """Out = x's data with a new LoD: y's LoD if y (a Variable) holds one at run time, else y's values (int32 offsets)
    as one level; without y, `target_lod` (a list of level-0 offsets, e.g. [0, 4, 6]). Raises ValueError when both
    are None. Out's lod_level is y's (at least 1), or 1."""
    check_dtype("lod_reset", "x", x, _LOD_RESET_DTYPES)
    helper = LayerHelper("lod_reset", x=x, y=y, target_lod=target_lod)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    if y is not None:
        if not isinstance(y, Variable):
            raise TypeError("The type of 'y' in lod_reset must be %s, but received %s." % (Variable, type(y)))
        helper.append_op(type="lod_reset", inputs={"X": x, "Y": y}, outputs={"Out": out})
    elif target_lod is not None:
        if not isinstance(target_lod, (list, tuple)):
            raise TypeError("lod_reset: target_lod must be a list or tuple of offsets, got %s"
                            % type(target_lod).__name__)
        helper.append_op(type="lod_reset", inputs={"X": x}, outputs={"Out": out},
                         attrs={"target_lod": list(target_lod)})
    else:
        raise ValueError("y and target_lod should not be both none.")
    return out


def lod_append(x, level):
    """Out = x's data with one more LoD level below x's: `level` is a list or tuple of offsets into x's rows (e.g.
    [0, 1, 2, ..., rows]) or a Variable holding them (a Variable with a LoD at run time gives its LoD instead, as
    lod_reset does). Out's lod_level is x's + 1."""
    from collections.abc import Iterable
    if x is None:
        raise ValueError("Input(x) can't be None.")
    if not isinstance(level, (Iterable, Variable)):
        raise ValueError("Input(level) must be list, tuple or Variable.")
    check_dtype("lod_append", "x", x, _LOD_RESET_DTYPES)
    helper = LayerHelper("lod_append", x=x, level=level)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    inputs, attrs = {"X": x}, {"append": True}
    if isinstance(level, Variable):
        inputs["Y"] = level
    else:
        attrs["target_lod"] = list(level)
    helper.append_op(type="lod_reset", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out
