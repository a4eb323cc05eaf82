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

# ---------------------------------------------------------------- LoD rewriting: lod_reset, lod_append
__all__ += ["lod_reset", "lod_append"]

_LOD_RESET_DTYPES = ("float32", "float64", "int32", "int64")


def _check_lod_input(layer, name, x):
    """Fluid 1.8's check_variable_and_dtype for lod_reset/lod_append, naming the variable too."""
    from ..framework import dtype_to_str
    if not isinstance(x, Variable):
        raise TypeError("The type of '%s' in %s must be %s, but received %s." % (name, layer, Variable, type(x)))
    if dtype_to_str(x.dtype) not in _LOD_RESET_DTYPES:
        raise TypeError("The data type of '%s' in %s must be %s, but received %s (variable '%s')."
                        % (name, layer, list(_LOD_RESET_DTYPES), dtype_to_str(x.dtype), x.name))


def lod_reset(x, y=None, target_lod=None):
    """Out = x's data with a new LoD: y's LoD if y (a Variable) holds one at run time, else y's values (int32 offsets)
    as one level; without y, `target_lod` (a list of level-0 offsets, e.g. [0, 4, 6]). Raises ValueError when both
    are None. Out's lod_level is y's (at least 1), or 1."""
    _check_lod_input("lod_reset", "x", x)
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
    _check_lod_input("lod_append", "x", x)
    helper = LayerHelper("lod_append", x=x, level=level)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    inputs, attrs = {"X": x}, {"append": True}
    if isinstance(level, Variable):
        inputs["Y"] = level
    else:
        attrs["target_lod"] = list(level)
    helper.append_op(type="lod_reset", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out
