"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h. Each section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling and convolution
# sequence_pool, sequence_first_step, sequence_last_step, sequence_conv

# ---------------------------------------------------------------- softmax, reverse, enumerate, erase, im2sequence, row_conv

# ---------------------------------------------------------------- expansion, concat, reshape, slice, pad, mask
# Ops in kernels/sequence_expand.cc, sequence_concat.cc, sequence_reshape.cc, sequence_slice.cc, sequence_pad.cc and
# sequence_mask.cc; docs/lod.md "Sequence ops: expansion, concat, reshape, slice, pad, mask".
__all__ += ["sequence_expand", "sequence_expand_as", "sequence_concat", "sequence_reshape", "sequence_slice",
            "sequence_pad", "sequence_unpad", "sequence_mask"]

_SEQ_SHAPE_DTYPES = ("float32", "float64", "int32", "int64")


def _seq_shape_check(layer, arg, v, dtypes=_SEQ_SHAPE_DTYPES):
    """TypeError naming the layer and the argument unless `v` is a Variable of one of `dtypes` (None: any; Fluid
    1.8's check_variable_and_dtype)."""
    from ..framework import dtype_to_str
    if not isinstance(v, Variable):
        raise TypeError("%s: '%s' must be a Variable, got %s" % (layer, arg, type(v).__name__))
    if dtypes is not None and dtype_to_str(v.dtype) not in dtypes:
        raise TypeError("%s: '%s' %s must be %s, got %s" % (layer, arg, v.name, " or ".join(dtypes),
                                                             dtype_to_str(v.dtype)))


def sequence_expand(x, y, ref_level=-1, name=None):
    """Repeats `x` as the LoD level `ref_level` of `y` says (-1: its last level): without LoD, row i of x is
    repeated len_i times; with one LoD level, x's sequence i is, each copy a sequence of the output."""
    _seq_shape_check("sequence_expand", "x", x)
    _seq_shape_check("sequence_expand", "y", y, dtypes=None)  # only y's LoD is read
    helper = LayerHelper("sequence_expand", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_expand", inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]},
                     attrs={"ref_level": int(ref_level)})
    return out


def sequence_expand_as(x, y, name=None):
    """Row i of `x` repeated as many times as `y`'s sequence i is long; the output takes y's LoD."""
    _seq_shape_check("sequence_expand_as", "x", x)
    _seq_shape_check("sequence_expand_as", "y", y, dtypes=None)
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
        _seq_shape_check("fluid.layers.sequence_concat", "input[%d]" % i, v, ("int64", "float32", "float64"))
    helper = LayerHelper("sequence_concat", name=name)
    out = helper.create_variable_for_type_inference(input[0].dtype if input else "float32")
    helper.append_op(type="sequence_concat", inputs={"X": list(input)}, outputs={"Out": [out]})
    return out


def sequence_reshape(input, new_dim):
    """Each sequence's values re-cut into rows of `new_dim` (len * D must divide by new_dim for every sequence)."""
    _seq_shape_check("fluid.layers.sequence_reshape", "input", input)
    helper = LayerHelper("sequence_reshape")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="sequence_reshape", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"new_dim": new_dim})
    return out


def sequence_slice(input, offset, length, name=None):
    """Sequence i of the output = rows [offset[i], offset[i] + length[i]) of input's sequence i; `offset` and
    `length` are [N, 1] int64 (or int32) tensors."""
    _seq_shape_check("sequence_slice", "input", input)
    _seq_shape_check("sequence_slice", "offset", offset, ("int32", "int64"))
    _seq_shape_check("sequence_slice", "length", length, ("int32", "int64"))
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
    _seq_shape_check("fluid.layers.sequence_pad", "x", x)
    _seq_shape_check("fluid.layers.sequence_pad", "pad_value", pad_value)
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
    _seq_shape_check("fluid.layers.sequence_unpad", "x", x)
    _seq_shape_check("fluid.layers.sequence_unpad", "length", length, ("int64",))
    helper = LayerHelper("sequence_unpad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length.stop_gradient = True
    helper.append_op(type="sequence_unpad", inputs={"X": [x], "Length": [length]}, outputs={"Out": [out]})
    out.desc.set_lod_level(1)  # the kernel gives it one level, from Length
    return out


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """mask[..., j] = j < x[...] as `dtype`, shape x.shape + [maxlen]; `maxlen` is an int, a Variable (read at run
    time) or None (max(x))."""
    _seq_shape_check("sequence_mask", "x", x, dtypes=("float32", "float64", "int32", "int64"))
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
